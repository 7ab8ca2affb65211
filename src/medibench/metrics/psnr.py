"""Peak signal-to-noise ratio, over the whole image or over a region.

``PSNR = 10 * log10(data_range^2 / MSE)``, ``MSE = mean((a - b)^2)`` over all pixels and channels
(for :func:`masked_psnr`, over the region's pixels and all their channels), in float64.
Identical images give ``float('inf')``, without a warning. Matches
``skimage.metrics.peak_signal_noise_ratio`` with the same ``data_range``.

Example:
    >>> import numpy as np
    >>> a = np.zeros((4, 4), np.uint8); b = a.copy(); b[0, 0] = 16      # MSE = 16
    >>> round(psnr(a, b, data_range=255), 4)
    36.0896
    >>> psnr(a, a, data_range=255)
    inf
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from medibench.metrics._checks import check_data_range, check_no_nan, check_real_images
from medibench.metrics._region import Region, select_region

__all__ = ["psnr", "masked_psnr"]

# dtypes cv2.norm reads directly (exact sums for integers, double accumulation for floats).
_CV_DTYPES = (np.uint8, np.uint16, np.int16, np.float32, np.float64)


def psnr(a: np.ndarray, b: np.ndarray, *, data_range: float) -> float:
    """PSNR in dB of ``b`` against ``a`` (same shape, any real dtype); ``inf`` when equal."""
    a, b = _checked(a, b)
    r = check_data_range(data_range)
    return _from_mse(_sum_squared_error(a, b) / a.size, r)


def masked_psnr(
    a: np.ndarray,
    b: np.ndarray,
    mask: np.ndarray,
    *,
    data_range: float,
    region: Region = "outside",
    dilate: int = 0,
    channel_axis: int | None = -1,
) -> float:
    """PSNR with the MSE taken over the pixels outside (or inside) the ROI ``mask``.

    ``mask`` is boolean or strictly binary with the spatial shape of ``a`` (``(H, W)``; for 3-D
    images the channel axis is ``channel_axis``); ``dilate`` grows the ROI by that many pixels
    (Euclidean disk) first. An empty region raises ``ValueError``.
    """
    a, b = _checked(a, b)
    r = check_data_range(data_range)
    if a.ndim == 3:
        if channel_axis is None:
            raise ValueError("3-D images need channel_axis (e.g. -1 for (H, W, C))")
        a, b = np.moveaxis(a, channel_axis, -1), np.moveaxis(b, channel_axis, -1)
    elif a.ndim != 2:
        raise ValueError(f"images must be 2-D (H, W) or 3-D with channels, got shape {a.shape}")
    chosen = select_region(mask, a.shape[:2], region, dilate)
    channels = a.shape[2] if a.ndim == 3 else 1
    n = int(np.count_nonzero(chosen)) * channels
    if (
        a.dtype == b.dtype
        and a.dtype.type in _CV_DTYPES
        and channels <= 4
        and a.flags.c_contiguous
        and b.flags.c_contiguous
    ):
        # cv2.norm takes the mask directly: no gathered float64 copies (9 ms -> <1 ms, 512 RGB).
        sse = float(
            cv2.norm(a, b, cv2.NORM_L2SQR, mask=np.ascontiguousarray(chosen).view(np.uint8))
        )
    else:
        diff = a[chosen].astype(np.float64) - b[chosen]
        sse = float(np.dot(diff.ravel(), diff.ravel()))
    return _from_mse(sse / n, r)


def _checked(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = check_real_images(a, b)
    for name, im in (("a", a), ("b", b)):
        check_no_nan(im, name)
    if a.size == 0:
        raise ValueError("images are empty")
    return a, b


def _sum_squared_error(a: np.ndarray, b: np.ndarray) -> float:
    if (
        a.dtype == b.dtype
        and a.dtype.type in _CV_DTYPES
        and a.flags.c_contiguous
        and b.flags.c_contiguous
    ):
        # One fused pass, no float64 temporaries: 5-10x faster than numpy on uint8.
        rows = a.shape[0] if a.ndim > 1 else 1
        return float(cv2.norm(a.reshape(rows, -1), b.reshape(rows, -1), cv2.NORM_L2SQR))
    diff = a.astype(np.float64) - b
    return float(np.dot(diff.ravel(), diff.ravel()))


def _from_mse(mse: float, data_range: float) -> float:
    if mse == 0.0:
        return math.inf
    return 10.0 * math.log10(data_range * data_range / mse)
