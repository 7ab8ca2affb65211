"""SSIM restricted to a region: the MedEBench contextual-preservation metric (docs/protocols.md).

``masked_ssim = mean of the SSIM map over the pixels of the region (and over the channels)``,
where the region is the outside (default) or the inside of the ROI mask, optionally dilated.
Unlike :func:`~medibench.metrics.ssim`, no border is cropped: every pixel of the region counts
(the map near the border uses reflected neighbours, as in scikit-image).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(0, 256, (32, 32), dtype=np.uint8)
    >>> b = a.copy(); b[8:16, 8:16] = 0                      # an edit inside the ROI
    >>> roi = np.zeros((32, 32), bool); roi[8:16, 8:16] = True
    >>> round(masked_ssim(a, b, roi, data_range=255), 4)   # the edit's halo leaks out
    0.966
    >>> round(masked_ssim(a, b, roi, data_range=255, dilate=8), 6)
    1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Unpack

import cv2
import numpy as np

from medibench.metrics._region import Region, select_region
from medibench.metrics.ssim import (
    SSIMKeywords,
    SSIMOptions,
    _as_hwc,
    _cropped_mean,
    _fused,
    _ssim_hwc,
    resolve_options,
)

__all__ = ["masked_ssim", "ssim_by_region"]

# The masked regions by name (``"full"`` is the whole map, averaged with the border crop).
_MASKED: dict[str, Region] = {"outside": "outside", "inside": "inside"}


def masked_ssim(
    a: np.ndarray,
    b: np.ndarray,
    mask: np.ndarray,
    *,
    region: Region = "outside",
    dilate: int = 0,
    options: SSIMOptions | None = None,
    **keywords: Unpack[SSIMKeywords],
) -> float:
    """Mean SSIM over the pixels outside (or inside) the ROI.

    Args:
        a, b: images, ``(H, W)`` or 3-D with ``channel_axis``; see :func:`ssim_map`.
        mask: ROI, boolean or strictly binary ``(H, W)`` (the spatial shape of ``a``). A mask with
            more than two levels (a grayscale PNG) raises ``ValueError``.
        region: ``"outside"`` (context: where the mask is False) or ``"inside"``.
        dilate: grow the ROI by this many pixels (Euclidean disk) before choosing the region, to
            keep the edit's halo out of the context.
        options, data_range, window, win_size, sigma, k1, k2, use_sample_covariance,
            channel_axis, dtype: the SSIM map's settings, as for :func:`ssim_map` (``data_range``
            required; defaults: Gaussian sigma 1.5, 11x11, K1 .01, K2 .03, population
            covariance: the medibench CP protocol).

    Returns:
        The mean of the map over the region's pixels and all channels, a float.
        Raises ``ValueError`` when the region is empty (naming it).
    """
    opts = resolve_options(options, keywords, "masked_ssim")
    return _summaries(a, b, mask, (region,), dilate, opts, full=False)[region]


def ssim_by_region(
    a: np.ndarray,
    b: np.ndarray,
    mask: np.ndarray,
    *,
    regions: tuple[str, ...] = ("full", "outside", "inside"),
    dilate: int = 0,
    options: SSIMOptions | None = None,
    **keywords: Unpack[SSIMKeywords],
) -> dict[str, float]:
    """Several SSIM summaries of one pair from a single SSIM map (the map is the expensive part).

    ``"full"`` is :func:`~medibench.metrics.ssim` (mean with the border crop); ``"outside"`` and
    ``"inside"`` are :func:`masked_ssim` with that region. Same arguments as :func:`masked_ssim`;
    the values are identical to calling those functions one by one.

    Example:
        >>> import numpy as np
        >>> a = np.zeros((32, 32), np.uint8); b = a.copy(); b[8:16, 8:16] = 200
        >>> roi = b > 0
        >>> {k: round(v, 4) for k, v in ssim_by_region(a, b, roi, data_range=255).items()}
        {'full': 0.5461, 'outside': 0.8096, 'inside': 0.0}
    """
    unknown = set(regions) - {"full", "outside", "inside"}
    if unknown or not regions:
        raise ValueError(
            f"regions must be a non-empty subset of ('full', 'outside', 'inside'), got {regions!r}"
        )
    opts = resolve_options(options, keywords, "ssim_by_region")
    masked = [_MASKED[r] for r in regions if r != "full"]
    summaries = _summaries(a, b, mask, masked, dilate, opts, full="full" in regions)
    return {r: summaries[r] for r in regions}


def _summaries(
    a: np.ndarray,
    b: np.ndarray,
    mask: np.ndarray,
    regions: Iterable[Region],
    dilate: int,
    opts: SSIMOptions,
    *,
    full: bool,
) -> dict[str, float]:
    """Each region's mean and (when ``full``) ``"full"``, the cropped mean, from one SSIM map."""
    x, y, _ = _as_hwc(a, b, opts.channel_axis)
    chosen: dict[str, np.ndarray] = {
        r: select_region(mask, x.shape[:2], r, dilate) for r in regions
    }
    # The fused stencil sums the regions row by row without writing the map.
    fused = _fused(x, y, opts, tuple(chosen.values()), want_map=False, want_mean=full)
    if fused is not None:
        return dict(zip(["full", *chosen], fused[1], strict=True))
    s, win = _ssim_hwc(x, y, opts)
    out = {r: _region_mean(s, sel) for r, sel in chosen.items()}
    if full:
        out["full"] = _cropped_mean(s, win)
    return out


def _region_mean(values: np.ndarray, chosen: np.ndarray) -> float:
    """Mean of an ``(H, W, C)`` map over the pixels where ``chosen`` is True, all channels."""
    c = values.shape[2]
    if c <= 4:
        # cv2.mean accumulates in double and needs no gathered copy (nor BLAS threads, which
        # were seen to fight OpenCV's for the two cores of the bench machine).
        means = cv2.mean(
            values if c > 1 else values[:, :, 0], mask=np.ascontiguousarray(chosen).view(np.uint8)
        )
        return float(np.mean(means[:c]))
    return float(values[chosen].sum(dtype=np.float64) / (np.count_nonzero(chosen) * c))
