"""Fundus-like colour photograph of the retina.

An orange-red retina with choroidal texture inside a circular field of view, darker towards its
edge; a bright yellowish optic disc with a paler cup; a darker macula with a fovea about 2.5 disc
diameters temporal to the disc; vessels branching from the disc in four arcades. Variants
``"od"`` (right eye: disc on the image's right, the usual photographic view) and ``"os"`` (left
eye: disc on the left). No raw image: colour modality.

Lesions sit in the retina, under the vessels: ``"haemorrhage"`` blends towards dark red,
``"drusen"`` and ``"exudate"`` towards yellow-white; ``contrast`` in ``[0, 1]`` is the opacity at
the core.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from medibench.synth.scenes._scene import Lesion, Rendered, Scene
from medibench.synth.scenes._texture import (
    LesionPatch,
    coords,
    ellipse_rho,
    fractal_noise,
    paint_lesions,
    rgb_to_uint8,
    sensor_noise,
    soft_edge,
    vessel_tree,
)

STRUCTURES = ("field_of_view", "retina", "optic_disc", "macula", "vessels")
HOSTS = ("retina", "macula")
VARIANTS = ("od", "os")

NOISE = 0.01
_RETINA = np.array([0.82, 0.36, 0.14], np.float32)
_DISC = np.array([1.0, 0.86, 0.6], np.float32)
_VESSEL = np.array([0.5, 0.1, 0.06], np.float32)
_LESION = {  # colour, irregularity, softness
    "haemorrhage": ((0.42, 0.05, 0.03), 0.18, 0.35),
    "drusen": ((0.98, 0.88, 0.45), 0.05, 0.5),
    "exudate": ((1.0, 0.93, 0.55), 0.15, 0.3),
}


def make_params(rng: np.random.Generator, clutter: float, variant: str) -> dict[str, Any]:
    """Disc position and size, pigmentation; normalised units."""
    u = lambda a, b: round(float(rng.uniform(a, b)), 4)  # noqa: E731
    return {
        "disc": (u(-0.08, 0.08), u(0.36, 0.46)),
        "disc_radius": u(0.09, 0.12),
        "pigment": u(0.85, 1.1),
        "fov": u(0.9, 0.97),
    }


def anatomy(size: int, seed: int, params: dict[str, Any], noise: float) -> dict[str, Any]:
    """Lesion-free retina colour, vessel layer, illumination and noise of one scene."""
    rng = np.random.default_rng(seed)
    side = 1.0 if params["variant"] == "od" else -1.0
    dy, dx = params["disc"]
    dx *= side
    dr = params["disc_radius"]
    y, x = coords(size)
    r = np.sqrt(y**2 + x**2) / np.float32(params["fov"])
    fov = r < 1
    texture = 1.0 + 0.07 * fractal_noise(rng, size, 6, 4)
    rgb = _RETINA * np.float32(params["pigment"]) * texture[:, :, None]
    disc_rho = ellipse_rho(size, (dy, dx), (dr * 1.1, dr))
    disc_w = soft_edge(disc_rho, 0.25)[:, :, None]
    cup = soft_edge(disc_rho / 0.5, 0.6)[:, :, None]
    rgb = rgb * (1 - disc_w) + (_DISC * (1 - 0.1 * cup) + 0.1 * cup) * disc_w
    mac = (dy + 0.04, dx - side * 0.5)
    mac_rho = ellipse_rho(size, mac, (0.16, 0.16))
    rgb *= (
        1.0 - (0.35 * soft_edge(mac_rho, 0.9) + 0.15 * soft_edge(mac_rho / 0.15, 0.5))[:, :, None]
    )
    arcades = (220.0, 140.0, -35.0, 35.0)  # temporal up/down, nasal up/down (disc on the right)
    roots = [(dy, dx, (a if side > 0 else 180.0 - a) + rng.normal(0, 8)) for a in arcades]
    vessels = vessel_tree(
        rng, size, roots, length=0.42, width=0.018, depth=5, spread=32.0, tortuosity=8.0
    )
    vessels *= (disc_rho > 0.3).astype(np.float32)
    illum = (np.clip(1.1 - 0.5 * r**3, 0, 1) * np.clip((1 - r) * size / 4, 0, 1)).astype(np.float32)
    sensor = sensor_noise(rng, size, NOISE * noise, illum)
    labels = {
        "field_of_view": fov,
        "retina": fov & (disc_rho > 1.15),
        "optic_disc": disc_rho < 1,
        "macula": mac_rho < 1,
        "vessels": vessels > 0.4,
    }
    return {
        "rgb": rgb.astype(np.float32),
        "vessels": vessels,
        "illum": illum,
        "noise": sensor,
        "labels": labels,
    }


def compose(scene: Scene, anat: dict[str, Any]) -> Rendered:
    """Lesions in the retina, then vessels over them, illumination and sensor noise."""
    rgb = anat["rgb"].copy()
    labels = draw_lesions(rgb, scene, anat["labels"])
    v = anat["vessels"][:, :, None]
    rgb = rgb * (1 - 0.85 * v) + _VESSEL * 0.85 * v
    rgb = rgb * anat["illum"][:, :, None]
    if scene.noise:
        rgb = rgb + anat["noise"]
    return Rendered(rgb_to_uint8(rgb), labels)


def draw_lesions(
    rgb: np.ndarray, scene: Scene, labels: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Blend each lesion's colour into the float RGB retina ``rgb`` (in place); return ``labels``
    with the lesions'. ``fundus-real`` paints its lesions with this too."""

    def paint(lesion: Lesion, patch: LesionPatch) -> None:
        colour = _look(lesion)[0]
        alpha = np.clip(np.float32(lesion.contrast) * patch.weight, 0, 1)[:, :, None]
        box = rgb[patch.rows, patch.cols]
        rgb[patch.rows, patch.cols] = box * (1 - alpha) + np.array(colour, np.float32) * alpha

    return paint_lesions(scene.lesions, scene.size, labels, _shape, paint)


def _look(lesion: Lesion) -> tuple[tuple[float, float, float], float, float]:
    """``(colour, irregularity, softness)`` of the lesion's kind."""
    return _LESION.get(lesion.kind, _LESION["haemorrhage"])


def _shape(lesion: Lesion) -> dict[str, float]:
    _, irregularity, softness = _look(lesion)
    return {"irregularity": irregularity, "softness": softness, "texture": 0.2}
