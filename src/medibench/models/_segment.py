"""Classical segmentation for the ``classical`` baseline: which pixels a structure phrase names.

Rules, by the first keyword found in the structure phrase (a phrase with several parts, "the liver
and the spleen", is split on "and" / commas and the masks are united):

===========================================  ==================================================
keyword                                      mask
===========================================  ==================================================
white matter                                 brightest of 3 multi-Otsu classes inside the organ
                                             mask (T1 MR: white matter is brightest)
grey / gray matter, cortex                   middle class inside the organ mask
csf, cerebrospinal fluid, ventricle          darkest class inside the organ mask
bone, skull, spine, vertebra, rib            brightest of 3 multi-Otsu classes inside the body
lung                                         dark (below Otsu) pixels inside the body, not
                                             touching the border; the two largest components
lesion, tumor, nodule, polyp, mass, spot,    the most significant blob of :func:`detect_anomalies`
cyst, artifact, abnormality                  (all of them for plurals or "all"): a multi-scale
                                             Laplacian-of-Gaussian blob, tested against its
                                             surrounding annulus and delineated by a local
                                             threshold
anything else (brain, liver, body, organ,    the organ mask: Otsu foreground, holes filled,
kidney, heart, optic disc, ...)              opened to cut thin bridges, largest component
===========================================  ==================================================

Adjectives choose the polarity of anomalies: "bright", "white", "hyperintense", "hyperdense",
"enhancing" look for bright blobs, "dark", "black", "hypointense", "hypodense" for dark ones; by
default both. All functions take a uint8 grayscale ``(H, W)`` image and return boolean masks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypedDict

import cv2
import numpy as np
from scipy import ndimage as ndi
from skimage.filters import threshold_multiotsu, threshold_otsu

from medibench.models._instructions import ANOMALY_WORDS

if TYPE_CHECKING:  # annotations only (postponed), so Python 3.10 needs no typing_extensions
    from typing_extensions import Unpack

__all__ = [
    "DetectorSettings",
    "Polarity",
    "detect_anomalies",
    "organ_mask",
    "polarity_of",
    "structure_mask",
    "to_gray",
    "wants_all",
]

Polarity = Literal["bright", "dark", "both"]

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bwhite matter\b"), "white_matter"),
    (re.compile(r"\b(?:grey|gray) matter\b|\bcortex\b"), "grey_matter"),
    (re.compile(r"\bcsf\b|\bcerebrospinal\b|\bventricles?\b"), "csf"),
    (re.compile(r"\b(?:bones?|skull|spine|vertebrae?|ribs?)\b"), "bone"),
    (re.compile(r"\blungs?\b"), "lung"),
    (re.compile(r"\b(?:" + "|".join(ANOMALY_WORDS) + r")(?:s|es)?\b"), "anomaly"),
)
_PLURAL = re.compile(r"\b(?:all|every|each|any)\b|\b(?:" + "|".join(ANOMALY_WORDS) + r")(?:s|es)\b")
_BRIGHT = re.compile(r"\b(?:bright|white|hyperintense|hyperdense|enhancing|light)\b")
_DARK = re.compile(r"\b(?:dark|black|hypointense|hypodense)\b")
_PARTS = re.compile(r"\s*(?:,\s*(?:and\s+)?|\band\b|&)\s*(?:the\s+)?")


def to_gray(rgb: np.ndarray) -> np.ndarray:
    """uint8 luminance of an RGB image; the first channel when all three are equal."""
    if is_gray(rgb):
        return np.ascontiguousarray(rgb[:, :, 0])
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)


def is_gray(rgb: np.ndarray) -> bool:
    """True when an ``(H, W, 3)`` image has three equal channels."""
    return bool((rgb[:, :, 0] == rgb[:, :, 1]).all() and (rgb[:, :, 1] == rgb[:, :, 2]).all())


def polarity_of(phrase: str) -> Polarity:
    """Bright or dark anomalies, from adjectives in ``phrase`` (see module docstring)."""
    bright, dark = bool(_BRIGHT.search(phrase)), bool(_DARK.search(phrase))
    return "bright" if bright and not dark else "dark" if dark and not bright else "both"


def wants_all(phrase: str) -> bool:
    """True when ``phrase`` asks for every anomaly ("all", "every", a plural), not the top one."""
    return bool(_PLURAL.search(phrase))


class DetectorSettings(TypedDict, total=False):
    """The :func:`detect_anomalies` settings that callers pass through as ``**settings``."""

    min_significance: float
    relative_significance: float


def structure_mask(
    gray: np.ndarray, phrase: str, **detector: Unpack[DetectorSettings]
) -> np.ndarray:
    """Boolean ``(H, W)`` mask of the structure ``phrase`` names, by the rules of this module.

    ``detector`` settings (``min_significance``, ``relative_significance``) go to
    :func:`detect_anomalies` for lesion-like structures.
    """
    mask = np.zeros(gray.shape, bool)
    for part in (p for p in _PARTS.split(phrase) if p):
        mask |= _one_structure(gray, part, detector)
    return mask


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
       :func:`_object_on_empty_background`) the object (the body), else the whole image.
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
    region = _object_on_empty_background(small)
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


def organ_mask(gray: np.ndarray) -> np.ndarray:
    """The main bright object: Otsu foreground, holes filled, opened, largest component."""
    foreground = ndi.binary_fill_holes(_otsu_foreground(gray))
    radius = max(1, round(0.01 * min(gray.shape)))
    opened = cv2.morphologyEx(foreground.astype(np.uint8), cv2.MORPH_OPEN, _disk(radius)) > 0
    largest = _largest_components(opened if opened.any() else foreground, 1)
    return ndi.binary_fill_holes(largest)


# ---------------------------------------------------------------------------------------------
# helpers


def _one_structure(gray: np.ndarray, phrase: str, detector: DetectorSettings) -> np.ndarray:
    rule = next((name for pattern, name in _RULES if pattern.search(phrase)), "organ")
    if rule in ("white_matter", "grey_matter", "csf"):
        organ = organ_mask(gray)
        classes = _three_classes(gray, organ)
        wanted = {"csf": 0, "grey_matter": 1, "white_matter": 2}[rule]
        return organ & (classes == wanted)
    if rule == "bone":
        body = _body_mask(gray)
        return body & (_three_classes(gray, body) == 2)
    if rule == "lung":
        return _lung_mask(gray)
    if rule == "anomaly":
        blobs = detect_anomalies(gray, polarity=polarity_of(phrase), **detector)
        mask = np.zeros(gray.shape, bool)
        for blob in blobs if wants_all(phrase) else blobs[:1]:
            mask |= blob
        return mask
    return organ_mask(gray)


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


def _otsu_foreground(gray: np.ndarray) -> np.ndarray:
    smooth = cv2.medianBlur(gray, 3)
    if smooth.min() == smooth.max():
        return np.ones(gray.shape, bool)
    return smooth > threshold_otsu(smooth)


def _object_on_empty_background(gray: np.ndarray) -> np.ndarray | None:
    """The body mask when the image is one object in (nearly) flat air, else ``None``."""
    body = _body_mask(gray)
    if body.sum() < 0.05 * gray.size:
        return None
    outside = gray[~body]
    if outside.size and np.subtract(*np.percentile(outside, [95, 5])) >= 20:
        return None
    return body


def _body_mask(gray: np.ndarray) -> np.ndarray:
    return ndi.binary_fill_holes(_largest_components(_otsu_foreground(gray), 1))


def _three_classes(gray: np.ndarray, region: np.ndarray) -> np.ndarray:
    """Class 0, 1, 2 (dark to bright) of every pixel, thresholds from pixels in ``region``."""
    smooth = cv2.medianBlur(gray, 3)
    values = smooth[region]
    if values.size < 3 or np.unique(values).size < 3:
        return np.zeros(gray.shape, np.uint8)
    return np.digitize(smooth, threshold_multiotsu(values, classes=3)).astype(np.uint8)


def _lung_mask(gray: np.ndarray) -> np.ndarray:
    body = _body_mask(gray)
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


def _largest_components(mask: np.ndarray, count: int, *, min_area: float = 0) -> np.ndarray:
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros(mask.shape, bool)
    areas = stats[1:, cv2.CC_STAT_AREA]
    order = [i + 1 for i in np.argsort(-areas, kind="stable")[:count] if areas[i] >= min_area]
    return np.isin(labels, order)


def _solidity(mask: np.ndarray) -> float:
    contours, _ = cv2.findContours(
        mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
    )
    hull_area = cv2.contourArea(cv2.convexHull(np.vstack(contours)))
    # contourArea measures between pixel centres, so a tiny blob can exceed 1; that is fine.
    return float(mask.sum()) / max(hull_area, 1.0)


def _disk(radius: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
