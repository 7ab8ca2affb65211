"""Atomic writes and content hashes.

Every file medibench writes goes to a temporary file in the same directory and is renamed into
place, so a crash leaves either the old file or the new one, never half of one. Files get the
mode the process umask gives a new file (``0o666 & ~umask``), not the temp file's 0600. A full
disk is a :class:`DiskFullError` that names the file being written.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import cv2
import numpy as np

__all__ = [
    "DiskFullError",
    "atomic_write_bytes",
    "atomic_write_text",
    "encode_image",
    "is_disk_full",
    "remove_stale_temps",
    "write_image",
    "sha256_file",
    "sha256_bytes",
]

_FULL = {errno.ENOSPC, errno.EDQUOT}


class DiskFullError(OSError):
    """No space (or quota) left to write ``filename``; what was written before is intact."""

    def __str__(self) -> str:
        return f"no space left on the device to write {self.filename} ({self.strerror})"


def atomic_write_bytes(
    path: str | os.PathLike, data: bytes | Iterable[bytes], *, durable: bool = True
) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, rename).

    ``data`` may come in pieces (an iterable of ``bytes``, written as they come: a file of
    100,000 records is never one string in memory).

    ``durable=False`` skips the fsync: for caches that can be rebuilt from their source (a
    Parquet cell's bytes written out as a file), where a reader still never sees half a file
    but a power cut may lose the newest ones. Raises :class:`DiskFullError` (an ``OSError``)
    naming ``path`` when the disk is full.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _named(exc, path) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600
            if isinstance(data, bytes | bytearray | memoryview):
                fh.write(data)
            else:
                fh.writelines(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _named(exc, path) from exc
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
    data = encode_image(image, path.suffix or ".png", where=f"write_image({path})")
    return atomic_write_bytes(path, data)


def encode_image(
    image: np.ndarray, suffix: str = ".png", *, params: Sequence[int] = (), where: str = "image"
) -> bytes:
    """``image`` encoded by OpenCV in the format of ``suffix`` (``.png``, ``.jpg``, ``.webp``):
    the one image encoder (files, model requests, judge data URLs, report pictures).

    ``image`` as :func:`write_image` takes it (RGB channel order); ``params`` are OpenCV's
    ``IMWRITE_*`` pairs (PNG compression, JPEG quality). Raises ``ValueError`` starting with
    ``where`` for other pixels or shapes, or when OpenCV cannot encode the format.
    """
    arr = np.asarray(image)
    if arr.dtype == bool:
        arr = arr.astype(np.uint8) * 255
    if arr.dtype not in (np.uint8, np.uint16):
        raise ValueError(
            f"{where}: expected uint8, uint16 or bool pixels, got {arr.dtype}; "
            "convert explicitly (medibench never guesses a data range)"
        )
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim == 3 and arr.shape[2] == 3:
        arr = cv2.cvtColor(arr, cv2.COLOR_RGB2BGR)
    elif arr.ndim == 3 and arr.shape[2] == 4:
        arr = cv2.cvtColor(arr, cv2.COLOR_RGBA2BGRA)
    elif arr.ndim != 2:
        raise ValueError(f"{where}: expected (H, W), (H, W, 3) or (H, W, 4), got {arr.shape}")
    ok, buf = cv2.imencode(suffix, np.ascontiguousarray(arr), list(params))
    if not ok:
        raise ValueError(f"{where}: OpenCV could not encode '{suffix}'")
    return buf.tobytes()


def remove_stale_temps(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files (``.NAME.XXXXXXXX.tmp``) that a killed atomic write left
    anywhere under ``folder``; the paths removed. Only for a folder whose writers are all
    stopped (the caller holds its lock): a live writer's temp file would go too."""
    removed = []
    for parent, _, names in os.walk(folder):
        for name in names:
            if name.startswith(".") and name.endswith(".tmp"):
                path = Path(parent) / name
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed.append(path)
    return removed


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the quota) is full."""
    return isinstance(exc, OSError) and exc.errno in _FULL


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


# -- helpers ----------------------------------------------------------------------------------
def _named(exc: OSError, path: Path) -> OSError:
    # A failed write() names no file: name the one being written (a full disk, above all).
    if exc.errno in _FULL:
        return DiskFullError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))
    if exc.filename is None:
        return type(exc)(exc.errno, exc.strerror, str(path)) if exc.errno else exc
    return exc


_umask_guard = threading.Lock()


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    with _umask_guard:  # elsewhere: set and restore (another thread could race this)
        mask = os.umask(0o022)
        os.umask(mask)
    return mask
