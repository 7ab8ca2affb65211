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
lesion, tumor, nodule, polyp, mass, spot,    the most salient blob of :func:`detect_anomalies`
cyst, artifact, abnormality                  (all of them for plurals or "all"), delineated by a
                                             local Otsu threshold around it
anything else (brain, liver, body, organ,    the organ mask: Otsu foreground, holes filled,
kidney, heart, optic disc, ...)              opened to cut thin bridges, largest component
===========================================  ==================================================

Adjectives choose the polarity of anomalies: "bright", "white", "hyperintense", "hyperdense",
"enhancing" look for bright blobs, "dark", "black", "hypointense", "hypodense" for dark ones; by
default both. All functions take a uint8 grayscale ``(H, W)`` image and return boolean masks.
"""

from __future__ import annotations

import re
from typing import Literal

import cv2
import numpy as np
from scipy import ndimage as ndi
from skimage.filters import apply_hysteresis_threshold, threshold_multiotsu, threshold_otsu

from medibench.models._instructions import ANOMALY_WORDS

__all__ = [
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


def structure_mask(gray: np.ndarray, phrase: str, **detector: float) -> np.ndarray:
    """Boolean ``(H, W)`` mask of the structure ``phrase`` names, by the rules of this module.

    ``detector`` settings (``k_high``, ``k_low``, ``background_fraction``) go to
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
    k_high: float = 4.0,
    k_low: float = 3.0,
    background_fraction: float = 0.3,
    min_area_fraction: float = 2e-4,
    max_area_fraction: float = 0.15,
    min_solidity: float = 0.8,
) -> list[np.ndarray]:
    """Compact blobs that stand out from a smooth background, most salient first.

    Where to look: when the image is an object on an empty background (a CT or MR slice in air:
    the body, the largest Otsu-foreground component with holes filled, covers at least 5 % of
    the image and the pixels outside it span less than 20 grey levels between their 5th and 95th
    percentiles), first inside the body, with the air replaced by the body's median so that the
    body outline is not an anomaly; when nothing is found there (or the image is not of that
    kind), in the whole image.

    The background is a median filter whose window is ``background_fraction`` of the shorter
    side (computed on a copy downsampled to about 128 px, for speed). The residual ``r = image -
    background`` (after a Gaussian of sigma 1) is thresholded with hysteresis on a robust scale:
    seeds where ``|r - m| > k_high * s``, grown while ``> k_low * s``, with ``m`` the median of
    ``r`` and ``s = max(1.4826 * MAD(r), 1)`` grey levels over the searched pixels. Components
    are kept when their area is between ``min_area_fraction`` and ``max_area_fraction`` of the
    image (at least 4 px), their bounding box is at most 3:1 and at least 30 % filled (this
    drops edges and thin structures) and their solidity (area / convex hull area) is at least
    ``min_solidity`` (lesions are compact; pieces of anatomy cut out by a threshold are ragged).
    Saliency = the residual summed over the component, so big strong blobs come first.

    Returns:
        boolean ``(H, W)`` masks, one per blob, sorted by decreasing saliency (maybe empty).
    """
    settings = (k_high, k_low, background_fraction, min_area_fraction, max_area_fraction,
                min_solidity)  # fmt: skip
    region = _object_on_empty_background(gray)
    found = _find_blobs(gray, region, polarity, *settings) if region is not None else []
    # A lone blob on black is itself "the body": then search the whole image.
    return found or _find_blobs(gray, None, polarity, *settings)


def organ_mask(gray: np.ndarray) -> np.ndarray:
    """The main bright object: Otsu foreground, holes filled, opened, largest component."""
    foreground = ndi.binary_fill_holes(_otsu_foreground(gray))
    radius = max(1, round(0.01 * min(gray.shape)))
    opened = cv2.morphologyEx(foreground.astype(np.uint8), cv2.MORPH_OPEN, _disk(radius)) > 0
    largest = _largest_components(opened if opened.any() else foreground, 1)
    return ndi.binary_fill_holes(largest)


# ---------------------------------------------------------------------------------------------
# helpers


def _one_structure(gray: np.ndarray, phrase: str, detector: dict[str, float]) -> np.ndarray:
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
        chosen = blobs if wants_all(phrase) else blobs[:1]
        mask = np.zeros(gray.shape, bool)
        for blob in chosen:
            mask |= _delineate(gray, blob)
        return mask
    return organ_mask(gray)


def _find_blobs(
    gray: np.ndarray,
    region: np.ndarray | None,
    polarity: Polarity,
    k_high: float,
    k_low: float,
    background_fraction: float,
    min_area_fraction: float,
    max_area_fraction: float,
    min_solidity: float,
) -> list[np.ndarray]:
    h, w = gray.shape
    image = gray
    if region is not None:
        image = np.where(region, gray, np.uint8(np.median(gray[region])))
    smooth = cv2.GaussianBlur(image.astype(np.float32), (0, 0), 1.0)
    residual = smooth - _median_background(image, background_fraction)
    searched = residual[region] if region is not None else residual.ravel()
    centre = float(np.median(searched))
    scale = max(1.4826 * float(np.median(np.abs(searched - centre))), 1.0)
    centred = residual - centre
    if region is not None:
        centred[~region] = 0.0
    min_area = max(4, int(min_area_fraction * h * w))
    max_area = max_area_fraction * h * w
    signs = {"bright": (1.0,), "dark": (-1.0,), "both": (1.0, -1.0)}[polarity]
    found: list[tuple[float, np.ndarray]] = []
    for sign in signs:
        signal = sign * centred
        candidates = apply_hysteresis_threshold(signal, k_low * scale, k_high * scale)
        n, labels, stats, _ = cv2.connectedComponentsWithStats(candidates.astype(np.uint8), 8)
        for i in range(1, n):
            bw, bh, area = stats[i, cv2.CC_STAT_WIDTH], stats[i, cv2.CC_STAT_HEIGHT], stats[i, 4]
            if not min_area <= area <= max_area:
                continue
            if max(bw, bh) > 3 * min(bw, bh) or area < 0.3 * bw * bh:
                continue
            x0, y0 = stats[i, cv2.CC_STAT_LEFT], stats[i, cv2.CC_STAT_TOP]
            if _solidity(labels[y0 : y0 + bh, x0 : x0 + bw] == i) < min_solidity:
                continue
            component = labels == i
            found.append((float(signal[component].sum()), component))
    found.sort(key=lambda item: -item[0])
    return [component for _, component in found]


def _median_background(gray: np.ndarray, fraction: float) -> np.ndarray:
    h, w = gray.shape
    factor = max(1.0, min(h, w) / 128.0)
    small = cv2.resize(gray, (max(1, round(w / factor)), max(1, round(h / factor))),
                       interpolation=cv2.INTER_AREA)  # fmt: skip
    ksize = max(3, int(fraction * min(small.shape)) | 1)
    background = cv2.medianBlur(small, ksize)
    return cv2.resize(background, (w, h), interpolation=cv2.INTER_LINEAR).astype(np.float32)


def _delineate(gray: np.ndarray, blob: np.ndarray) -> np.ndarray:
    """Refine a detected blob with an Otsu threshold in a window three times its size."""
    rows, cols = np.nonzero(blob)
    r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    pad_r, pad_c = r1 - r0, c1 - c0
    window = (slice(max(0, r0 - pad_r), r1 + pad_r), slice(max(0, c0 - pad_c), c1 + pad_c))
    patch = cv2.GaussianBlur(gray[window], (0, 0), 1.0)
    if patch.min() == patch.max():
        return blob
    threshold = threshold_otsu(patch)
    bright = patch[blob[window]].mean() > patch.mean()
    inside = patch > threshold if bright else patch <= threshold
    labels, _ = ndi.label(inside)
    keep = np.unique(labels[blob[window] & inside])
    region = ndi.binary_fill_holes(np.isin(labels, keep[keep > 0]))
    if not region.any() or region.sum() > 4 * blob.sum():  # leaked into the surroundings
        return blob
    out = np.zeros(gray.shape, bool)
    out[window] = region
    return out


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
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), 8)
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
