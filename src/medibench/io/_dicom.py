"""Reading one DICOM frame into display (uint8) or modality (float) values, and DICOM SEG masks.

The pipeline follows DICOM PS3.3 C.11: stored values -> modality LUT (Rescale Slope/Intercept, or
a Modality LUT Sequence) -> VOI window -> MONOCHROME1 inversion -> 0..255. Colour images
(RGB, YBR_* decoded to RGB by pydicom, PALETTE COLOR through its lookup table) skip the
grayscale steps. Enhanced multi-frame files keep rescale and window per frame in functional
group sequences; those are looked up for the frame being read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Literal

import numpy as np

from medibench.io._arrays import to_uint8
from medibench.io._errors import ImageReadError, require_file

__all__ = ["read_dicom", "read_dicom_seg"]

Window = Literal["auto"] | tuple[float, float] | None

_SEGMENTATION_STORAGE = "1.2.840.10008.5.1.4.1.1.66.4"
_GRAYSCALE = ("MONOCHROME1", "MONOCHROME2")
_DECODED_AS_RGB = ("RGB", "YBR_FULL", "YBR_FULL_422", "YBR_ICT", "YBR_RCT")


def read_dicom(
    path: str | os.PathLike,
    *,
    frame: int | None = None,
    window: Window = "auto",
    output: Literal["uint8", "float"] = "uint8",
) -> np.ndarray:
    """Read one frame of a DICOM image.

    Grayscale (MONOCHROME1/2):
        1. Modality LUT: ``v = stored * RescaleSlope + RescaleIntercept`` (HU for CT), or the
           Modality LUT Sequence when the file has one.
        2. Window ``(c, w)``: ``"auto"`` takes the file's first WindowCenter/WindowWidth (with
           its VOILUTFunction, default LINEAR), else the frame's min-max; a ``(centre, width)``
           tuple in modality units overrides and always uses LINEAR; ``None`` means no window
           (``output="float"`` only).
        3. ``output="uint8"``: LINEAR is the standard's PS3.3 C.11.2.1.2.1 variant,
           ``y = clip((v - (c - 0.5)) / (w - 1) + 0.5, 0, 1)`` (``w >= 1``); LINEAR_EXACT is
           ``clip((v - c) / w + 0.5, 0, 1)``; SIGMOID is ``1 / (1 + exp(-4 (v - c) / w))``.
           The min-max fallback uses LINEAR_EXACT with ``c = (min + max) / 2, w = max - min``
           so the minimum maps to exactly 0 and the maximum to 255 (a constant frame to 0).
           Result: ``(H, W)`` uint8 ``rint(255 y)`` (ties to even); MONOCHROME1 is then
           inverted (``255 - that``) so that bright means dense, as in MONOCHROME2.
        4. ``output="float"``: ``(H, W)`` float64 modality values, clipped to
           ``[c - w/2, c + w/2]`` when a window is given (a min-max window clips nothing).
           Values keep their modality meaning, so MONOCHROME1 is *not* inverted here.

    Colour (RGB, YBR_* which pydicom decodes to RGB, PALETTE COLOR through its LUT):
        ``(H, W, 3)``; ``"uint8"`` keeps 8-bit samples, reduces 16-bit palette entries to their
        high byte (exact for the usual 8-bit values shifted left) and scales other deeper
        samples by ``255 / (2**BitsStored - 1)``; ``"float"`` gives the samples as float64.
        An explicit window is an error for colour images.

    Args:
        path: the DICOM file.
        frame: 0-based frame index; required when the file has more than one frame.
        window: ``"auto"``, ``(centre, width)`` or ``None``.
        output: ``"uint8"`` (display) or ``"float"`` (modality values).

    Raises:
        ImageReadError: missing, empty or non-DICOM file; no pixel data; compressed pixel data
            without an installed decoder (the message names the packages); a multi-frame file
            without ``frame`` or with ``frame`` out of range; an unsupported photometric
            interpretation; an invalid window in the file.
        ValueError: bad arguments (``window=None`` with ``output="uint8"``, a width below 1, ...).
    """
    if output not in ("uint8", "float"):
        raise ValueError(f"read_dicom: output must be 'uint8' or 'float', got {output!r}")
    if window is None and output == "uint8":
        raise ValueError("read_dicom: window=None (no window) is only valid with output='float'")
    if not (window is None or (isinstance(window, str) and window == "auto")):
        window = _check_window_argument(window)
    ds = _read_dataset(path)
    index = _frame_index(path, ds, frame)
    stored = _decode(path, ds, index)
    photometric = str(ds.get("PhotometricInterpretation", "")).upper()
    if photometric in _GRAYSCALE:
        values = _modality_values(ds, stored, index)
        return _grayscale(path, ds, values, index, window, output, photometric)
    if isinstance(window, tuple):
        raise ImageReadError(
            path, f"is a {photometric} colour image; a window applies to grayscale only"
        )
    return _colour(path, ds, stored, photometric, output)


def read_dicom_seg(path: str | os.PathLike) -> dict[int, np.ndarray]:
    """Read a DICOM Segmentation (SEG) object into one boolean stack per segment.

    Returns:
        ``{segment number: (frames, H, W) bool}``, one entry per item of the SegmentSequence;
        a segment's frames are in stored order (a segment with no frames gives ``(0, H, W)``).
        BINARY segmentations are taken as they are, FRACTIONAL ones are inside where the
        fraction is non-zero, LABELMAP ones where the pixel equals the segment number.

    Raises:
        ImageReadError: not a DICOM SEG, or the frames cannot be matched to segments.
    """
    ds = _read_dataset(path)
    if str(ds.get("SOPClassUID", "")) != _SEGMENTATION_STORAGE:
        raise ImageReadError(
            path, f"is not a DICOM SEG (SOP class {ds.get('SOPClassUID', 'missing')})"
        )
    frames = _decode(path, ds, None)
    frames = frames.reshape((-1, int(ds.Rows), int(ds.Columns)))
    numbers = [int(item.SegmentNumber) for item in ds.get("SegmentSequence", [])]
    if str(ds.get("SegmentationType", "")).upper() == "LABELMAP":
        return {n: frames == n for n in numbers}
    refs = []
    for i in range(frames.shape[0]):
        item = _functional_group(ds, i, "SegmentIdentificationSequence")
        if item is None or "ReferencedSegmentNumber" not in item:
            raise ImageReadError(path, f"SEG frame {i} names no ReferencedSegmentNumber")
        refs.append(int(item.ReferencedSegmentNumber))
    refs_arr = np.asarray(refs)
    return {n: frames[refs_arr == n] != 0 for n in numbers}


def _check_window_argument(window: object) -> tuple[float, float]:
    """A validated explicit ``(centre, width)``."""
    message = f"read_dicom: window must be 'auto', None or (centre, width), got {window!r}"
    if isinstance(window, str) or not isinstance(window, Iterable):
        raise ValueError(message)
    try:
        centre, width = (float(v) for v in window)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if not (np.isfinite(centre) and np.isfinite(width) and width >= 1):
        raise ValueError(f"read_dicom: window width must be finite and >= 1, got {window!r}")
    return centre, width


def _read_dataset(path: str | os.PathLike):
    """The parsed dataset, or ImageReadError naming the file and the problem."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    require_file(path)
    try:
        return pydicom.dcmread(path)
    except InvalidDicomError:
        raise ImageReadError(
            path, "not a DICOM file (no 'DICM' marker after the 128-byte preamble)"
        ) from None
    except Exception as exc:  # pydicom raises many types on damaged files
        raise ImageReadError(path, f"damaged DICOM file ({type(exc).__name__}: {exc})") from exc


def _frame_index(path: str | os.PathLike, ds, frame: int | None) -> int:
    """The 0-based frame to decode, checked against NumberOfFrames."""
    n_frames = int(ds.get("NumberOfFrames", 1) or 1)
    if frame is None:
        if n_frames > 1:
            raise ImageReadError(
                path, f"has {n_frames} frames; choose one with frame=0..{n_frames - 1}"
            )
        return 0
    if isinstance(frame, bool) or not isinstance(frame, (int, np.integer)):
        raise ValueError(f"read_dicom: frame must be an int or None, got {frame!r}")
    if not 0 <= frame < n_frames:
        raise ImageReadError(
            path,
            f"frame {frame} is out of range: the file has {n_frames} frame(s), 0..{n_frames - 1}",
        )
    return int(frame)


def _decode(path: str | os.PathLike, ds, index: int | None) -> np.ndarray:
    """Stored pixel values of frame ``index`` (all frames if None), YBR already turned to RGB."""
    from pydicom.pixels import get_decoder, pixel_array

    if "PixelData" not in ds:
        kind = getattr(ds.get("SOPClassUID"), "name", "object")
        raise ImageReadError(path, f"has no pixel data (a DICOM {kind} without an image)")
    syntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    if syntax is None:
        raise ImageReadError(path, "has no Transfer Syntax UID in its file meta information")
    try:
        decoder = get_decoder(syntax)
    except NotImplementedError:
        raise ImageReadError(
            path, f"pixel data uses transfer syntax {syntax.name}, which pydicom cannot decode"
        ) from None
    if not decoder.is_available:
        needs = "; ".join(decoder.missing_dependencies) or "a decoding plugin"
        raise ImageReadError(
            path,
            f"pixel data is compressed with {syntax.name} and no installed package decodes it; "
            f"install one of: {needs}",
        )
    try:
        return pixel_array(ds, index=index)
    except Exception as exc:  # truncated or malformed pixel data
        raise ImageReadError(
            path, f"pixel data could not be decoded ({type(exc).__name__}: {exc})"
        ) from exc


def _modality_values(ds, stored: np.ndarray, index: int) -> np.ndarray:
    """Stored values through the modality LUT, as float64 (modality units, e.g. HU)."""
    if "ModalityLUTSequence" in ds:
        from pydicom.pixels import apply_modality_lut

        return np.asarray(apply_modality_lut(stored, ds), dtype=np.float64)
    slope = _frame_attribute(ds, index, "PixelValueTransformationSequence", "RescaleSlope")
    intercept = _frame_attribute(ds, index, "PixelValueTransformationSequence", "RescaleIntercept")
    values = stored.astype(np.float64)
    if slope is not None and float(slope) != 1.0:
        values *= float(slope)
    if intercept is not None and float(intercept) != 0.0:
        values += float(intercept)
    return values


def _grayscale(path, ds, values, index, window, output, photometric) -> np.ndarray:
    """Window a grayscale frame of modality values into the requested output."""
    if window is None:
        return values
    if window == "auto":
        centre, width, function = _file_window(path, ds, index, values)
    else:
        (centre, width), function = window, "LINEAR"
    if output == "float":
        return np.clip(values, centre - width / 2, centre + width / 2)
    display = to_uint8(_voi(values, centre, width, function), data_range=(0.0, 1.0))
    return 255 - display if photometric == "MONOCHROME1" else display


def _file_window(path, ds, index: int, values: np.ndarray) -> tuple[float, float, str]:
    """The file's first window (centre, width, VOI LUT function), else the frame's min-max."""
    group = "FrameVOILUTSequence"
    centre = _frame_attribute(ds, index, group, "WindowCenter")
    width = _frame_attribute(ds, index, group, "WindowWidth")
    if centre is None or width is None:
        lo, hi = float(values.min()), float(values.max())
        return (lo + hi) / 2, hi - lo, "LINEAR_EXACT"
    centre, width = float(_first(centre)), float(_first(width))
    function = str(_frame_attribute(ds, index, group, "VOILUTFunction") or "LINEAR").upper()
    if function not in ("LINEAR", "LINEAR_EXACT", "SIGMOID"):
        raise ImageReadError(path, f"unknown VOILUTFunction {function!r}")
    if width <= 0 or (function == "LINEAR" and width < 1):
        raise ImageReadError(path, f"invalid WindowWidth {width} for {function} (pass window=)")
    return centre, width, function


def _voi(values: np.ndarray, centre: float, width: float, function: str) -> np.ndarray:
    """DICOM PS3.3 C.11.2.1.2/C.11.2.1.3 VOI LUT functions, output in [0, 1]."""
    if function == "SIGMOID":
        return 1.0 / (1.0 + np.exp(-4.0 * (values - centre) / width))
    if function == "LINEAR_EXACT":
        if width == 0:  # only from a constant frame's min-max window
            return np.zeros_like(values)
        return np.clip((values - centre) / width + 0.5, 0.0, 1.0)
    if width == 1:  # the standard's step: below or at c - 0.5 is black, above is white
        return (values > centre - 0.5).astype(np.float64)
    return np.clip((values - (centre - 0.5)) / (width - 1) + 0.5, 0.0, 1.0)


def _colour(path, ds, stored: np.ndarray, photometric: str, output: str) -> np.ndarray:
    """A colour frame as (H, W, 3) RGB uint8 or float64 samples."""
    if photometric == "PALETTE COLOR":
        from pydicom.pixels import apply_color_lut

        rgb = np.asarray(apply_color_lut(stored, ds))
        bits = 16 if rgb.dtype == np.uint16 else 8
    elif photometric in _DECODED_AS_RGB and stored.ndim == 3 and stored.shape[2] == 3:
        rgb, bits = stored, int(ds.get("BitsStored", 8))
    else:
        raise ImageReadError(
            path,
            f"unsupported photometric interpretation {photometric!r} "
            "(supported: MONOCHROME1/2, RGB, YBR_FULL/_422/ICT/RCT, PALETTE COLOR)",
        )
    if output == "float":
        return rgb.astype(np.float64)
    if rgb.dtype == np.uint8:
        return rgb
    if photometric == "PALETTE COLOR":
        return (rgb >> 8).astype(np.uint8)
    return to_uint8(rgb, data_range=(0, 2**bits - 1))


def _first(value):
    """The first value of a DICOM multi-valued element (WindowCenter can hold several)."""
    from pydicom.multival import MultiValue

    return value[0] if isinstance(value, (MultiValue, list, tuple)) else value


def _functional_group(ds, index: int, sequence: str):
    """The first item of functional group ``sequence`` for frame ``index``.

    Per-frame groups take precedence over shared ones, as the standard says.
    """
    for groups, i in (
        ("PerFrameFunctionalGroupsSequence", index),
        ("SharedFunctionalGroupsSequence", 0),
    ):
        items = ds.get(groups)
        if items is not None and i < len(items) and sequence in items[i]:
            inner = items[i][sequence].value
            if len(inner):
                return inner[0]
    return None


def _frame_attribute(ds, index: int, sequence: str, keyword: str):
    """``keyword`` for frame ``index``: from its functional group, else top-level, else None."""
    item = _functional_group(ds, index, sequence)
    if item is not None and keyword in item:
        return item[keyword].value
    return ds[keyword].value if keyword in ds else None
