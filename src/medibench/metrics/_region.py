"""Choosing the pixels a masked metric averages over: inside or outside a (dilated) ROI."""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np

from medibench.metrics._checks import as_bool_mask

__all__ = ["Region", "select_region"]

Region = Literal["outside", "inside"]


def select_region(
    mask: np.ndarray, spatial: tuple[int, ...], region: Region, dilate: int
) -> np.ndarray:
    """Boolean ``(H, W)`` map of the pixels to average over.

    The ROI (``mask`` True) is first dilated by ``dilate`` pixels with a Euclidean disk: a pixel
    joins the ROI when its centre is within ``dilate`` pixels of an ROI pixel centre. Then
    ``"outside"`` keeps the pixels not in the dilated ROI, ``"inside"`` those in it.
    Raises ``ValueError`` for a non-binary mask, a shape mismatch or an empty region.
    """
    roi = as_bool_mask(mask, "mask")
    if roi.shape != tuple(spatial):
        raise ValueError(
            f"mask shape {roi.shape} does not match the images' spatial shape {tuple(spatial)}"
        )
    if region not in ("outside", "inside"):
        raise ValueError(f"region must be 'outside' or 'inside', got {region!r}")
    if isinstance(dilate, bool) or not isinstance(dilate, (int, np.integer)) or dilate < 0:
        raise ValueError(f"dilate must be a non-negative integer (pixels), got {dilate!r}")
    if dilate > 0 and roi.any():
        # Exact Euclidean distance to the nearest ROI pixel (Felzenszwalb, DIST_MASK_PRECISE).
        dist = cv2.distanceTransform((~roi).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
        roi = dist <= dilate
    chosen = ~roi if region == "outside" else roi
    if not chosen.any():
        grown = f" (after dilating the ROI by {dilate} px)" if dilate else ""
        why = "the ROI covers the whole image" if region == "outside" else "the ROI is empty"
        raise ValueError(f"region {region!r} is empty{grown}: {why}")
    return chosen
