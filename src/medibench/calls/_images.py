"""Images for chat requests: PNG data URLs within a size limit.

Every image goes out as ``data:image/png;base64,...`` (lossless: a judge or an answering model
must see the pixels that were scored). An image whose longer side exceeds the limit is resized
(area interpolation, aspect kept) with the resize returned as a note for the record, or refused
with :class:`ImageTooLargeError`.
"""

from __future__ import annotations

import os
import struct

import cv2
import numpy as np

from medibench.calls._body import data_url

__all__ = ["ImageTooLargeError", "file_data_url", "fit", "png_data_url"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ImageTooLargeError(ValueError):
    """An image is larger than the model accepts and the config says to refuse, not resize."""


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
    re-encode: the model sees exactly the stored pixels); anything else (JPEG, DICOM, 16-bit,
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
