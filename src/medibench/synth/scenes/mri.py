"""MRI-like axial brain slice, T1- or T2-weighted, in normalised intensity.

Orientation: anterior up; left-right follows the radiological convention (patient's left on the
image's right), although the synthetic brain is symmetric.

Structures: scalp (fat), skull (dark cortical bone), CSF (a thin rim, sulci and the lateral
ventricles), a cortical grey-matter ribbon with gyri-like folding, and white matter. Raw values
(``Rendered.raw``) are normalised tissue intensities (T1: white matter 0.85, grey matter 0.6, CSF
0.15; T2: CSF 1.0, grey 0.6, white 0.45), times a smooth multiplicative bias field, with Rician
noise ``|S + n1 + i n2|`` (``sigma = 0.025 x scene.noise``); ``display = (0, 1)``.

A lesion's ``contrast`` is the intensity it adds (a T2 white-matter plaque about +0.35, a T1
hypointense lesion about -0.3); ``"mass"`` and ``"tumour"`` lesions also displace the tissue
inside their support outwards (mass effect), so nothing changes outside the lesion's label.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from medibench.synth.scenes._scene import Lesion, Rendered, Scene
from medibench.synth.scenes._texture import (
    LesionPatch,
    ellipse_rho,
    fractal_noise,
    kind_shapes,
    mass_effect,
    paint_lesions,
    smooth_noise,
    to_display,
)

STRUCTURES = ("head", "scalp", "skull", "brain", "csf", "grey_matter", "white_matter", "ventricles")
HOSTS = ("white_matter", "brain")
VARIANTS = ("t1", "t2")

DISPLAY = (0.0, 1.0)
NOISE = 0.025
_SHAPE = {"plaque": (0.1, 0.3), "mass": (0.12, 0.2), "tumour": (0.15, 0.2), "cyst": (0.0, 0.1)}
_SHAPES = kind_shapes(_SHAPE, (0.1, 0.3))
_MASS_EFFECT = {"mass": 0.35, "tumour": 0.35}
# air, scalp, skull, csf, grey, white
_CONTRAST = {
    "t1": np.array([0.0, 0.92, 0.06, 0.15, 0.6, 0.85], np.float32),
    "t2": np.array([0.0, 0.6, 0.05, 1.0, 0.62, 0.45], np.float32),
}


def make_params(rng: np.random.Generator, clutter: float, variant: str) -> dict[str, Any]:
    """Head shape, cortex thickness, ventricle size, bias-field strength; normalised units."""
    u = lambda a, b: round(float(rng.uniform(a, b)), 4)  # noqa: E731
    return {
        "head": (u(0.84, 0.92), u(0.68, 0.76)),
        "cortex": u(0.12, 0.18),
        "ventricles": u(0.7, 1.3),
        "bias": u(0.08, 0.2),
        "gyri": u(0.08, 0.14),
    }


def anatomy(size: int, seed: int, params: dict[str, Any], noise: float) -> dict[str, Any]:
    """Lesion-free intensity image, labels, bias field and noise of one scene."""
    rng = np.random.default_rng(seed)
    warp = smooth_noise(rng, size, 5)
    rho = ellipse_rho(size, (0.0, 0.0), params["head"], warp=warp, wobble=0.02)
    head = rho < 1
    skull = (rho >= 0.84) & (rho < 0.93)
    scalp = (rho >= 0.93) & head
    brain_rho = rho / 0.82
    brain = brain_rho < 1
    gyri = 0.7 * smooth_noise(rng, size, 28) + 0.5 * smooth_noise(rng, size, 10)
    wm_rho = brain_rho + np.float32(params["gyri"]) * gyri
    white = wm_rho < 1 - params["cortex"]
    sulci = brain & ~white & (gyri > 0.9) & (brain_rho > 1 - params["cortex"])
    v = params["ventricles"]
    vent = np.zeros((size, size), bool)
    for side in (-1.0, 1.0):
        horn = ellipse_rho(size, (-0.05, side * 0.08 * v), (0.24 * v, 0.055 * v), side * -12.0)
        vent |= horn < 1
    tissue = np.zeros((size, size), np.uint8)
    tissue[head] = 1
    tissue[skull] = 2
    tissue[(rho < 0.84)] = 3
    tissue[brain] = 4
    tissue[white] = 5
    tissue[sulci | vent] = 3
    labels = {
        "head": head,
        "scalp": scalp,
        "skull": skull,
        "brain": brain,
        "csf": tissue == 3,
        "grey_matter": tissue == 4,
        "white_matter": (tissue == 5),
        "ventricles": vent,
    }
    base: np.ndarray = _CONTRAST[params["variant"]][tissue]
    base = base * (1.0 + 0.04 * fractal_noise(rng, size, 8, 3)) * (tissue > 0)
    base = cv2.GaussianBlur(base.astype(np.float32), (0, 0), 0.6)
    bias = np.exp(np.float32(params["bias"]) * smooth_noise(rng, size, 2)).astype(np.float32)
    sigma = np.float32(NOISE * noise)
    n1 = rng.standard_normal((size, size)).astype(np.float32) * sigma
    n2 = rng.standard_normal((size, size)).astype(np.float32) * sigma
    return {"raw": base, "bias": bias, "n1": n1, "n2": n2, "labels": labels}


def compose(scene: Scene, anat: dict[str, Any]) -> Rendered:
    """Lesions (mass effect, then intensity) on the tissue, then bias field, then Rician noise."""
    signal = anat["raw"].copy()

    def paint(lesion: Lesion, patch: LesionPatch) -> None:
        strength = _MASS_EFFECT.get(lesion.kind, 0.0)
        if strength:
            mass_effect(signal, patch, strength)
        signal[patch.rows, patch.cols] += np.float32(lesion.contrast) * patch.weight

    labels = paint_lesions(scene.lesions, scene.size, anat["labels"], _SHAPES, paint)
    signal *= anat["bias"]
    if scene.noise:
        signal = np.sqrt((signal + anat["n1"]) ** 2 + anat["n2"] ** 2)
    return Rendered(to_display(signal, *DISPLAY), labels, signal, DISPLAY)
