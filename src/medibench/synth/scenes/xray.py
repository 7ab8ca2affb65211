"""Chest X-ray-like projection (posteroanterior), in attenuation units.

Radiological convention: the patient faces the viewer, so the patient's left is on the image's
right. The heart therefore bulges to the image's right, the right hemidiaphragm (image left) sits
higher than the left one, and ``lung_left`` is the lung on the image's right.

Raw values (``Rendered.raw``) are line integrals of attenuation (``mu * thickness``, unitless;
air 0, the full chest about 1, lungs about 0.3, mediastinum, spine and abdomen 1.4-1.9); the
image shows them with bright meaning dense, ``display = (0, 2)``. Quantum noise is Gaussian in
those units (``sigma = 0.015 x scene.noise``). A lesion adds attenuation: a nodule's ``contrast``
is the extra attenuation through its centre (0.15 faint, 0.5 obvious), falling off as a sphere's
chord length towards its border.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from medibench.synth.scenes._scene import Lesion, Rendered, Scene
from medibench.synth.scenes._texture import (
    LesionPatch,
    compose_raw,
    coords,
    correlated_noise,
    ellipse_rho,
    fractal_noise,
    kind_shapes,
    smooth_noise,
    soft_edge,
    vessel_tree,
)

STRUCTURES = (
    "body",
    "lung_left",
    "lung_right",
    "heart",
    "mediastinum",
    "spine",
    "ribs",
    "clavicles",
    "diaphragm",
    "abdomen",
)
HOSTS = ("lung_left", "lung_right")
VARIANTS = ("pa",)

DISPLAY = (0.0, 2.0)
NOISE = 0.015
_SHAPE = {"nodule": (0.08, 0.15), "mass": (0.14, 0.25), "cyst": (0.0, 0.1)}
_SHAPES = kind_shapes(_SHAPE, (0.08, 0.15))


def make_params(rng: np.random.Generator, clutter: float, variant: str) -> dict[str, Any]:
    """Chest width, lung height, heart size and position, dome heights; normalised units."""
    u = lambda a, b: round(float(rng.uniform(a, b)), 4)  # noqa: E731
    return {
        "chest_width": u(0.76, 0.88),
        "lung_height": u(0.5, 0.6),
        "heart": (u(0.24, 0.32), u(0.26, 0.36)),
        "heart_shift": u(0.06, 0.16),
        "domes": (u(0.4, 0.48), u(0.46, 0.54)),
        "rib_phase": u(-0.05, 0.05),
    }


def anatomy(size: int, seed: int, params: dict[str, Any], noise: float) -> dict[str, Any]:
    """Lesion-free attenuation image, labels and the noise field of one scene."""
    rng = np.random.default_rng(seed)
    y, x = coords(size)
    warp = smooth_noise(rng, size, 5)
    w = params["chest_width"]
    rho_body = ellipse_rho(size, (0.15, 0.0), (1.2, w), warp=warp, wobble=0.015)
    body = rho_body < 1
    raw = 1.0 * np.sqrt(np.clip(1 - rho_body**2, 0, 1))

    # Domes: the lung bases; the right hemidiaphragm (image left) is higher.
    dome_r, dome_l = params["domes"]
    dome = np.where(
        x < 0, dome_r - 0.25 * ((x + 0.4) / 0.45) ** 2, dome_l - 0.25 * ((x - 0.4) / 0.45) ** 2
    )
    below = (y > dome) & body
    abdomen_w = np.clip((y - dome) / 0.06, 0, 1)
    raw = raw + 0.6 * abdomen_w * body

    h = params["lung_height"]
    labels: dict[str, np.ndarray] = {"body": body}
    lung_rho = {
        "lung_right": ellipse_rho(size, (-0.1, -0.44 * w / 0.82), (h, 0.3), -4.0, warp, 0.03),
        "lung_left": ellipse_rho(size, (-0.08, 0.44 * w / 0.82), (h, 0.28), 4.0, warp, 0.03),
    }
    hy, hx = params["heart"]
    heart_rho = ellipse_rho(
        size, (dome_l - hy * 0.95, params["heart_shift"]), (hy, hx), 25.0, warp, 0.02
    )
    heart = (heart_rho < 1) & ~below
    displaced = 1.0 - 0.85 * soft_edge(heart_rho, 0.4)  # the heart pushes the lung aside
    lungs_any = np.zeros((size, size), bool)
    for name, rho in lung_rho.items():
        lung = (rho < 1) & (y < dome) & body
        fade = np.clip((dome - y) / 0.04, 0, 1)  # the lung base thins out over the dome
        raw = raw - 0.7 * np.sqrt(np.clip(1 - rho**2, 0, 1)) * fade * displaced * body
        labels[name] = lung & ~heart
        lungs_any |= lung
    raw = raw + 0.6 * np.sqrt(np.clip(1 - heart_rho**2, 0, 1)) * (heart_rho < 1)
    labels["heart"] = heart
    medi = (np.abs(x - 0.02) < 0.1 + 0.06 * np.clip(y + 0.2, 0, 1)) & (y < dome_l) & body & ~heart
    raw = raw + 0.25 * cv2.GaussianBlur(medi.astype(np.float32), (0, 0), size / 150)
    labels["mediastinum"] = medi & ~lungs_any
    spine = (np.abs(x) < 0.065) & body
    plates = 0.5 + 0.5 * np.cos(2 * np.pi * (y + params["rib_phase"]) / 0.11)
    raw = raw + (0.12 + 0.06 * plates) * spine
    labels["spine"] = spine

    bones = np.zeros((size, size), np.uint8)
    scale = size / 2.0
    thick = max(1, int(round(0.022 * scale)))
    for k in range(10):
        y0 = -0.72 + params["rib_phase"] + 0.13 * k
        for side in (-1.0, 1.0):
            t = np.linspace(0.0, 1.0, 24)
            rx = side * (0.07 + 0.72 * w * t)
            ry = y0 - 0.07 * np.sin(np.pi * t) + (0.16 + 0.02 * k) * t**2
            pts = np.stack([(rx + 1) * scale * 16, (ry + 1) * scale * 16], 1).astype(np.int32)
            cv2.polylines(bones, [pts], False, 1, thick, cv2.LINE_AA, shift=4)
    clav = np.zeros((size, size), np.uint8)
    for side in (-1.0, 1.0):
        t = np.linspace(0.0, 1.0, 16)
        pts = np.stack(
            [
                (side * (0.08 + 0.55 * t) + 1) * scale * 16,
                (-0.78 + 0.06 * np.sin(np.pi * t) - 0.08 * t + 1) * scale * 16,
            ],
            1,
        )
        cv2.polylines(clav, [pts.astype(np.int32)], False, 1, thick + 1, cv2.LINE_AA, shift=4)
    ribs = (bones > 0) & body & ~below
    raw = (
        raw
        + 0.13 * cv2.GaussianBlur(ribs.astype(np.float32), (0, 0), size / 400)
        + 0.3 * ((clav > 0) & body)
    )
    labels["ribs"] = ribs
    labels["clavicles"] = (clav > 0) & body
    labels["diaphragm"] = (np.abs(y - dome) < 0.025) & body & (np.abs(x) > 0.12)
    labels["abdomen"] = below

    roots = [(-0.05, -0.12, a) for a in (200.0, 160.0, 120.0)] + [
        (-0.05, 0.14, a) for a in (-20.0, 20.0, 60.0)
    ]
    vessels = vessel_tree(rng, size, roots, length=0.2, width=0.014, depth=4, spread=26.0)
    raw = raw + (0.08 + 0.1 * params["clutter"]) * vessels * lungs_any
    raw = raw + 0.03 * fractal_noise(rng, size, 6, 3) * body
    raw = cv2.GaussianBlur(raw.astype(np.float32), (0, 0), 0.7)

    corr = correlated_noise(rng, size, 0.6, NOISE * noise)
    return {"raw": raw, "noise": corr, "labels": labels}


def compose(scene: Scene, anat: dict[str, Any]) -> Rendered:
    """Add the lesions' attenuation (before noise), then the noise, then the display range."""
    return compose_raw(scene, anat, _SHAPES, _attenuation, DISPLAY)


def _attenuation(lesion: Lesion, patch: LesionPatch) -> np.ndarray:
    """Thicker at the centre of the (dome-shaped) lesion."""
    return np.float32(lesion.contrast) * patch.height * patch.weight
