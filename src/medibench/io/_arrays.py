"""In-memory conversions: explicit-range scaling to uint8, arrays to boolean masks, and alpha
compositing."""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = ["AlphaPolicy", "composite_alpha", "mask_with_note", "to_mask", "to_uint8"]

#: What to do with an alpha channel when an image becomes RGB: composite on black or on white,
#: or drop it (what PIL's ``convert("RGB")`` and ``cv2.imread`` do; only paper protocols that
#: reproduce such code should choose it).
AlphaPolicy = Literal["black", "white", "drop"]


def to_uint8(
    array: np.ndarray, *, data_range: tuple[float, float] | Literal["minmax"]
) -> np.ndarray:
    """Scale ``array`` linearly so that ``data_range`` maps onto 0..255, clip, round to uint8.

    ``y = rint(clip((x - lo) / (hi - lo), 0, 1) * 255)``; ties round to even, as ``numpy.rint``
    and OpenCV do. The range is never guessed: pass ``(lo, hi)`` with ``hi > lo`` in the units of
    ``array``, or ``"minmax"`` to use the array's own finite minimum and maximum (a constant
    array then maps to 0).

    Args:
        array: any shape, any real dtype (bool counts as 0/1); NaN is an error.
        data_range: ``(lo, hi)`` or ``"minmax"``.

    Returns:
        uint8 array of the same shape.

    Example:
        >>> to_uint8(np.array([-1000.0, 0.0, 1000.0]), data_range=(-1000, 1000)).tolist()
        [0, 128, 255]
    """
    arr = np.asarray(array)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"to_uint8: expected a real-valued array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if np.isnan(arr).any():
        raise ValueError("to_uint8: the array contains NaN; decide what NaN means before scaling")
    if isinstance(data_range, str):
        if data_range != "minmax":
            raise ValueError(
                f"to_uint8: data_range must be (lo, hi) or 'minmax', got {data_range!r}"
            )
        finite = arr[np.isfinite(arr)]
        if finite.size == 0:
            return np.zeros(arr.shape, dtype=np.uint8)
        lo, hi = float(finite.min()), float(finite.max())
        if hi == lo:
            return np.zeros(arr.shape, dtype=np.uint8)
    else:
        try:
            lo, hi = (float(v) for v in data_range)
        except (TypeError, ValueError):
            raise ValueError(
                f"to_uint8: data_range must be (lo, hi) or 'minmax', got {data_range!r}"
            ) from None
        if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
            raise ValueError(f"to_uint8: data_range needs finite lo < hi, got ({lo}, {hi})")
    scaled = np.clip((arr - lo) / (hi - lo), 0.0, 1.0) * 255.0
    return np.rint(scaled).astype(np.uint8)


def to_mask(array: np.ndarray, *, name: str = "mask") -> np.ndarray:
    """Turn a mask array into a boolean ``(H, W)`` mask.

    A binary mask (0 and one other value: 0/1, 0/255, bool) is inside where it is non-zero. A
    mask with other values too (a JPEG mask with compression halos, an anti-aliased edge) is
    binarised at half its maximum: ``inside = value > max / 2``. :func:`mask_with_note` also
    says how many pixels had such values.

    Accepted shapes: ``(H, W)``; ``(H, W, 1)``; ``(H, W, 3)`` whose three channels are identical;
    ``(H, W, 4)`` whose colour channels are identical and whose alpha is fully opaque (the
    maximum of the dtype). Channels that differ, or a transparent alpha, are ambiguous (which
    channel is the mask?) and raise ``ValueError`` instead of being guessed. An empty mask is
    returned as is: whether empty is acceptable is the metric's decision.

    Args:
        array: mask pixels, any real or bool dtype; NaN is an error.
        name: how the mask is named in error messages (a file path, a sample id).

    Returns:
        bool array ``(H, W)``.
    """
    return mask_with_note(array, name=name)[0]


def mask_with_note(array: np.ndarray, *, name: str = "mask") -> tuple[np.ndarray, str | None]:
    """:func:`to_mask`, and a note when the mask was not binary (else ``None``).

    The note names ``name``, the count of pixels with values other than 0 and the maximum, the
    threshold and the resulting ROI size, e.g. ``"mask m.jpg: 27 pixels have values other than
    0 and its maximum 255 (compression halos?); binarised at half the maximum (value > 127.5):
    196 pixels inside (223 would be non-zero)"``.
    """
    try:
        plane = _mask_plane(np.asarray(array))
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return _binarise(plane, name)


def composite_alpha(
    image: np.ndarray, *, alpha: AlphaPolicy = "black", name: str = "image"
) -> tuple[np.ndarray, str | None]:
    """An ``(H, W, 4)`` uint8 RGBA image as ``(H, W, 3)`` RGB, and a note when pixels were not
    opaque (else ``None``).

    ``"black"``: ``round(c * a / 255)``; ``"white"``: ``round(c * a / 255 + 255 * (1 - a / 255))``
    (integer arithmetic, halves rounded up); ``"drop"``: the colour channels as they are. Any
    other shape passes through unchanged (no alpha, nothing to do).
    """
    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] != 4:
        return arr, None
    if alpha not in ("black", "white", "drop"):
        raise ValueError(f"alpha must be 'black', 'white' or 'drop', got {alpha!r}")
    if arr.dtype != np.uint8:
        raise ValueError(f"{name}: alpha compositing needs uint8 pixels, got {arr.dtype}")
    a = arr[:, :, 3:4]
    n_open = int(np.count_nonzero(a < 255))
    if n_open == 0 or alpha == "drop":
        rgb = np.ascontiguousarray(arr[:, :, :3])
    else:
        weighted = arr[:, :, :3].astype(np.uint32) * a
        if alpha == "white":
            weighted += 255 * (255 - a.astype(np.uint32))
        rgb = ((weighted + 127) // 255).astype(np.uint8)
    if n_open == 0:
        return rgb, None
    how = "alpha dropped (colour kept as stored)" if alpha == "drop" else f"composited on {alpha}"
    note = f"{name}: {n_open} of {a.size} pixels are not opaque (alpha < 255); {how}"
    return rgb, note


def _binarise(plane: np.ndarray, name: str) -> tuple[np.ndarray, str | None]:
    """A 2-D mask plane as bool: non-zero when binary, else ``> max / 2`` with a note."""
    if plane.dtype == bool:
        return plane, None
    nonzero = plane != 0
    if not nonzero.any():
        return nonzero, None
    top = plane.max()
    other = nonzero & (plane != top)
    n_other = int(np.count_nonzero(other))
    if n_other == 0:
        return nonzero, None
    if top <= 0:
        raise ValueError(
            f"{name}: the mask has no positive value (maximum {top}), so 'half its maximum' "
            "does not say what is inside; save it with 0 outside and a positive value inside"
        )
    threshold = top / 2
    inside = plane > threshold
    note = (
        f"{name}: {n_other} pixels have values other than 0 and its maximum {_num(top)} "
        f"(compression halos or soft edges?); binarised at half the maximum "
        f"(value > {_num(threshold)}): {int(np.count_nonzero(inside))} pixels inside "
        f"({int(np.count_nonzero(nonzero))} would be non-zero)"
    )
    return inside, note


def _num(value) -> str:
    return f"{float(value):g}"


def _mask_plane(arr: np.ndarray) -> np.ndarray:
    """The one plane of a mask array (channels checked); raises ``ValueError(problem)``."""
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"a mask needs numeric or bool pixels, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError("the mask contains NaN")
    if arr.ndim == 3 and arr.shape[2] == 4:
        alpha = arr[:, :, 3]
        opaque = _opaque_alpha(arr.dtype)
        if not np.all(alpha == opaque):
            raise ValueError(
                f"the mask has transparent pixels (alpha below {opaque}); "
                "medibench does not guess whether alpha or colour marks the region, "
                "save the mask as a single-channel image"
            )
        arr = arr[:, :, :3]
    if arr.ndim == 3 and arr.shape[2] == 3:
        if not (
            np.array_equal(arr[:, :, 0], arr[:, :, 1])
            and np.array_equal(arr[:, :, 0], arr[:, :, 2])
        ):
            differ = int(np.count_nonzero((arr != arr[:, :, :1]).any(axis=2)))
            raise ValueError(
                f"a 3-channel mask must have identical channels, but {differ} pixels "
                "differ between channels (is it a colour overlay rather than a mask?)"
            )
        arr = arr[:, :, 0]
    elif arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim != 2:
        raise ValueError(
            f"expected a mask of shape (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), got {arr.shape}"
        )
    return arr


def _opaque_alpha(dtype: np.dtype) -> float:
    """The alpha value of a fully opaque pixel: the integer maximum, 1 for floats and bools."""
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return 1
