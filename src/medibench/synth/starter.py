"""The starter benchmark: 24 small editing samples built from real images that packages ship.

Eight samples per perspective, ``size`` x ``size`` PNGs, built in a few seconds, byte-identical
for the same seed (every random choice comes from :func:`~medibench.synth.item_rng` of
``("starter", task, index, seed)``):

- perception: MNI152 T1 axial slices; target = the slice with the brain, white matter or grey
  matter blended in a pure colour (``alpha = 0.6``); mask = that structure.
- modification: a synthetic lesion inserted into a real CT, radiograph, MR or fundus image;
  input = the lesioned image, target = the original exactly, mask = the lesion.
- transformation: a real radiograph or MR degraded by noise, blur or lowered contrast;
  target = the original exactly, no mask (the whole image).

Example:
    >>> root = build_starter("/tmp/starter")            # doctest: +SKIP
    >>> ds = load_starter("/tmp/starter")                # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

from medibench.datasets import MANIFEST, DatasetError, NativeDataset, read_native, write_native
from medibench.io import atomic_write_text, write_image
from medibench.samples import Perspective, Sample
from medibench.synth import _sources as src
from medibench.synth._build import building
from medibench.synth._seed import item_rng
from medibench.synth.degrade import add_gaussian_noise, gaussian_blur, reduce_contrast
from medibench.synth.lesion import body_mask, choose_lesion_center, insert_lesion

__all__ = ["STARTER_VERSION", "build_starter", "load_starter", "starter_cache_dir"]

#: Version of the starter's content; any change to what it generates bumps it.
STARTER_VERSION = "1"

_INFO = "starter.json"


@dataclass(frozen=True)
class _Item:
    """One generated sample: its record (paths relative to the root) and its pixels."""

    sample: Sample
    input: np.ndarray
    target: np.ndarray
    mask: np.ndarray | None


def build_starter(out_dir: str | os.PathLike, *, seed: int = 0, size: int = 256) -> Path:
    """Build the starter benchmark as a native dataset in ``out_dir``; return its root.

    The dataset is assembled in a temporary sibling folder and renamed into place, so
    ``out_dir`` never holds half a dataset. ``out_dir`` must not exist or be empty.

    Raises:
        DatasetError: ``out_dir`` exists and is not empty.
    """
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DatasetError(
            f"cannot build the starter benchmark in {out}: it exists and is not empty"
        )
    if size < 32:
        raise ValueError(f"size must be at least 32 pixels, got {size}")
    with building(out) as work:  # replaces an empty folder there, checked above
        samples = []
        for item in _items(seed, size):
            _write_item(work, item)
            samples.append(item.sample)
        write_native(work, samples)
        info = json.dumps({"version": STARTER_VERSION, "seed": int(seed), "size": int(size)})
        atomic_write_text(work / _INFO, info + "\n")
    return out.resolve()


def load_starter(
    path: str | os.PathLike | None = None, *, seed: int | None = None, size: int | None = None
) -> NativeDataset:
    """The starter benchmark read as a native dataset, built first if ``path`` holds none.

    ``path`` defaults to :func:`starter_cache_dir` (``~/.cache/medibench/starter-<version>-
    seed<seed>``). A new build uses ``seed`` (default 0) and ``size`` (default 256). A folder that
    already holds a build is read as it is, unless it was built by another starter version or
    with another ``seed``/``size`` than the ones asked for: that is refused (delete it, or ask
    for another folder), so a run never scores data it did not ask for.
    """
    want_seed = 0 if seed is None else int(seed)
    want_size = 256 if size is None else int(size)
    root = Path(path) if path else starter_cache_dir(seed=want_seed, size=want_size)
    if not (root / MANIFEST).is_file():
        try:
            build_starter(root, seed=want_seed, size=want_size)
        except (OSError, DatasetError):
            if not (root / MANIFEST).is_file():  # not a concurrent build that finished first
                raise
    info_path = root / _INFO
    if info_path.is_file():
        info = json.loads(info_path.read_text("utf-8"))
        asked = {"version": STARTER_VERSION, "seed": seed, "size": size}
        for key, value in asked.items():
            if value is not None and info.get(key) != value:
                raise DatasetError(
                    f"{root} holds the starter benchmark with {key}={info.get(key)!r}, not "
                    f"{value!r} ({json.dumps(info)}): delete the folder to rebuild it, or use "
                    "another folder"
                )
    return read_native(root, name="starter")


def starter_cache_dir(*, seed: int = 0, size: int = 256) -> Path:
    """``$MEDIBENCH_CACHE`` or ``$XDG_CACHE_HOME/medibench`` or ``~/.cache/medibench``, then
    ``starter-<version>-seed<seed>`` (``-size<size>`` appended when not 256)."""
    from medibench.io._mni152 import cache_root

    name = f"starter-{STARTER_VERSION}-seed{int(seed)}" + ("" if size == 256 else f"-size{size}")
    return cache_root() / name


# --- the content -----------------------------------------------------------------------------

# Perception: (structure, overlay colour, axial slice index of the 2 mm MNI152 volume).
_PERCEPTION = (
    ("brain", "green", 30),
    ("brain", "green", 42),
    ("brain", "green", 56),
    ("white matter", "red", 38),
    ("white matter", "red", 47),
    ("white matter", "red", 55),
    ("grey matter", "blue", 44),
    ("grey matter", "blue", 52),
)

# Modification: (source, lesion noun, region, modality, radius at 256 px, contrast, shape, tint).
_MODIFICATION = (
    ("693_UNCR.dcm", "lesion", "brain", "CT", 9.0, 40.0, "ellipse", None),
    ("693_UNCR.dcm", "lesion", "brain", "CT", 13.0, -45.0, "lobulated", None),
    ("RG1_UNCR.dcm", "nodule", "chest", "X-ray", 8.0, 45.0, "lobulated", None),
    ("RG1_UNCR.dcm", "nodule", "chest", "X-ray", 6.0, 55.0, "circle", None),
    ("MR2_UNCR.dcm", "lesion", "shoulder", "MRI", 10.0, 70.0, "ellipse", None),
    ("mni152:46", "tumor", "brain", "MRI", 14.0, 70.0, "lobulated", None),
    ("CT_small.dcm", "lesion", "chest", "CT", 8.0, -50.0, "ellipse", None),
    ("retina", "lesion", "eye", "fundus", 7.0, -70.0, "ellipse", (0.35, 1.0, 1.0)),
)

_LESION_WORDS = {
    "lesion": "a {shade} focal lesion",
    "nodule": "a {shade} rounded pulmonary nodule",
    "tumor": "a {shade} tumour",
}

# How a darker / brighter lesion is called, by modality.
_SHADES = {
    "CT": ("hypodense (dark)", "hyperdense (bright)"),
    "MRI": ("hypointense (dark)", "hyperintense (bright)"),
    "X-ray": ("lucent (dark)", "dense (bright)"),
    "fundus": ("dark red, haemorrhage-like", "pale, exudate-like"),
}

# Transformation: (source, task, region, modality, parameter).
_TRANSFORMATION = (
    ("RG1_UNCR.dcm", "denoise", "chest", "X-ray", 20.0),
    ("MR2_UNCR.dcm", "denoise", "shoulder", "MRI", 15.0),
    ("RG3_UNCR.dcm", "denoise", "leg", "X-ray", 25.0),
    ("RG3_UNCR.dcm", "deblur", "leg", "X-ray", 2.5),
    ("MR2_UNCR.dcm", "deblur", "shoulder", "MRI", 2.0),
    ("mni152:50", "deblur", "brain", "MRI", 1.5),
    ("RG1_UNCR.dcm", "enhance-contrast", "chest", "X-ray", 0.4),
    ("MR2_UNCR.dcm", "enhance-contrast", "shoulder", "MRI", 0.5),
)

_TRANSFORM_TEXT = {
    "denoise": (
        "Denoise this image.",
        "Remove the added Gaussian noise (standard deviation {p:g} grey levels) and restore the "
        "original image; anatomy, edges and contrast must stay as they are.",
    ),
    "deblur": (
        "Deblur this image.",
        "Undo the Gaussian blur (sigma {p:g} pixels) and restore sharp edges and fine detail "
        "without adding noise or changing the anatomy.",
    ),
    "enhance-contrast": (
        "Enhance the contrast of this image.",
        "Restore the full contrast (it was scaled down to {p:g} of the original around the mean "
        "brightness) so tissues are clearly distinguished, without changing the anatomy.",
    ),
}


def _items(seed: int, size: int):
    for index, seen in enumerate(_PERCEPTION):
        yield _perception(index, seen, seed, size)
    for index, lesioned in enumerate(_MODIFICATION):
        yield _modification(index, lesioned, seed, size)
    for index, degraded in enumerate(_TRANSFORMATION):
        yield _transformation(index, degraded, seed, size)


def _perception(index: int, spec, seed: int, size: int) -> _Item:
    from medibench.metrics import blend_overlay

    structure, colour, z = spec
    gray = src.to_square(src.mni_slice(z), size)
    mask = src.to_square(src.mni_mask(structure, z), size, nearest=True)
    image = _rgb(gray)
    target = blend_overlay(image, mask, colour, alpha=0.6)
    task = f"highlight-{structure.replace(' ', '-')}"
    sample = _sample(
        "perception",
        index,
        task=task,
        region="brain",
        modality="MRI",
        instruction=f"Highlight the {structure} in {colour}.",
        description=(
            f"Overlay the {structure} on this axial T1-weighted brain MRI slice in pure {colour}, "
            f"blended at 60% opacity; every pixel outside the {structure} stays unchanged."
        ),
        overlay_color=colour,
        source=src.SOURCES["mni152"],
        metadata={
            "seed": seed,
            "seed_key": _seed_key(task, index, seed),
            "slice_axis": 2,
            "slice_index": z,
            "alpha": 0.6,
            "mask_threshold": 0.5,
        },
    )
    return _Item(sample, image, target, mask)


def _modification(index: int, spec, seed: int, size: int) -> _Item:
    source, noun, region, modality, radius, contrast, shape, tint = spec
    task = f"remove-{noun}"
    rng = item_rng(_seed_key(task, index, seed))
    original = _source_image(source, size)
    scale = size / 256
    allowed = _lesion_region(source, original, size)
    center = choose_lesion_center(allowed, radius * scale, rng, margin=3 * scale)
    lesioned, mask = insert_lesion(
        original,
        center=center,
        radius=radius * scale,
        contrast=contrast,
        rng=rng,
        shape=shape,
        tint=tint,
    )
    what = _LESION_WORDS[noun].format(shade=_SHADES[modality][contrast > 0])
    sample = _sample(
        "modification",
        index,
        task=task,
        region=region,
        modality=modality,
        instruction=f"Remove the {noun}.",
        description=(
            f"Remove {what} of about {2 * radius * scale:.0f} px diameter centred near row "
            f"{center[0]}, column {center[1]}; fill its area with the surrounding normal "
            f"{region} anatomy so no trace remains, and change nothing else."
        ),
        paraphrases=("Remove the nodule from the lung.",) if noun == "nodule" else (),
        source=_source_record(source),
        metadata={
            "seed": seed,
            "seed_key": _seed_key(task, index, seed),
            "lesion_center": list(center),
            "lesion_radius_px": radius * scale,
            "lesion_contrast": contrast,
            "lesion_shape": shape,
            "lesion_area_px": int(mask.sum()),
            **_slice_meta(source),
        },
    )
    return _Item(sample, _rgb(lesioned), _rgb(original), mask)


def _transformation(index: int, spec, seed: int, size: int) -> _Item:
    source, task, region, modality, parameter = spec
    rng = item_rng(_seed_key(task, index, seed))
    original = _source_image(source, size)
    if task == "denoise":
        degraded = add_gaussian_noise(original, parameter, rng)
    elif task == "deblur":
        degraded = gaussian_blur(original, parameter)
    else:
        degraded = reduce_contrast(original, parameter)
    instruction, description = _TRANSFORM_TEXT[task]
    key = {
        "denoise": "noise_sigma",
        "deblur": "blur_sigma_px",
        "enhance-contrast": "contrast_factor",
    }
    sample = _sample(
        "transformation",
        index,
        task=task,
        region=region,
        modality=modality,
        instruction=instruction,
        description=description.format(p=parameter),
        source=_source_record(source),
        metadata={
            "seed": seed,
            "seed_key": _seed_key(task, index, seed),
            key[task]: parameter,
            **_slice_meta(source),
        },
    )
    return _Item(sample, _rgb(degraded), _rgb(original), None)


# --- helpers ---------------------------------------------------------------------------------


def _source_image(source: str, size: int) -> np.ndarray:
    """The original image of a modification or transformation sample, at ``size``: uint8
    ``(H, W)`` for grayscale sources, ``(H, W, 3)`` for the fundus photograph."""
    if source == "retina":
        return src.to_square(src.retina_image(), size)
    if source.startswith("mni152:"):
        return src.to_square(src.mni_slice(int(source.split(":")[1])), size)
    return src.to_square(src.dicom_image(source), size)


def _lesion_region(source: str, image: np.ndarray, size: int) -> np.ndarray:
    """Where a lesion is plausible in ``image``: bool ``(size, size)``."""
    if source.startswith("mni152:"):
        return src.to_square(src.mni_mask("brain", int(source.split(":")[1])), size, nearest=True)
    body = body_mask(image)
    gray = image.mean(axis=2) if image.ndim == 3 else image.astype(np.float64)
    if source == "693_UNCR.dcm":  # brain parenchyma: inside the head, not bone (bright)
        tissue = body & (gray > 30) & (gray < 200)
    elif source == "RG1_UNCR.dcm":  # lung fields: the darker half of the thorax
        tissue = body & (gray < np.percentile(gray[body], 40))
    elif source == "CT_small.dcm":  # soft tissue, not fat (dark) or bone (bright)
        tissue = body & (gray > 90) & (gray < 200)
    else:
        tissue = body
    tissue = ndimage.binary_opening(tissue, iterations=2)
    return ndimage.binary_fill_holes(tissue)


def _seed_key(task: str, index: int, seed: int) -> str:
    """The identity hashed into the item's seed (:func:`~medibench.synth.item_seed`)."""
    return f"starter|{task}|{index}|{seed}"


def _source_record(source: str) -> dict[str, str]:
    return src.SOURCES["mni152" if source.startswith("mni152:") else source]


def _slice_meta(source: str) -> dict[str, int]:
    return {"slice_index": int(source.split(":")[1])} if source.startswith("mni152:") else {}


def _rgb(image: np.ndarray) -> np.ndarray:
    return np.repeat(image[:, :, None], 3, axis=2) if image.ndim == 2 else image


def _sample(perspective: str, index: int, **fields: Any) -> Sample:
    sid = f"{perspective}-{index:03d}"
    paths: dict[str, Any] = {
        "input": f"images/{sid}_input.png",
        "target": f"images/{sid}_target.png",
    }
    if perspective != "transformation":
        paths["mask"] = f"images/{sid}_mask.png"
    return Sample(
        sample_id=sid, benchmark="starter", perspective=Perspective(perspective), **paths, **fields
    )


def _write_item(root: Path, item: _Item) -> None:
    write_image(root / item.sample.input, item.input)
    write_image(root / str(item.sample.target), item.target)  # every starter sample has both
    if item.mask is not None:
        write_image(root / str(item.sample.mask), item.mask)
