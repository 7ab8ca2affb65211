"""The one input-preparation step every protocol uses: colour and alpha handling, decoders that
read files the way the official scripts do, and resizing with the note that records it."""

from __future__ import annotations

import os
from typing import Literal

import numpy as np

from medibench.datasets import SampleImages
from medibench.io import AlphaPolicy, composite_alpha
from medibench.samples import Sample

__all__ = [
    "ResizeMethod",
    "as_rgb",
    "read_pil_images",
    "read_pil_rgb",
    "read_rgba",
    "resize_noted",
]


def as_rgb(
    image: np.ndarray,
    what: str = "prediction",
    *,
    alpha: AlphaPolicy = "black",
    notes: list[str] | None = None,
) -> np.ndarray:
    """``image`` as uint8 ``(H, W, 3)``: the one preparation step every protocol applies to an
    array before scoring it.

    Gray ``(H, W)`` is repeated into three channels; RGBA ``(H, W, 4)`` is composited as
    ``alpha`` says (:func:`medibench.io.composite_alpha`: on black, on white, or ``"drop"`` for
    the paper protocols whose official code drops it), and when pixels were not opaque a line
    naming ``what`` is appended to ``notes``. Raises ``ValueError`` naming ``what`` for another
    dtype or shape.
    """
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise ValueError(f"{what} must be uint8, got {arr.dtype}")
    if arr.ndim == 2:
        return np.repeat(arr[:, :, None], 3, axis=2)
    if arr.ndim == 3 and arr.shape[2] == 4:
        rgb, note = composite_alpha(arr, alpha=alpha, name=what)
        if note and notes is not None:
            notes.append(note)
        return rgb
    if arr.ndim == 3 and arr.shape[2] == 3:
        return arr
    raise ValueError(f"{what} must be (H, W), (H, W, 3) or (H, W, 4), got shape {arr.shape}")


#: How :func:`resize_noted` resizes: the library and its interpolation, as the papers' code does.
ResizeMethod = Literal["cv2-bilinear", "pil-bicubic", "pil-nearest", "pil-lanczos"]


def resize_noted(
    image: np.ndarray,
    size: tuple[int, int],
    *,
    method: ResizeMethod,
    notes: list[str],
    how: str,
    what: str = "prediction",
    to: str = "",
) -> np.ndarray:
    """``image`` at ``size`` = (width, height): the one resize step of the protocols, recorded.

    Unchanged when it has that size; otherwise resized by ``method`` (OpenCV ``INTER_LINEAR``, or
    PIL ``BICUBIC`` / ``NEAREST`` / ``LANCZOS``) and ``"{what} resized from WxH to {to}WxH {how}"``
    appended to ``notes`` (``how`` says the method in the protocol's words, e.g. ``"(bilinear)"``).
    """
    h, w = image.shape[:2]
    width, height = size
    if (w, h) == (width, height):
        return image
    notes.append(f"{what} resized from {w}x{h} to {to}{width}x{height} {how}")
    if method == "cv2-bilinear":
        import cv2

        return cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
    from PIL import Image

    resample = {
        "pil-bicubic": Image.Resampling.BICUBIC,
        "pil-nearest": Image.Resampling.NEAREST,
        "pil-lanczos": Image.Resampling.LANCZOS,
    }[method]
    return np.asarray(Image.fromarray(image).resize((width, height), resample))


def read_rgba(path: str | os.PathLike) -> np.ndarray:
    """A prediction file for a corrected protocol: ``read_image(path, mode="rgba")``, so that
    :func:`as_rgb` composites its alpha (if any) by the protocol's declared choice, noted."""
    from medibench.io import read_image

    return read_image(path, mode="rgba")


def read_pil_images(sample: Sample, *, mask_mode: str | None = None) -> SampleImages:
    """A sample's files as the papers' code reads them (PIL): input and target through
    :func:`read_pil_rgb` and :func:`as_rgb` (``convert("RGB")``; transparent pixels dropped,
    noted), the mask as ``convert(mask_mode)`` raw levels (``"L"``: grey levels, not binarised),
    or ``None`` without ``mask_mode``."""
    notes: list[str] = []

    def rgb(role: str, path: str) -> np.ndarray:
        image = read_pil_rgb(path, keep_alpha=True)
        return as_rgb(image, f"{role} {path}", alpha="drop", notes=notes)

    inp = rgb("input", sample.input)
    target = None if sample.target is None else rgb("target", sample.target)
    mask = None
    if sample.mask is not None and mask_mode is not None:
        mask = _pil_read(sample.mask, mask_mode)
    return SampleImages(input=inp, target=target, mask=mask, notes=tuple(notes))


def read_pil_rgb(path: str | os.PathLike, *, keep_alpha: bool = False) -> np.ndarray:
    """An image file decoded with PIL and ``convert("RGB")``: uint8 ``(H, W, 3)``, as MedEBench's,
    MedGEN-Bench's and PaintBench's code read images (alpha dropped without compositing,
    palette expanded, no EXIF rotation).

    ``keep_alpha``: when the file has transparency (an alpha band or a palette's transparency),
    return ``(H, W, 4)``: the same ``convert("RGB")`` colours plus the alpha, so that
    :func:`as_rgb` (``alpha="drop"``) can drop it *with a note*; the colours are unchanged.
    Raises :class:`~medibench.io.ImageReadError` naming the file when it is missing or cannot
    be decoded.
    """
    from PIL import Image

    from medibench.io import ImageReadError

    try:
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB"))
            if keep_alpha and ("A" in im.getbands() or "transparency" in im.info):
                a = np.asarray(im.convert("RGBA").getchannel("A"))
                if (a < 255).any():
                    return np.dstack([rgb, a])
            return rgb
    except FileNotFoundError:
        raise ImageReadError(path, "file not found") from None
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageReadError(path, f"PIL could not decode it ({exc})") from exc


def _pil_read(path: str | os.PathLike, mode: str) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert(mode))
