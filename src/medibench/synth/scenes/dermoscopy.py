"""Dermoscopy-like skin patch seen through a contact dermoscope.

A skin-tone base with lightness texture, skin furrows and redness, optional hairs (clutter, on
top of everything), a circular dermoscope field of view with a dark vignette, and faint sensor
noise. No raw image: colour modality.

``skin`` is the skin inside the field of view (the lesion host; hairs lie on top of it).

A lesion is pigment: its colour is blended towards melanin brown with opacity
``contrast * w`` (``contrast`` in ``[0, 1]``: 0.3 a faint naevus, 0.9 a dark one; positive means
more pigment, hence darker). ``"mole"`` is regular and evenly brown; ``"melanoma"`` has an
irregular border and variegated pigment with blue-grey and dark-brown areas.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from medibench.synth.scenes import _texture as tex
from medibench.synth.scenes._scene import Lesion, Rendered, Scene

STRUCTURES = ("field_of_view", "skin", "hair")
HOSTS = ("skin",)
VARIANTS = ("light", "medium", "dark")

NOISE = 0.01
_TONES = {"light": (0.93, 0.76, 0.68), "medium": (0.8, 0.6, 0.46), "dark": (0.55, 0.38, 0.28)}
_PIGMENT = {
    "mole": ((0.42, 0.26, 0.17), 0.05, 0.15),  # colour, irregularity, texture
    "melanoma": ((0.17, 0.1, 0.08), 0.28, 0.45),
}
_BLUE_GREY = np.array([0.24, 0.26, 0.32], np.float32)


def make_params(rng: np.random.Generator, clutter: float, variant: str) -> dict[str, Any]:
    """Field-of-view radius and a tone jitter; the hair count grows with clutter."""
    return {
        "fov": round(float(rng.uniform(0.92, 1.0)), 4),
        "tone_jitter": round(float(rng.uniform(-0.04, 0.04)), 4),
        "hairs": int(round(clutter * rng.uniform(10, 30))),
    }


def anatomy(size: int, seed: int, params: dict[str, Any], noise: float) -> dict[str, Any]:
    """Lesion-free skin colour, hair layer, vignette and noise of one scene."""
    rng = np.random.default_rng(seed)
    tone = np.array(_TONES[params["variant"]], np.float32) + np.float32(params["tone_jitter"])
    light = 1.0 + 0.05 * tex.fractal_noise(rng, size, 6, 4)
    furrows = np.abs(tex.smooth_noise(rng, size, 40))  # thin dark lines where the field crosses 0
    light *= 1.0 - 0.06 * np.exp(-furrows * 6.0)
    red = 0.03 * tex.smooth_noise(rng, size, 4)
    skin = tone[None, None, :] * light[:, :, None]
    skin[:, :, 0] += red
    skin[:, :, 1] -= 0.5 * red

    hair = np.zeros((size, size), np.uint8)
    scale = size / 2.0
    for _ in range(params["hairs"]):
        y, x = rng.uniform(-1, 1, 2)
        a = rng.uniform(0, 2 * np.pi)
        bend = rng.normal(0, 0.6)
        t = np.linspace(0, rng.uniform(0.4, 1.2), 20)
        pts = np.stack([x + t * np.cos(a + bend * t), y + t * np.sin(a + bend * t)], 1)
        thick = max(1, int(round(size / 200 * rng.uniform(0.7, 1.4))))
        cv2.polylines(
            hair,
            [((pts + 1) * scale * 16).astype(np.int32)],
            False,
            255,
            thick,
            cv2.LINE_AA,
            shift=4,
        )
    hair_alpha = hair.astype(np.float32) / 255.0 * 0.85

    y, x = tex.coords(size)
    r = np.sqrt(y**2 + x**2) / np.float32(params["fov"])
    fov = r < 1
    vignette = np.clip(1.0 - 0.35 * r**4, 0, 1) * np.clip((1 - r) * size / 6, 0, 1)
    sensor = tex.sensor_noise(rng, size, NOISE * noise, vignette)
    labels = {"field_of_view": fov, "skin": r < 0.97, "hair": hair_alpha >= 0.3}
    return {
        "skin": skin.astype(np.float32),
        "hair": hair_alpha,
        "vignette": vignette.astype(np.float32),
        "noise": sensor,
        "labels": labels,
    }


def compose(scene: Scene, anat: dict[str, Any]) -> Rendered:
    """Pigment on the skin, then hairs, then the dermoscope vignette and sensor noise."""
    rgb = anat["skin"].copy()

    def paint(lesion: Lesion, patch: tex.LesionPatch) -> None:
        colour = _pigment(lesion)[0]
        alpha = np.clip(np.float32(lesion.contrast) * patch.weight, 0, 1)[:, :, None]
        pigment: np.ndarray = np.broadcast_to(
            np.array(colour, np.float32), alpha.shape[:2] + (3,)
        ).copy()
        if lesion.kind == "melanoma":  # blue-grey veil where the texture is strongest
            veil = 0.7 * np.clip((patch.weight - 1.15) * 4.0, 0, 1)[:, :, None]
            pigment = pigment * (1 - veil) + _BLUE_GREY * veil
        box = rgb[patch.rows, patch.cols]
        rgb[patch.rows, patch.cols] = box * (1 - alpha) + box * pigment * 1.6 * alpha

    labels = tex.paint_lesions(scene.lesions, scene.size, anat["labels"], _shape, paint)
    hair = anat["hair"][:, :, None]
    rgb = rgb * (1 - hair) + np.array([0.12, 0.08, 0.06], np.float32) * hair
    rgb = rgb * anat["vignette"][:, :, None]
    if scene.noise:
        rgb = rgb + anat["noise"]
    return Rendered(tex.rgb_to_uint8(rgb), labels)


def _pigment(lesion: Lesion) -> tuple[tuple[float, float, float], float, float]:
    return _PIGMENT.get(lesion.kind, _PIGMENT["mole"])


def _shape(lesion: Lesion) -> dict[str, float]:
    _, irregularity, texture = _pigment(lesion)
    return {"irregularity": irregularity, "softness": 0.25, "texture": texture}
