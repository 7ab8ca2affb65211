"""Argument checks shared by the metric modules: shapes, masks, data ranges, NaNs."""

from __future__ import annotations

import numpy as np

__all__ = [
    "check_same_shape",
    "check_real_images",
    "check_no_nan",
    "check_data_range",
    "as_bool_mask",
]


def check_same_shape(a: np.ndarray, b: np.ndarray, names: tuple[str, str] = ("a", "b")) -> None:
    """Raise ``ValueError`` naming both shapes when ``a`` and ``b`` differ in shape."""
    if a.shape != b.shape:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same shape, "
            f"got {names[0]}.shape={a.shape} and {names[1]}.shape={b.shape}"
        )


def check_real_images(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` as arrays, checked to share a shape and to hold real (not bool) values."""
    a, b = np.asarray(a), np.asarray(b)
    check_same_shape(a, b)
    for name, im in (("a", a), ("b", b)):
        if im.dtype == bool or not (
            np.issubdtype(im.dtype, np.integer) or np.issubdtype(im.dtype, np.floating)
        ):
            raise ValueError(f"{name} must be a real-valued image, got dtype {im.dtype}")
    return a, b


def check_no_nan(x: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` when a float array holds NaN or infinity (never silently propagated)."""
    if np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():
        n_bad = int(x.size - np.count_nonzero(np.isfinite(x)))
        raise ValueError(f"{name} contains {n_bad} NaN or infinite value(s)")


def check_data_range(data_range: float | None) -> float:
    """Return ``data_range`` as a positive float; it is required, never guessed from the dtype."""
    if data_range is None:
        raise ValueError(
            "data_range is required (e.g. 255 for uint8 images, 1.0 for images in [0, 1]); "
            "medibench never guesses it from the dtype or the values"
        )
    value = float(data_range)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"data_range must be a positive finite number, got {data_range!r}")
    return value


def as_bool_mask(mask: np.ndarray, name: str = "mask") -> np.ndarray:
    """Return ``mask`` as a boolean array.

    Accepted: a boolean array, or a numeric array with at most two distinct values of which one
    is 0 (0/1, 0/255, ...). A mask with more levels (for example a grayscale or anti-aliased PNG)
    is ambiguous and raises ``ValueError``: binarise it yourself with the threshold you mean.
    """
    mask = np.asarray(mask)
    if mask.dtype == bool:
        return mask
    if not (np.issubdtype(mask.dtype, np.integer) or np.issubdtype(mask.dtype, np.floating)):
        raise ValueError(f"{name} must be boolean or numeric, got dtype {mask.dtype}")
    check_no_nan(mask, name)
    values = np.unique(mask)
    nonzero = values[values != 0]
    if nonzero.size > 1:
        shown = ", ".join(str(v) for v in values[:6]) + (", ..." if values.size > 6 else "")
        raise ValueError(
            f"{name} is not binary: it has {values.size} distinct values ({shown}); "
            "pass a boolean mask or one with only 0 and a single non-zero value"
        )
    return mask != 0
