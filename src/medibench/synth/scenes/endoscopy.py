"""Endoscopy-like view of colonic mucosa.

Pinkish-red mucosa with fine texture and faint submucosal vessels, haustral folds arranged around
a dark lumen, illumination falling off with depth towards the lumen and towards the corners
(vignetting), specular highlights on fold crests (clutter), and a rounded field of view. No raw
image: colour modality.

A polyp is raised tissue: inside its support the mucosa is shaded as a dome lit from the camera
(brighter apex, darker rim), tinted slightly paler and redder, with its own specular highlight
near the apex; ``contrast`` in ``[0, 1]`` scales all of it (0.4 subtle, 1 obvious).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from medibench.synth.scenes._scene import Lesion, Rendered, Scene
from medibench.synth.scenes._texture import (
    LesionPatch,
    coords,
    fractal_noise,
    paint_lesions,
    rgb_to_uint8,
    sensor_noise,
    smooth_noise,
    vessel_tree,
)

STRUCTURES = ("field_of_view", "mucosa", "lumen", "folds", "specular")
HOSTS = ("mucosa",)
VARIANTS = ("colon",)

NOISE = 0.012
_MUCOSA = np.array([0.92, 0.42, 0.34], np.float32)
_POLYP = np.array([0.95, 0.58, 0.5], np.float32)


def make_params(rng: np.random.Generator, clutter: float, variant: str) -> dict[str, Any]:
    """Lumen position and size, fold spacing; highlights grow with clutter."""
    u = lambda a, b: round(float(rng.uniform(a, b)), 4)  # noqa: E731
    return {
        "lumen": (u(-0.45, 0.45), u(-0.45, 0.45)),
        "lumen_radius": u(0.12, 0.22),
        "folds": u(5.0, 8.0),
        "hue": u(-0.04, 0.04),
    }


def anatomy(size: int, seed: int, params: dict[str, Any], noise: float) -> dict[str, Any]:
    """Lesion-free mucosa colour, illumination, highlights and noise of one scene."""
    rng = np.random.default_rng(seed)
    y, x = coords(size)
    ly, lx = params["lumen"]
    warp = smooth_noise(rng, size, 4)
    d = np.sqrt((y - ly) ** 2 + (x - lx) ** 2) * (1.0 + 0.15 * warp)
    phase = (
        d * np.float32(params["folds"]) * 2 * np.pi / 2
        + 2.5 * smooth_noise(rng, size, 3)
        + 0.8 * smooth_noise(rng, size, 8)
    )
    ridge = 0.5 + 0.5 * np.cos(phase)  # 1 on fold crests
    lumen_r = np.float32(params["lumen_radius"])
    lumen = d < lumen_r
    depth_light = np.clip((d - 0.5 * lumen_r) / 1.2, 0.0, 1.0) ** 0.6
    texture = 1.0 + 0.06 * fractal_noise(rng, size, 10, 3)
    shade = (0.8 + 0.2 * ridge**2) * texture
    rgb = (_MUCOSA + np.array([params["hue"], 0, -params["hue"]], np.float32)) * shade[:, :, None]
    vessels = vessel_tree(
        rng,
        size,
        [
            (float(v), float(h), float(a))
            for v, h, a in rng.uniform([-1, -1, 0], [1, 1, 360], (4, 3))
        ],
        length=0.3,
        width=0.006,
        depth=4,
        spread=35.0,
    )
    rgb *= (1.0 - 0.12 * vessels)[:, :, None] * np.array([1.0, 0.8, 0.85], np.float32) ** vessels[
        :, :, None
    ]

    r = np.maximum(np.abs(y), np.abs(x)) * 0.35 + np.sqrt(y**2 + x**2) * 0.72  # rounded square
    fov = r < 0.98
    vignette = np.clip(1.15 - 0.45 * r**2, 0, 1) * np.clip((0.98 - r) * size / 5, 0, 1)
    light = (vignette * (0.1 + 0.9 * depth_light)).astype(np.float32)
    sparkle = smooth_noise(rng, size, 30)
    thresh = 3.0 - 0.9 * params["clutter"]
    specular = (sparkle * ridge > thresh) & fov & ~lumen
    spec_alpha = cv2.GaussianBlur(specular.astype(np.float32), (0, 0), max(0.6, size / 400))
    sensor = sensor_noise(rng, size, NOISE * noise, vignette)
    labels = {
        "field_of_view": fov,
        "mucosa": fov & ~lumen,
        "lumen": lumen & fov,
        "folds": (ridge > 0.8) & fov & ~lumen,
        "specular": specular,
    }
    return {
        "rgb": rgb.astype(np.float32),
        "light": light,
        "spec": np.clip(spec_alpha * 1.5, 0, 1),
        "noise": sensor,
        "labels": labels,
    }


def compose(scene: Scene, anat: dict[str, Any]) -> Rendered:
    """Polyps on the mucosa, then illumination, highlights and sensor noise."""
    rgb = anat["rgb"].copy()
    extra_spec: list[tuple[Any, np.ndarray]] = []

    def paint(lesion: Lesion, patch: LesionPatch) -> None:
        c = np.float32(np.clip(lesion.contrast, 0, 1.5))
        w = patch.weight * c
        # Lambert shading of a dome lit from the camera, light slightly from the top left.
        r = max(lesion.radii)
        ny, nx = patch.dy / r, patch.dx / r
        facing = np.clip(patch.height + 0.35 * (-ny - nx) * patch.height, 0, 1.3)
        rim = np.clip((patch.rho - 0.75) / 0.25, 0, 1) * (patch.rho < 1)  # shadow at the base
        shade = 1.0 + w * (0.6 * facing - 0.2 - 0.35 * rim)
        box = rgb[patch.rows, patch.cols]
        tinted = box * (1 - 0.6 * w[:, :, None]) + _POLYP * 0.6 * w[:, :, None]
        rgb[patch.rows, patch.cols] = tinted * shade[:, :, None]
        apex = np.exp(-((ny + 0.25) ** 2 + (nx + 0.25) ** 2) / 0.02) * (patch.rho < 0.9)
        extra_spec.append(((patch.rows, patch.cols), (apex * c).astype(np.float32)))

    labels = paint_lesions(scene.lesions, scene.size, anat["labels"], _polyp_shape, paint)
    rgb *= anat["light"][:, :, None]
    spec = anat["spec"].copy() if extra_spec else anat["spec"]
    for (rows, cols), apex in extra_spec:
        spec[rows, cols] = np.maximum(spec[rows, cols], apex)
    rgb = rgb * (1 - spec[:, :, None]) + spec[:, :, None]
    if scene.noise:
        rgb = rgb + anat["noise"]
    return Rendered(rgb_to_uint8(rgb), labels)


def _polyp_shape(lesion: Lesion) -> dict[str, float]:
    return {"irregularity": 0.04, "softness": 0.3, "texture": 0.08}
