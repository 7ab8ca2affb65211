"""Atomic writes and content hashes.

Every file medibench writes goes to a temporary file in the same directory and is renamed into
place, so a crash leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import cv2
import numpy as np

__all__ = ["atomic_write_bytes", "atomic_write_text", "write_image", "sha256_file", "sha256_bytes"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_image(path: str | os.PathLike, image: np.ndarray) -> Path:
    """Write an image atomically; the format follows the suffix (``.png`` is lossless).

    ``image`` is ``(H, W)`` grayscale, ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA, uint8 or uint16
    (bool masks are written as 0/255). Channel order is RGB: the conversion to OpenCV's BGR
    happens here.
    """
    path = Path(path)
    arr = np.asarray(image)
    if arr.dtype == bool:
        arr = arr.astype(np.uint8) * 255
    if arr.dtype not in (np.uint8, np.uint16):
        raise ValueError(
            f"write_image({path}): expected uint8, uint16 or bool pixels, got {arr.dtype}; "
            "convert explicitly (medibench never guesses a data range)"
        )
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim == 3 and arr.shape[2] == 3:
        arr = cv2.cvtColor(arr, cv2.COLOR_RGB2BGR)
    elif arr.ndim == 3 and arr.shape[2] == 4:
        arr = cv2.cvtColor(arr, cv2.COLOR_RGBA2BGRA)
    elif arr.ndim != 2:
        raise ValueError(
            f"write_image({path}): expected (H, W), (H, W, 3) or (H, W, 4), got {arr.shape}"
        )
    ok, buf = cv2.imencode(path.suffix or ".png", np.ascontiguousarray(arr))
    if not ok:
        raise ValueError(f"write_image({path}): OpenCV could not encode '{path.suffix}'")
    return atomic_write_bytes(path, buf.tobytes())


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike, *, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file's content, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_size):
            h.update(chunk)
    return h.hexdigest()
