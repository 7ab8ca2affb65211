"""The anomaly detector of the ``classical`` baseline: compact blobs that stand out locally.

:func:`detect_anomalies` finds lesion-like blobs in a uint8 grayscale ``(H, W)`` image (a
multi-scale Laplacian-of-Gaussian, each candidate tested against its surrounding annulus and
delineated by a local threshold); :mod:`medibench.models._segment` uses it for "lesion",
"tumor", "nodule" and the like.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np
from scipy import ndimage as ndi

from medibench.models._masks import object_on_empty_background

__all__ = ["Polarity", "detect_anomalies"]

Polarity = Literal["bright", "dark", "both"]


def detect_anomalies(
    gray: np.ndarray,
    *,
    polarity: Polarity = "both",
    min_significance: float = 12.0,
    relative_significance: float = 0.4,
    edge_ratio: float = 6.0,
    max_candidates: int = 60,
) -> list[np.ndarray]:
    """Compact blobs that stand out from their surroundings, most significant first.

    A multi-scale blob detector in the sense of Lindeberg, followed by a local test of each blob.
    Lengths below are for a 256-px image and scale with its shorter side ``s`` (a larger image is
    first reduced to a shorter side of 256 px, and the masks are brought back to full size).

    1. Where to look: when the image is one object in (nearly) flat air (see
       :func:`~medibench.models._masks.object_on_empty_background`) the object (the body),
       else the whole image.
    2. Scale space: the scale-normalised Laplacian of Gaussian ``-sigma^2 (Lxx + Lyy)`` at radii
       ``r = sqrt(2) sigma`` from ``0.012 s`` to ``0.12 s`` (3 to 31 px), spaced by 1.25; the
       Gaussian is a normalised convolution over the searched region, so the air does not leak in.
       Candidates are local extrema over space and scale whose disc of radius ``r`` lies in the
       region, with a positive Hessian determinant and ``trace^2 / det`` below ``(e + 1)^2 / e``
       for ``e = edge_ratio`` (blobs, not edges or ridges); the ``max_candidates`` strongest of
       each polarity are examined.
    3. Local test, on the image smoothed by a Gaussian of sigma 1: the plateau ``t`` is the mean
       of the core (radius ``r / 2``), the background ``b`` the median of the annulus
       ``1.5 r .. 2.5 r`` (region pixels only). The blob is the connected set of pixels beyond
       ``b + f (t - b)`` that holds the core, for the first ``f`` of 0.5, 0.65, 0.8 at which that
       set is closed: it stays within ``2.5 r`` of the centre (a blob, not a piece of a larger
       structure it touches). It is kept when it is compact (area 0.25 to 2.5 times ``pi r^2``,
       solidity at least 0.8, minor / major axis at least 0.4), lies ``0.025 s`` or more inside
       the region, at least 60 % of its annulus is in the region, and at most 20 % of the
       annulus is clipped at 0 or 255 (a hole in saturated bone is not a lesion).
    4. Significance: the mean contrast of the blob against ``b``, in units of the local noise (the
       robust standard deviation of the image minus its Gaussian of sigma 1.5 over the annulus,
       at least that over the whole region), times the square root of the blob area capped at
       ``pi (0.022 s)^2`` (about 100 px): a larger blob is more certainly real than a speck of the
       same contrast, but a big structure does not win on size alone.

    Overlapping detections keep the most significant. A blob is returned when its significance is
    at least ``min_significance`` and ``relative_significance`` times the best one's. Each mask
    is the blob grown to the lesion's soft rim: the pixels beyond a quarter of the contrast
    connected to it, within a third of its equivalent radius of it.

    Returns:
        boolean ``(H, W)`` masks, one per blob, sorted by decreasing significance (maybe empty).
    """
    h, w = gray.shape
    factor = max(1.0, min(h, w) / _WORK_SIDE)
    small = gray
    if factor > 1.0:
        size = (max(1, round(w / factor)), max(1, round(h / factor)))
        small = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
    region = object_on_empty_background(small)
    if region is None:
        region = np.ones(small.shape, bool)
    blobs = _find_blobs(small, region, polarity, edge_ratio, max_candidates)
    if not blobs:
        return []
    best = blobs[0].significance
    floor = max(min_significance, relative_significance * best)
    masks = [blob.mask for blob in blobs if blob.significance >= floor]
    if factor > 1.0:
        masks = [
            cv2.resize(m.astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR) >= 0.5
            for m in masks
        ]
    return masks


# ---------------------------------------------------------------------------------------------
# helpers


_WORK_SIDE = 256  # the detector works on images whose shorter side is at most this
_RADIUS_STEP = 1.25  # ratio of successive blob radii in the scale space


@dataclass
class _Blob:
    significance: float
    mask: np.ndarray  # the grown blob, full-size boolean
    core: np.ndarray  # the closed component, full-size boolean


def _find_blobs(
    gray: np.ndarray,
    region: np.ndarray,
    polarity: Polarity,
    edge_ratio: float,
    max_candidates: int,
) -> list[_Blob]:
    side = min(gray.shape)
    image = gray.astype(np.float32)
    depth = ndi.distance_transform_edt(np.pad(region, 1))[1:-1, 1:-1]
    r_lo = max(2.0, 0.012 * side)
    r_hi = max(1.5 * r_lo, 0.12 * side)
    radii = np.geomspace(r_lo, r_hi, int(np.ceil(np.log(r_hi / r_lo) / np.log(_RADIUS_STEP))) + 1)
    weight = region.astype(np.float32)
    masked = image * weight
    laplacian = []
    for radius in radii:
        sigma = radius / np.sqrt(2.0)
        norm = cv2.GaussianBlur(weight, (0, 0), sigma)
        smooth = cv2.GaussianBlur(masked, (0, 0), sigma) / np.maximum(norm, 1e-3)
        # Sobel second derivatives of a 3x3 kernel are 4x the plain finite differences.
        dxx = cv2.Sobel(smooth, cv2.CV_32F, 2, 0, ksize=3) / 4
        dyy = cv2.Sobel(smooth, cv2.CV_32F, 0, 2, ksize=3) / 4
        dxy = cv2.Sobel(smooth, cv2.CV_32F, 1, 1, ksize=3) / 4
        response = -(sigma**2) * (dxx + dyy)
        hessian_det = dxx * dyy - dxy * dxy
        trace = dxx + dyy
        blobby = (hessian_det > 0) & (
            trace * trace * edge_ratio < (edge_ratio + 1) ** 2 * hessian_det
        )
        response[(depth < radius) | ~blobby] = 0.0
        laplacian.append(response)
    stack = np.stack(laplacian)

    smooth1 = cv2.GaussianBlur(image, (0, 0), 1.0)
    highpass = image - cv2.GaussianBlur(image, (0, 0), 1.5)
    global_noise = max(_robust_std(highpass[region]), 0.5)
    context = _Context(gray, smooth1, highpass, region, depth, global_noise, side)
    signs = {"bright": (1.0,), "dark": (-1.0,), "both": (1.0, -1.0)}[polarity]
    found: list[_Blob] = []
    for sign in signs:
        signed = sign * stack
        peaks = (signed == _scale_space_max(signed)) & (signed > 0)
        ks, ys, xs = np.nonzero(peaks)
        for i in np.argsort(-signed[ks, ys, xs], kind="stable")[:max_candidates]:
            blob = _examine(context, int(ys[i]), int(xs[i]), float(radii[ks[i]]), sign)
            if blob is not None:
                found.append(blob)
    found.sort(key=lambda blob: -blob.significance)
    kept: list[_Blob] = []
    for blob in found:
        if not any((blob.core & other.mask).any() for other in kept):
            kept.append(blob)
    return kept


def _scale_space_max(stack: np.ndarray) -> np.ndarray:
    """Maximum over a 5x5 neighbourhood in space and the adjacent scales."""
    kernel = np.ones((5, 5), np.uint8)
    spatial = np.stack([cv2.dilate(layer, kernel) for layer in stack])
    out = spatial.copy()
    out[1:] = np.maximum(out[1:], spatial[:-1])
    out[:-1] = np.maximum(out[:-1], spatial[1:])
    return out


@dataclass
class _Context:
    gray: np.ndarray  # uint8, for clipping
    smooth: np.ndarray  # float32, Gaussian sigma 1
    highpass: np.ndarray  # image minus its Gaussian of sigma 1.5, for the noise
    region: np.ndarray
    depth: np.ndarray  # distance to the region's border (px)
    noise: float  # robust noise over the region
    side: int


def _examine(ctx: _Context, cy: int, cx: int, radius: float, sign: float) -> _Blob | None:
    """The local test of a candidate blob (step 3 of :func:`detect_anomalies`)."""
    h, w = ctx.smooth.shape
    half = int(np.ceil(3 * radius)) + 2
    y0, y1, x0, x1 = (
        max(0, cy - half),
        min(h, cy + half + 1),
        max(0, cx - half),
        min(w, cx + half + 1),
    )
    patch = ctx.smooth[y0:y1, x0:x1]
    inside_region = ctx.region[y0:y1, x0:x1]
    yy, xx = np.ogrid[y0:y1, x0:x1]
    dist = np.hypot(yy - cy, xx - cx)
    core = (dist <= max(0.5 * radius, 1.5)) & inside_region
    annulus = (dist >= 1.5 * radius) & (dist <= 2.5 * radius) & inside_region
    if core.sum() < 3 or annulus.sum() < 0.6 * 4 * np.pi * radius**2:
        return None
    top = float(patch[core].mean())
    background = float(np.median(patch[annulus]))
    if sign * (top - background) <= 0:
        return None
    blob = None
    for fraction in (0.5, 0.65, 0.8):
        blob = _component(
            patch, inside_region, core, sign, background + fraction * (top - background)
        )
        if blob is not None and dist[blob].max() <= 2.5 * radius and not _touches_edge(blob):
            break
        blob = None
    if blob is None:
        return None
    area = int(blob.sum())
    if not 0.25 <= area / (np.pi * radius**2) <= 2.5 or area < 4:
        return None
    if _solidity(blob) < 0.8 or _axis_ratio(blob) < 0.4:
        return None
    if ctx.depth[y0:y1, x0:x1][blob].min() < 0.025 * ctx.side:
        return None
    ring = annulus & ~blob
    raw = ctx.gray[y0:y1, x0:x1][ring]
    if raw.size == 0 or np.mean((raw <= 0) | (raw >= 255)) > 0.2:
        return None
    noise = max(_robust_std(ctx.highpass[y0:y1, x0:x1][ring]), ctx.noise)
    contrast = sign * (float(patch[blob].mean()) - background)
    cap = np.pi * (0.022 * ctx.side) ** 2
    significance = contrast * np.sqrt(min(area, cap)) / noise
    # Grow to the soft rim: beyond a quarter of the contrast, connected, and within a third of
    # the blob's equivalent radius of it (a soft edge; not the tissue around).
    rim = _component(patch, inside_region, blob, sign, background + 0.25 * (top - background))
    reach = max(1.0, np.sqrt(area / np.pi) / 3.0)
    grown = blob if rim is None else blob | (rim & (ndi.distance_transform_edt(~blob) <= reach))
    grown = ndi.binary_fill_holes(grown)
    full_blob = np.zeros(ctx.smooth.shape, bool)
    full_blob[y0:y1, x0:x1] = blob
    full_grown = np.zeros(ctx.smooth.shape, bool)
    full_grown[y0:y1, x0:x1] = grown
    return _Blob(float(significance), full_grown, full_blob)


def _component(
    patch: np.ndarray, valid: np.ndarray, seed: np.ndarray, sign: float, level: float
) -> np.ndarray | None:
    """The connected set of ``valid`` pixels beyond ``level`` that overlaps ``seed`` most."""
    beyond = (sign * (patch - level) > 0) & valid
    n, labels = cv2.connectedComponents(beyond.astype(np.uint8), connectivity=8)
    if n <= 1:
        return None
    overlap = np.bincount(labels[seed], minlength=n)
    overlap[0] = 0
    if overlap.max() == 0:
        return None
    return labels == int(np.argmax(overlap))


def _touches_edge(mask: np.ndarray) -> bool:
    return bool(mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any())


def _axis_ratio(mask: np.ndarray) -> float:
    """Minor over major axis of the ellipse with the same second moments as ``mask``."""
    rows, cols = np.nonzero(mask)
    if rows.size < 3:
        return 0.0
    eig = np.linalg.eigvalsh(np.cov(np.vstack([rows, cols]).astype(float)))
    return float(np.sqrt(max(eig[0], 1e-9) / max(eig[1], 1e-9)))


def _robust_std(values: np.ndarray) -> float:
    if values.size == 0:
        return 0.0
    return 1.4826 * float(np.median(np.abs(values - np.median(values))))


def _solidity(mask: np.ndarray) -> float:
    contours, _ = cv2.findContours(
        mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
    )
    hull_area = cv2.contourArea(cv2.convexHull(np.vstack(contours)))
    # contourArea measures between pixel centres, so a tiny blob can exceed 1; that is fine.
    return float(mask.sum()) / max(hull_area, 1.0)
