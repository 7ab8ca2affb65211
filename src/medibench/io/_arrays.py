"""In-memory conversions: explicit-range scaling to uint8, and arrays to boolean masks."""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = ["to_uint8", "to_mask"]


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
    """Turn a mask array into a boolean ``(H, W)`` mask: any non-zero value is inside.

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
    try:
        return _as_mask(np.asarray(array))
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _as_mask(arr: np.ndarray) -> np.ndarray:
    """``to_mask`` without the name: raises ``ValueError(problem)``."""
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
        if not (np.array_equal(arr[:, :, 0], arr[:, :, 1])
                and np.array_equal(arr[:, :, 0], arr[:, :, 2])):
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
            "expected a mask of shape (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), "
            f"got {arr.shape}"
        )
    return arr != 0


def _opaque_alpha(dtype: np.dtype) -> float:
    """The alpha value of a fully opaque pixel: the integer maximum, 1 for floats and bools."""
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return 1
