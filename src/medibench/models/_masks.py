"""Intensity masks for the classical segmentation (:mod:`medibench.models._segment`).

Otsu and multi-Otsu thresholds, hole filling and connected components on a uint8 grayscale
``(H, W)`` image: the organ (the main bright object), the body, the lungs, three intensity
classes. Every function returns a boolean mask (:func:`three_classes`: class labels).
"""

from __future__ import annotations

import cv2
import numpy as np
from scipy import ndimage as ndi
from skimage.filters import threshold_multiotsu, threshold_otsu

__all__ = [
    "body_mask",
    "lung_mask",
    "object_on_empty_background",
    "organ_mask",
    "three_classes",
]


def organ_mask(gray: np.ndarray) -> np.ndarray:
    """The main bright object: Otsu foreground, holes filled, opened, largest component."""
    foreground = ndi.binary_fill_holes(_otsu_foreground(gray))
    radius = max(1, round(0.01 * min(gray.shape)))
    opened = cv2.morphologyEx(foreground.astype(np.uint8), cv2.MORPH_OPEN, _disk(radius)) > 0
    largest = _largest_components(opened if opened.any() else foreground, 1)
    return ndi.binary_fill_holes(largest)


def object_on_empty_background(gray: np.ndarray) -> np.ndarray | None:
    """The body mask when the image is one object in (nearly) flat air, else ``None``."""
    body = body_mask(gray)
    if body.sum() < 0.05 * gray.size:
        return None
    outside = gray[~body]
    if outside.size and np.subtract(*np.percentile(outside, [95, 5])) >= 20:
        return None
    return body


def body_mask(gray: np.ndarray) -> np.ndarray:
    """The largest Otsu-foreground component, holes filled."""
    return ndi.binary_fill_holes(_largest_components(_otsu_foreground(gray), 1))


def three_classes(gray: np.ndarray, region: np.ndarray) -> np.ndarray:
    """Class 0, 1, 2 (dark to bright) of every pixel, thresholds from pixels in ``region``."""
    smooth = cv2.medianBlur(gray, 3)
    values = smooth[region]
    if values.size < 3 or np.unique(values).size < 3:
        return np.zeros(gray.shape, np.uint8)
    return np.digitize(smooth, threshold_multiotsu(values, classes=3)).astype(np.uint8)


def lung_mask(gray: np.ndarray) -> np.ndarray:
    """Dark (below Otsu) pixels inside the body, not touching the border; the two largest
    components of at least 1 % of the image, holes filled."""
    body = body_mask(gray)
    if not body.any():
        return body
    smooth = cv2.medianBlur(gray, 3)
    values = smooth[body]
    dark = body & (smooth <= threshold_otsu(values)) if np.unique(values).size > 1 else body
    labels, _ = ndi.label(dark)
    border = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    dark &= ~np.isin(labels, border[border > 0])
    lungs = _largest_components(dark, 2, min_area=0.01 * gray.size)
    return ndi.binary_fill_holes(lungs)


# ---------------------------------------------------------------------------------------------
# helpers


def _largest_components(mask: np.ndarray, count: int, *, min_area: float = 0) -> np.ndarray:
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros(mask.shape, bool)
    areas = stats[1:, cv2.CC_STAT_AREA]
    order = [i + 1 for i in np.argsort(-areas, kind="stable")[:count] if areas[i] >= min_area]
    return np.isin(labels, order)


def _otsu_foreground(gray: np.ndarray) -> np.ndarray:
    smooth = cv2.medianBlur(gray, 3)
    if smooth.min() == smooth.max():
        return np.ones(gray.shape, bool)
    return smooth > threshold_otsu(smooth)


def _disk(radius: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
