"""Images for judges: PNG data URLs within a size limit, and the labelled side-by-side collage.

Every image goes out as ``data:image/png;base64,...`` (lossless: a judge must see the pixels that
were scored). An image whose longer side exceeds the judge's limit is resized (area
interpolation, aspect kept) with the resize returned as a note for the record, or refused with
:class:`ImageTooLargeError`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

import cv2
import numpy as np

from medibench.calls import data_url

__all__ = ["ImageTooLargeError", "collage", "png_data_url", "file_data_url"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ImageTooLargeError(ValueError):
    """An image is larger than the judge accepts and the config says to refuse, not resize."""


def png_data_url(
    image: np.ndarray, *, max_side: int, oversize: str = "resize", what: str = "image"
) -> tuple[str, str | None]:
    """``(data URL, note or None)`` for a uint8 ``(H, W)`` or ``(H, W, 3)`` RGB image.

    Raises:
        ImageTooLargeError: the longer side exceeds ``max_side`` and ``oversize == "refuse"``.
    """
    from medibench.io import encode_image

    image, note = fit(image, max_side=max_side, oversize=oversize, what=what)
    png = encode_image(image, params=(cv2.IMWRITE_PNG_COMPRESSION, 1), where=what)
    return data_url("image/png", png), note


def file_data_url(
    path: str | os.PathLike, *, max_side: int, oversize: str = "resize", what: str = "image"
) -> tuple[str, str | None]:
    """``(data URL, note or None)`` for an image file.

    An 8-bit grayscale or RGB PNG within ``max_side`` is sent byte for byte (no decode, no
    re-encode: the judge sees exactly the stored pixels); anything else (JPEG, DICOM, 16-bit,
    palette or alpha PNGs, oversized images) is read with ``medibench.io.read_image(path,
    mode="rgb")`` and goes through :func:`png_data_url`.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:8] == _PNG_SIGNATURE and data[12:16] == b"IHDR" and len(data) > 26:
        w, h, depth, colour = struct.unpack(">IIBB", data[16:26])
        if depth == 8 and colour in (0, 2) and max(w, h) <= max_side:
            return data_url("image/png", data), None
    from medibench.io import read_image

    return png_data_url(
        read_image(path, mode="rgb"), max_side=max_side, oversize=oversize, what=what
    )


def fit(
    image: np.ndarray, *, max_side: int, oversize: str = "resize", what: str = "image"
) -> tuple[np.ndarray, str | None]:
    """The image within ``max_side`` (resized, with a note) or an error, per ``oversize``."""
    h, w = image.shape[:2]
    if max(h, w) <= max_side:
        return image, None
    if oversize == "refuse":
        raise ImageTooLargeError(
            f"{what} is {w}x{h}, larger than the judge's max_image_side {max_side}: "
            "raise max_image_side if the provider accepts it, or set oversize: resize"
        )
    scale = max_side / max(h, w)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    resized = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA)
    return resized, f"{what} resized from {w}x{h} to {nw}x{nh} (max_image_side {max_side})"


def collage(
    images: Sequence[np.ndarray], labels: Sequence[str], *, gap: int = 8, band: int = 28
) -> np.ndarray:
    """Panels side by side at the first panel's height, each under a label band.

    Args:
        images: uint8 ``(H, W, 3)`` RGB (or ``(H, W)``, repeated into RGB) panels.
        labels: one short label per panel, written in white on black above it.
        gap: white columns between panels, in pixels.
        band: height of the label band, in pixels.

    Returns:
        ``(band + H, sum(W_i') + gap * (n - 1), 3)`` uint8, where ``W_i'`` keeps each panel's
        aspect ratio at height ``H``.
    """
    if len(images) != len(labels) or not images:
        raise ValueError("collage needs one label per image and at least one image")
    h = images[0].shape[0]
    panels = []
    for img, label in zip(images, labels, strict=True):
        rgb = np.repeat(img[:, :, None], 3, axis=2) if img.ndim == 2 else img[:, :, :3]
        if rgb.shape[0] != h:
            w = max(1, round(rgb.shape[1] * h / rgb.shape[0]))
            rgb = cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA)
        head = np.zeros((band, rgb.shape[1], 3), np.uint8)
        scale = min(0.6, 0.9 * rgb.shape[1] / max(1, 18 * len(label)))
        cv2.putText(
            head,
            label,
            (4, band - 9),
            cv2.FONT_HERSHEY_SIMPLEX,
            max(scale, 0.25),
            (255, 255, 255),
            1,
            cv2.LINE_AA,
        )
        panels.append(np.vstack([head, np.ascontiguousarray(rgb, dtype=np.uint8)]))
    spacer = np.full((h + band, gap, 3), 255, np.uint8)
    out = [panels[0]]
    for p in panels[1:]:
        out += [spacer, p]
    return np.hstack(out)
