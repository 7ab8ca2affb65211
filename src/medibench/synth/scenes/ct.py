"""CT-like axial slice, abdominal or thoracic, in Hounsfield units.

Radiological convention, as in every axial CT: the patient is seen from the feet, so the
patient's left is on the image's right (the liver, on the patient's right, is on the image's
left) and anterior is up.

Raw values (``Rendered.raw``) are Hounsfield-like: air -1000, lung about -850, fat -100, water 0,
kidney 30, spleen 48, muscle 50, liver 60, vertebral bone 250 (cancellous) to 800 (cortex). CT
noise is correlated Gaussian noise in HU (``sigma = 12 HU x scene.noise``). The image shows the
soft-tissue window, centre 40 / width 400 (``display = (-160, 240)``).

Variants: ``"abdomen"`` (liver, spleen, kidneys, aorta, bowel) and ``"thorax"`` (lungs with
vessel markings, heart, aorta, ribs). A lesion's ``contrast`` is the HU it adds to its host
(a hypodense liver metastasis is about -40, a solid lung nodule about +850).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from medibench.synth.scenes._scene import Lesion, Rendered, Scene
from medibench.synth.scenes._texture import (
    LesionPatch,
    compose_raw,
    correlated_noise,
    ellipse_rho,
    fractal_noise,
    kind_shapes,
    smooth_noise,
    vessel_tree,
)

STRUCTURES = (
    "body",
    "subcutaneous_fat",
    "muscle",
    "bowel",
    "liver",
    "spleen",
    "kidney_left",
    "kidney_right",
    "aorta",
    "spine",
    "lung_left",
    "lung_right",
    "heart",
)
HOSTS = ("liver", "spleen", "kidney_left", "kidney_right", "lung_left", "lung_right", "muscle")
VARIANTS = ("abdomen", "thorax")

WINDOW = (40.0, 400.0)  # centre, width (soft tissue)
DISPLAY = (WINDOW[0] - WINDOW[1] / 2, WINDOW[0] + WINDOW[1] / 2)
NOISE_HU = 12.0
# Border irregularity and edge softness (fraction of the radius) per lesion kind.
_SHAPE = {"cyst": (0.0, 0.15), "nodule": (0.1, 0.15), "mass": (0.12, 0.3), "metastasis": (0.1, 0.3)}
_SHAPES = kind_shapes(_SHAPE, (0.08, 0.3))

# Mean HU and texture amplitude (HU std) per tissue.
_TISSUE = {
    "fat": (-100.0, 8.0),
    "muscle": (50.0, 6.0),
    "bowel": (30.0, 14.0),
    "liver": (60.0, 5.0),
    "spleen": (48.0, 5.0),
    "kidney": (32.0, 5.0),
    "aorta": (45.0, 3.0),
    "bone": (250.0, 60.0),
    "lung": (-850.0, 25.0),
    "heart": (42.0, 4.0),
    "csf": (8.0, 3.0),
}


def make_params(rng: np.random.Generator, clutter: float, variant: str) -> dict[str, Any]:
    """Body shape and organ placement jitter, all in normalised units."""
    u = lambda a, b: round(float(rng.uniform(a, b)), 4)  # noqa: E731
    return {
        "body_radii": (u(0.55, 0.68), u(0.82, 0.92)),
        "body_center": u(-0.04, 0.06),
        "fat": u(0.05, 0.14),
        "organ_scale": u(0.9, 1.1),
        "organ_shift": (u(-0.05, 0.05), u(-0.05, 0.05)),
        "wobble": u(0.02, 0.05),
    }


def anatomy(size: int, seed: int, params: dict[str, Any], noise: float) -> dict[str, Any]:
    """Lesion-free HU image, labels and the noise field of one scene."""
    rng = np.random.default_rng(seed)
    warp = smooth_noise(rng, size, 6)
    ry, rx = params["body_radii"]
    cy = params["body_center"]
    rho_body = ellipse_rho(size, (cy, 0.0), (ry, rx), warp=warp, wobble=params["wobble"])
    body = rho_body < 1
    inner = 1.0 - params["fat"]
    cavity = rho_body < inner - 0.06
    s = params["organ_scale"]
    sy, sx = params["organ_shift"]

    def organ(py, px, oy, ox, angle=0.0, wobble=0.04):
        center = (cy + (py + sy) * ry, (px + sx) * rx)
        return ellipse_rho(size, center, (oy * ry * s, ox * rx * s), angle, warp, wobble)

    labels: dict[str, np.ndarray] = {"body": body}
    tissue = np.zeros((size, size), np.uint8)  # index into _ORDER
    tissue[body] = _ORDER.index("fat")
    muscle = (rho_body < inner) & ~cavity
    rho_vb = ellipse_rho(size, (cy + 0.5 * ry, 0.0), (0.14 * ry, 0.12 * rx))
    posterior = ellipse_rho(size, (cy + 0.74 * ry, 0.0), (0.09 * ry, 0.14 * rx))
    canal = ellipse_rho(size, (cy + 0.68 * ry, 0.0), (0.05 * ry, 0.05 * rx)) < 1
    paraspinal = (
        (ellipse_rho(size, (cy + 0.74 * ry, -0.24 * rx), (0.17 * ry, 0.13 * rx)) < 1)
        | (ellipse_rho(size, (cy + 0.74 * ry, 0.24 * rx), (0.17 * ry, 0.13 * rx)) < 1)
    ) & body
    spine = ((rho_vb < 1) | (posterior < 1)) & ~canal
    muscle |= paraspinal
    tissue[muscle] = _ORDER.index("muscle")
    marks = np.zeros((size, size), np.float32)  # extra HU: vessel markings, gas

    if params["variant"] == "abdomen":
        bowel = cavity & (fractal_noise(rng, size, 5, 3) > -0.2)
        tissue[bowel] = _ORDER.index("bowel")
        gas = bowel & (fractal_noise(rng, size, 12, 2) > 2.2 - 1.2 * params["clutter"])
        marks[gas] = -900.0
        organs = {
            "liver": organ(-0.2, -0.42, 0.55, 0.42, 25.0),
            "spleen": organ(0.12, 0.6, 0.26, 0.14, -30.0),
            "kidney_right": organ(0.38, -0.33, 0.2, 0.12, 20.0),
            "kidney_left": organ(0.38, 0.33, 0.2, 0.12, -20.0),
        }
        for name, rho in organs.items():
            mask = (rho < 1) & cavity & ~paraspinal
            tissue[mask] = _ORDER.index(name.split("_")[0])
            labels[name] = mask
        for side in ("kidney_left", "kidney_right"):  # medulla darker than cortex
            marks[(organs[side] < 0.55) & labels[side]] -= 10.0
        labels["bowel"] = bowel & ~np.logical_or.reduce([labels[k] for k in organs])
        aorta_center = (cy + 0.28 * ry, 0.08 * rx)
    else:
        lungs = {
            "lung_right": organ(-0.08, -0.45, 0.62, 0.36, 0.0, 0.06),
            "lung_left": organ(-0.08, 0.45, 0.6, 0.33, 0.0, 0.06),
        }
        heart = (organ(-0.02, 0.14, 0.4, 0.3, 35.0) < 1) & cavity
        for name, rho in lungs.items():
            mask = (rho < 1) & cavity & ~heart & ~paraspinal
            tissue[mask] = _ORDER.index("lung")
            labels[name] = mask
        tissue[heart] = _ORDER.index("heart")
        labels["heart"] = heart
        lung_any = labels["lung_left"] | labels["lung_right"]
        roots = [(cy - 0.05 * ry, -0.18 * rx, a) for a in (150.0, 200.0, 250.0)]
        roots += [(cy - 0.05 * ry, 0.18 * rx, a) for a in (30.0, -20.0, -70.0)]
        vessels = vessel_tree(rng, size, roots, length=0.22, width=0.012, depth=4, spread=28.0)
        marks += np.where(lung_any, vessels * (500.0 + 400.0 * params["clutter"]), 0.0)
        ribs = np.zeros((size, size), bool)
        for a in np.linspace(-150.0, -30.0, 5).tolist() + np.linspace(20.0, 160.0, 6).tolist():
            t = np.radians(a)
            rr = inner - 0.03
            rib = ellipse_rho(
                size, (cy + rr * ry * np.sin(t), rr * rx * np.cos(t)), (0.035, 0.05), a + 90
            )
            ribs |= (rib < 1) & body
        spine |= ribs
        aorta_center = (cy + 0.32 * ry, 0.16 * rx)
    aorta = ellipse_rho(size, aorta_center, (0.065 * ry, 0.065 * rx * ry / rx)) < 1
    tissue[aorta] = _ORDER.index("aorta")
    tissue[spine] = _ORDER.index("bone")
    tissue[canal] = _ORDER.index("csf")
    labels.update(
        aorta=aorta,
        spine=spine,
        muscle=muscle & ~spine & ~aorta,
        subcutaneous_fat=body & ~(rho_body < inner),
    )

    means = np.array([-1000.0] + [_TISSUE[t][0] for t in _ORDER[1:]], np.float32)
    amps = np.array([0.0] + [_TISSUE[t][1] for t in _ORDER[1:]], np.float32)
    grain = fractal_noise(rng, size, 8, 3)
    raw = means[tissue] + amps[tissue] * grain + marks
    raw += np.where(rho_vb < 1, np.clip((rho_vb - 0.8) * 2800.0, 0.0, 550.0), 0.0)  # cortex
    raw = cv2.GaussianBlur(raw.astype(np.float32), (0, 0), 0.6)  # partial volume at edges

    corr = correlated_noise(rng, size, 0.8, NOISE_HU * noise)
    return {"raw": raw, "noise": corr, "labels": labels}


def compose(scene: Scene, anat: dict[str, Any]) -> Rendered:
    """Add the lesions (in HU, before noise), then the noise, then window."""
    return compose_raw(scene, anat, _SHAPES, _hu_delta, DISPLAY)


def _hu_delta(lesion: Lesion, patch: LesionPatch) -> np.ndarray:
    return np.float32(lesion.contrast) * patch.weight


_ORDER = (
    "air",
    "fat",
    "muscle",
    "bowel",
    "liver",
    "spleen",
    "kidney",
    "aorta",
    "bone",
    "lung",
    "heart",
    "csf",
)
