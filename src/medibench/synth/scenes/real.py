"""Scenes on real backgrounds: images that installed packages ship, with synthetic lesions.

Backgrounds (provenance and licences in :data:`medibench.synth._sources.SOURCES`):

- ``xray-real``: ``"chest"`` (pydicom-data RG1, PA chest radiograph), ``"leg"`` (RG3). Raw units
  are the file's windowed display values (0-255, bright = dense; MONOCHROME1 inverted). A lesion
  adds attenuation: ``contrast`` display units at its centre, falling off as a sphere's chord.
  Radiological convention: the patient's left on the image's right.
- ``ct-real``: ``"head"`` (693_UNCR, brain window 40/100) and ``"chest"`` (CT_small, soft-tissue
  window 40/400). Raw units are HU (padding is air, -1000); a lesion adds ``contrast`` HU.
- ``mri-real``: ``"brain"`` (nilearn MNI152 T1, an axial slice chosen by the seed, with the
  template's brain, grey- and white-matter masks as labels; neurological convention: the
  subject's left on the image's left) and ``"shoulder"`` (MR2, coronal). Raw units are
  intensities in ``[0, 1]``; a lesion adds ``contrast`` and ``"mass"``/``"tumour"`` lesions also
  displace the tissue inside their support outwards (mass effect).
- ``fundus-real``: scikit-image's fundus photograph (a left eye); lesions as in ``fundus``.

Counterfactual contract: without lesions the image is the real image resized (``to_square``)
and displayed, exactly; real images carry their own noise, so ``scene.noise`` adds none here.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

import cv2
import numpy as np
from scipy import ndimage

from medibench.synth import _sources
from medibench.synth.lesion import largest_component
from medibench.synth.scenes import fundus
from medibench.synth.scenes._scene import Lesion, Rendered, Scene
from medibench.synth.scenes._texture import (
    LesionPatch,
    mass_effect,
    paint_lesions,
    rgb_to_uint8,
    to_display,
)

VARIANTS = {
    "xray-real": ("chest", "leg"),
    "ct-real": ("head", "chest"),
    "mri-real": ("brain", "shoulder"),
    "fundus-real": ("photo",),
}
STRUCTURES = {
    "xray-real": ("body",),
    "ct-real": ("body", "brain"),
    "mri-real": ("body", "brain", "grey_matter", "white_matter"),
    "fundus-real": ("field_of_view", "retina"),
}
HOSTS = {
    "xray-real": ("body",),
    "ct-real": ("body", "brain"),
    "mri-real": ("white_matter", "brain", "body"),
    "fundus-real": ("retina",),
}

_XRAY = {"chest": "RG1_UNCR.dcm", "leg": "RG3_UNCR.dcm"}
_CT = {"head": ("693_UNCR.dcm", (40.0, 100.0)), "chest": ("CT_small.dcm", (40.0, 400.0))}
_MNI_SLICES = (30, 62)  # axial slices with a large brain section (of 91)
_MASS_EFFECT = {"mass": 0.35, "tumour": 0.35}


def make_params(rng: np.random.Generator, clutter: float, variant: str) -> dict[str, Any]:
    """The MNI152 slice for ``"brain"``; the other backgrounds are fixed images."""
    if variant == "brain":
        return {"slice": int(rng.integers(*_MNI_SLICES))}
    return {}


def anatomy(size: int, seed: int, params: dict[str, Any], noise: float) -> dict[str, Any]:
    """The resized background in raw units, its display range and its labels (seed-free)."""
    return _background(params["modality"], params["variant"], size, params.get("slice", 0))


@lru_cache(maxsize=64)
def _background(modality: str, variant: str, size: int, index: int) -> dict[str, Any]:
    params = {"slice": index}
    labels: dict[str, np.ndarray]
    if modality == "xray-real":
        raw = _sources.to_square(_sources.dicom_image(_XRAY[variant]), size).astype(np.float32)
        return {"raw": raw, "display": (0.0, 255.0), "labels": {"body": _body(raw)}}
    if modality == "ct-real":
        name, (centre, width) = _CT[variant]
        hu = _sources.to_square(_hounsfield(name) + 1000.0, size).astype(np.float32) - 1000.0
        body = largest_component(ndimage.binary_fill_holes(hu > -400))
        labels = {"body": body}
        if variant == "head":
            soft = ndimage.binary_opening(body & (hu > 0) & (hu < 90), iterations=2)
            labels["brain"] = ndimage.binary_fill_holes(largest_component(soft))
        return {"raw": hu, "display": (centre - width / 2, centre + width / 2), "labels": labels}
    if modality == "mri-real":
        if variant == "brain":
            k = params["slice"]
            raw = _sources.to_square(_sources.mni_slice(k), size).astype(np.float32) / 255.0
            labels = {
                name.replace(" ", "_"): _sources.to_square(
                    _sources.mni_mask(name, k), size, nearest=True
                )
                for name in ("brain", "grey matter", "white matter")
            }
            labels["body"] = labels["brain"]
        else:
            raw = (
                _sources.to_square(_sources.dicom_image("MR2_UNCR.dcm"), size).astype(np.float32)
                / 255.0
            )
            labels = {"body": _body(raw)}
        return {"raw": raw, "display": (0.0, 1.0), "labels": labels}
    if modality == "fundus-real":
        rgb = _sources.to_square(_sources.retina_image(), size).astype(np.float32) / 255.0
        fov = largest_component(ndimage.binary_fill_holes(rgb.max(axis=2) > 0.08))
        retina = ndimage.binary_erosion(fov, iterations=max(1, size // 64))
        return {"rgb": rgb, "labels": {"field_of_view": fov, "retina": retina}}
    raise AssertionError(modality)  # pragma: no cover - _scene only dispatches known names


def compose(scene: Scene, anat: dict[str, Any]) -> Rendered:
    """Insert the lesions into the background by the modality's physical model."""
    if scene.modality == "fundus-real":
        rgb = anat["rgb"].copy()
        labels = fundus.draw_lesions(rgb, scene, anat["labels"])
        return Rendered(rgb_to_uint8(rgb), labels)

    raw = anat["raw"].copy()

    def paint(lesion: Lesion, patch: LesionPatch) -> None:
        if scene.modality == "mri-real":
            strength = _MASS_EFFECT.get(lesion.kind, 0.0)
            if strength:
                mass_effect(raw, patch, strength)
        if scene.modality == "xray-real":  # attenuation: thicker at the dome's centre
            raw[patch.rows, patch.cols] += np.float32(lesion.contrast) * patch.height * patch.weight
        else:
            raw[patch.rows, patch.cols] += np.float32(lesion.contrast) * patch.weight

    labels = paint_lesions(scene.lesions, scene.size, anat["labels"], _patch_shape, paint)
    display = anat["display"]
    return Rendered(to_display(raw, *display), labels, raw, display)


# --- helpers ---------------------------------------------------------------------------------


def _patch_shape(lesion: Lesion) -> dict[str, float]:
    return {"irregularity": 0.1, "softness": 0.3, "texture": 0.12}


@cache
def _hounsfield(name: str) -> np.ndarray:
    """A pydicom test CT in HU (float64, unwindowed)."""
    from pydicom.data import get_testdata_file

    from medibench.io import read_dicom

    path = get_testdata_file(name)
    if path is None:
        raise FileNotFoundError(f"pydicom cannot find its test file {name} (install pydicom-data)")
    hu = read_dicom(path, window=None, output="float")
    hu.setflags(write=False)
    return hu


def _body(raw: np.ndarray) -> np.ndarray:
    """Anatomy: above a fifth of the way from the darkest to the 99th-percentile value, filled,
    without large saturated areas (collimator shutters on radiographs)."""
    lo, hi = float(raw.min()), float(np.percentile(raw, 99))
    smooth = cv2.GaussianBlur(raw, (0, 0), 2.0)
    inside = smooth > lo + 0.2 * (hi - lo)
    lab, n = ndimage.label(smooth >= float(raw.max()) - 0.01 * (float(raw.max()) - lo))
    if n:
        sizes = np.bincount(lab.ravel())
        sizes[0] = 0
        inside &= ~np.isin(lab, np.nonzero(sizes > 0.01 * raw.size)[0])
    return largest_component(ndimage.binary_fill_holes(inside))
