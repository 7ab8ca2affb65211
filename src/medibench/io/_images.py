"""Reading PNG, JPEG, TIFF and BMP files (and, by dispatch, DICOM) into numpy arrays.

OpenCV decodes (it is the fastest decoder here); this module sniffs the format from the file's
first bytes, checks that PNG and JPEG files are complete before decoding (some OpenCV builds
decode a cut-off file into a half-grey image with only a warning), and turns OpenCV's BGR order
into RGB. Alpha is composited (on black by default) when an image becomes RGB or gray, and a
mask with values other than 0 and its maximum is binarised at half its maximum; callers that pass
``notes=`` get a line saying so.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from medibench.io._arrays import AlphaPolicy, composite_alpha, mask_with_note
from medibench.io._dicom import read_dicom
from medibench.io._errors import ImageReadError

__all__ = ["decode_image", "may_have_alpha", "read_image", "read_mask"]

ImageMode = Literal["rgb", "rgba", "gray", "unchanged"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_IEND = b"IEND\xaeB`\x82"  # the IEND chunk type and its fixed CRC
_JPEG_SOI = b"\xff\xd8\xff"
_JPEG_EOI = b"\xff\xd9"
_TIFF_MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF
_SUPPORTED = "PNG, JPEG, TIFF, BMP and DICOM (NIfTI through read_nifti_slice)"


def read_image(
    path: str | os.PathLike,
    *,
    mode: ImageMode = "rgb",
    alpha: AlphaPolicy = "black",
    notes: list[str] | None = None,
) -> np.ndarray:
    """Read a PNG, JPEG, TIFF, BMP or DICOM file into an array.

    Modes:
        ``"rgb"``: ``(H, W, 3)`` uint8, RGB order. Grayscale is repeated into three channels;
            palette images are expanded; an alpha channel (RGBA, gray+alpha, a palette's
            transparency) is composited as ``alpha`` says (:func:`composite_alpha`: on black by
            default, ``"white"``, or ``"drop"`` to keep the stored colours).
        ``"rgba"``: ``(H, W, 4)`` uint8, RGBA order: the alpha as stored (255 where the file has
            none), for callers that composite later (a protocol's declared choice).
        ``"gray"``: ``(H, W)`` uint8. Alpha is composited as in ``"rgb"``, then colour is
            reduced with OpenCV's ITU-R BT.601 luma, ``Y = 0.299 R + 0.587 G + 0.114 B``
            (rounded).
        ``"unchanged"``: the stored pixels: ``(H, W)``, ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA,
            at the stored depth (uint8, uint16, float32 for float TIFFs). Palette PNGs come back
            as RGB (RGBA with a transparency chunk), grayscale+alpha PNGs as RGBA. As in OpenCV,
            this mode ignores a JPEG's EXIF orientation; the other two apply it.

    16-bit (and float) sources: ``"rgb"``, ``"rgba"`` and ``"gray"`` promise uint8, and
    medibench never guesses a data range, so they raise ``ImageReadError``; read with
    ``mode="unchanged"`` and scale with ``to_uint8(array, data_range=...)``.

    DICOM (``.dcm`` suffix or ``DICM`` at byte 128) goes through ``read_dicom`` with its defaults
    (the file's window, or min-max, to uint8); ``"rgb"`` then repeats grayscale into three
    channels, ``"gray"`` reduces colour with the same luma, ``"unchanged"`` returns what
    ``read_dicom`` returns. Multi-frame DICOM needs ``read_dicom(path, frame=i)``. NIfTI volumes
    need an axis and a slice: use ``read_nifti_slice``. TIFF files give their first page.

    ``notes``: when a list is given, a line is appended when pixels were not opaque and the
    alpha was composited or dropped (``"<path>: 12 of 4096 pixels are not opaque (alpha <
    255); composited on black"``). A fully opaque alpha changes nothing and adds no note.

    Raises:
        ImageReadError: missing or empty file, a directory, not an image, an unsupported format,
            a truncated or corrupt file, a 16-bit source in ``"rgb"``/``"rgba"``/``"gray"`` mode.
        ValueError: an unknown ``mode``.
    """
    _check_mode(mode)
    path = Path(path)
    return _decode_bytes(path, _read_bytes(path), mode, alpha, notes, on_disk=True)


def decode_image(
    data: bytes,
    *,
    name: str,
    mode: ImageMode = "rgb",
    alpha: AlphaPolicy = "black",
    notes: list[str] | None = None,
) -> np.ndarray:
    """Decode an image file's bytes exactly as :func:`read_image` decodes the file.

    For images that arrive as bytes (a Parquet cell, an archive member): the same format
    sniffing, completeness checks, decoders and modes, so the same bytes give the same pixels
    as a file holding them. ``name`` stands for the file in errors and notes (a path or a
    description such as ``"shard.parquet row 3, column 'image'"``); its suffix decides only
    for DICOM (``.dcm``) and NIfTI, as a file's name does.

    Raises:
        ImageReadError: empty bytes, not an image, a truncated or corrupt image, a 16-bit
            source in a uint8 mode (as :func:`read_image`), naming ``name``.
        ValueError: an unknown ``mode``.
    """
    _check_mode(mode)
    if not data:
        raise ImageReadError(name, "empty image (0 bytes)")
    return _decode_bytes(Path(name), bytes(data), mode, alpha, notes, on_disk=False)


def read_mask(path: str | os.PathLike, *, notes: list[str] | None = None) -> np.ndarray:
    """Read a mask image as a boolean ``(H, W)`` array.

    The file is read with ``mode="unchanged"`` (any depth) and converted by ``to_mask``: a 3- or
    4-channel mask is accepted only if its colour channels are identical (and its alpha, if any,
    fully opaque); otherwise ``ImageReadError`` says how the channels differ. A binary mask
    (0 and one other value) is inside where non-zero; a mask with other values too (a JPEG
    mask's compression halos) is binarised at half its maximum, ``value > max / 2``, and, when
    ``notes`` is a list, a line giving the count of those pixels is appended to it.
    """
    image = read_image(path, mode="unchanged")
    try:
        mask, note = mask_with_note(image, name=f"mask {path}")
    except ValueError as exc:
        raise ImageReadError(path, str(exc).removeprefix(f"mask {path}: ")) from None
    if note and notes is not None:
        notes.append(note)
    return mask


def may_have_alpha(data: bytes) -> bool:
    """Whether an image file's bytes can hold an alpha channel (a PNG of colour type 4 or 6 or
    with a transparency chunk; any TIFF or BMP), from its header alone: readers that must decode
    as other code does (``cv2.imread``) use it to decide whether to look for alpha at all."""
    if data.startswith(_PNG_SIGNATURE):
        return _may_have_alpha(data, "png")
    if data.startswith(_TIFF_MAGICS):
        return True
    return data.startswith(b"BM")


def _check_mode(mode: str) -> None:
    if mode not in ("rgb", "rgba", "gray", "unchanged"):
        raise ValueError(
            f"read_image: mode must be 'rgb', 'rgba', 'gray' or 'unchanged', got {mode!r}"
        )


def _decode_bytes(
    path: Path,
    data: bytes,
    mode: ImageMode,
    alpha: AlphaPolicy,
    notes: list[str] | None,
    *,
    on_disk: bool,
) -> np.ndarray:
    """The one decode path of read_image and decode_image; ``path`` names the source
    (``on_disk``: it is the file ``data`` was read from)."""
    kind = _sniff(path, data)
    if kind == "dicom":
        return _dicom_as_mode(path, data, mode, on_disk=on_disk)
    if kind == "nifti":
        raise ImageReadError(
            path,
            "is a NIfTI volume; a volume needs an axis and a slice index: "
            "use medibench.io.read_nifti_slice(path, axis=..., index=...)",
        )
    _check_complete(path, data, kind)
    # IMREAD_UNCHANGED keeps alpha and depth (but ignores EXIF rotation): used for "unchanged"
    # and for files that can carry alpha; the other decodes apply the rotation.
    unchanged = mode == "unchanged" or _may_have_alpha(data, kind)
    image = _decode(path, data, kind, unchanged)
    if mode == "unchanged":
        return image
    if unchanged and not (image.ndim == 3 and image.shape[2] == 4):
        image = _decode(path, data, kind, False)  # no alpha after all: decode as before
    if image.dtype != np.uint8:
        raise ImageReadError(
            path,
            f"holds {image.dtype} pixels but mode={mode!r} gives uint8 and medibench does not "
            "guess a data range; use read_image(path, mode='unchanged') and then "
            "to_uint8(array, data_range=(lo, hi))",
        )
    return _to_mode(image, mode, alpha, path, notes)


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, or an ImageReadError saying why there are none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ImageReadError(path, "file not found") from None
    except IsADirectoryError:
        raise ImageReadError(path, "is a directory, not an image file") from None
    except PermissionError:
        raise ImageReadError(path, "permission denied") from None
    except OSError as exc:
        raise ImageReadError(path, f"could not be read ({exc.strerror or exc})") from exc
    if not data:
        raise ImageReadError(path, "empty file (0 bytes)")
    return data


def _sniff(path: Path, data: bytes) -> str:
    """The file's format from its first bytes (the suffix decides only for DICOM and NIfTI)."""
    name = path.name.lower()
    if name.endswith(".dcm") or data[128:132] == b"DICM":
        return "dicom"
    if name.endswith((".nii", ".nii.gz")) or data[344:348] in (b"n+1\x00", b"ni1\x00"):
        return "nifti"
    if data.startswith(_PNG_SIGNATURE):
        return "png"
    if data.startswith(_JPEG_SOI):
        return "jpeg"
    if data.startswith(_TIFF_MAGICS):
        return "tiff"
    if data.startswith(b"BM") and len(data) >= 26:
        return "bmp"
    if _looks_like_text(data):
        raise ImageReadError(path, f"not an image: the file holds text (supported: {_SUPPORTED})")
    raise ImageReadError(
        path,
        f"not an image or an unsupported format (first bytes {data[:8]!r}; "
        f"supported: {_SUPPORTED})",
    )


def _check_complete(path: Path, data: bytes, kind: str) -> None:
    """Refuse PNG, JPEG and BMP files that were cut short, before the decoder sees them."""
    if kind == "png" and data.rfind(_PNG_IEND) < 0:
        raise ImageReadError(path, "truncated PNG: the file ends before its IEND chunk")
    if kind == "jpeg" and not data.rstrip(b"\x00\r\n ").endswith(_JPEG_EOI):
        raise ImageReadError(
            path, "truncated JPEG: the file does not end with the end-of-image marker"
        )
    if kind == "bmp":
        declared = int.from_bytes(data[2:6], "little")
        pixels_at = int.from_bytes(data[10:14], "little")
        if declared > len(data) or pixels_at >= len(data):
            raise ImageReadError(
                path, f"truncated BMP: header declares {declared} bytes, file has {len(data)}"
            )


def _looks_like_text(data: bytes) -> bool:
    """True if the first KiB decodes as UTF-8 without control bytes other than whitespace."""
    head = data[:1024]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a multi-byte character cut at the boundary
            return False
        text = head[: exc.start].decode("utf-8")
    return bool(text) and all(ch.isprintable() or ch in "\t\r\n\f" for ch in text)


def _may_have_alpha(data: bytes, kind: str) -> bool:
    """Whether the file can hold an alpha channel: a PNG of colour type 4 or 6 (gray or RGB with
    alpha) or with a transparency chunk; any TIFF or BMP (their headers are not parsed here)."""
    if kind == "png":
        colour_type = data[25] if len(data) > 25 else 0  # IHDR data starts at byte 16
        idat = data.find(b"IDAT")
        return colour_type in (4, 6) or data.find(b"tRNS", 0, idat if idat > 0 else None) > 0
    return kind in ("tiff", "bmp")


def _decode(path: Path, data: bytes, kind: str, unchanged: bool) -> np.ndarray:
    flags = cv2.IMREAD_UNCHANGED if unchanged else cv2.IMREAD_ANYCOLOR | cv2.IMREAD_ANYDEPTH
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), flags)
    if image is None:
        raise ImageReadError(path, f"OpenCV could not decode this {kind.upper()} file (corrupt?)")
    return _bgr_to_rgb(image)


def _bgr_to_rgb(image: np.ndarray) -> np.ndarray:
    """OpenCV's BGR/BGRA channel order to RGB/RGBA; grayscale passes through."""
    if image.ndim == 3 and image.shape[2] == 3:
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    if image.ndim == 3 and image.shape[2] == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2RGBA)
    return image


def _to_mode(
    image: np.ndarray,
    mode: ImageMode,
    alpha: AlphaPolicy = "black",
    path: Path | None = None,
    notes: list[str] | None = None,
) -> np.ndarray:
    """An 8-bit (H, W), (H, W, 3) or (H, W, 4) array to ``"rgb"``, ``"rgba"`` or ``"gray"``."""
    if mode == "rgba":
        if image.ndim == 2:
            image = np.repeat(image[:, :, None], 3, axis=2)
        if image.shape[2] == 3:
            image = np.dstack([image, np.full(image.shape[:2], 255, dtype=np.uint8)])
        return image
    if image.ndim == 3 and image.shape[2] == 4:
        image, note = composite_alpha(image, alpha=alpha, name=str(path or "image"))
        if note and notes is not None:
            notes.append(note)
    if mode == "rgb":
        return np.repeat(image[:, :, None], 3, axis=2) if image.ndim == 2 else image
    if mode == "gray" and image.ndim == 3:
        return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    return image


def _dicom_as_mode(path: Path, data: bytes, mode: ImageMode, *, on_disk: bool) -> np.ndarray:
    """A DICOM file through read_dicom's defaults, then shaped for ``mode``; bytes that are not
    on disk go through a temporary file (read_dicom reads files)."""
    if on_disk:
        image = read_dicom(path)
    else:
        with tempfile.TemporaryDirectory(prefix="medibench-dicom-") as tmp:
            copy = Path(tmp) / "image.dcm"
            copy.write_bytes(data)
            try:
                image = read_dicom(copy)
            except ImageReadError as exc:
                raise ImageReadError(path, exc.problem) from exc.__cause__
    return image if mode == "unchanged" else _to_mode(image, mode, path=path)
