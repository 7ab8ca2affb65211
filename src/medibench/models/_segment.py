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
from typing import TYPE_CHECKING, TypedDict

import cv2
import numpy as np

from medibench.models._blobs import Polarity, detect_anomalies
from medibench.models._instructions import ANOMALY_WORDS
from medibench.models._masks import body_mask, lung_mask, organ_mask, three_classes

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


# ---------------------------------------------------------------------------------------------
# helpers


def _one_structure(gray: np.ndarray, phrase: str, detector: DetectorSettings) -> np.ndarray:
    rule = next((name for pattern, name in _RULES if pattern.search(phrase)), "organ")
    if rule in ("white_matter", "grey_matter", "csf"):
        organ = organ_mask(gray)
        classes = three_classes(gray, organ)
        wanted = {"csf": 0, "grey_matter": 1, "white_matter": 2}[rule]
        return organ & (classes == wanted)
    if rule == "bone":
        body = body_mask(gray)
        return body & (three_classes(gray, body) == 2)
    if rule == "lung":
        return lung_mask(gray)
    if rule == "anomaly":
        blobs = detect_anomalies(gray, polarity=polarity_of(phrase), **detector)
        mask = np.zeros(gray.shape, bool)
        for blob in blobs if wants_all(phrase) else blobs[:1]:
            mask |= blob
        return mask
    return organ_mask(gray)
