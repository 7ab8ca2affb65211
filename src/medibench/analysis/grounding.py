"""Attention-grounding IoU (MedEBench): does the model look where the edit should happen?

A heat map (``(H, W)`` floats, min-max normalised by :func:`normalize_heatmap`) is binarised at
``alpha * otsu(heatmap)`` (``alpha = 1.3``, MedEBench's reading; pixels strictly above the
threshold are in) and compared with the boolean ROI mask by IoU. Otsu's threshold is
``skimage.filters.threshold_otsu`` (256 bins). When ``alpha * otsu`` exceeds the map's maximum the
binarised map is empty: the IoU is 0 and :func:`grounding` records why; when the mask is empty too
the IoU is NaN, with its reason (nothing to ground).

:func:`diagnose` reads IoU next to judged editing accuracy (MedEBench's failure analysis): high
IoU with low accuracy is a *conservative edit* (looked at the right place, changed too little),
low IoU a *mislocalised* one.

Example:
    >>> import numpy as np
    >>> heat = np.zeros((8, 8)); heat[2:6, 2:6] = 1.0
    >>> mask = np.zeros((8, 8), bool); mask[2:6, 2:4] = True
    >>> grounding_iou(heat, mask)
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from medibench.metrics._checks import as_bool_mask

__all__ = ["Grounding", "diagnose", "grounding", "grounding_iou", "normalize_heatmap"]


@dataclass(frozen=True)
class Grounding:
    """One heat map against one ROI: ``iou`` (NaN when both are empty), Otsu's threshold of the
    map, the ``threshold`` used (``alpha * otsu``), the binarised map's pixel count and a
    ``note`` saying why the IoU is 0 or NaN (``None`` otherwise)."""

    iou: float
    otsu: float
    threshold: float
    alpha: float
    pixels: int
    note: str | None = None


def grounding_iou(heatmap: np.ndarray, mask: np.ndarray, *, alpha: float = 1.3) -> float:
    """IoU of ``heatmap > alpha * otsu(heatmap)`` with the boolean ``mask`` (same ``(H, W)``).

    0 when the threshold exceeds the map's maximum (empty binarised map), NaN when the mask is
    empty too; :func:`grounding` gives the reason with the value.
    """
    return grounding(heatmap, mask, alpha=alpha).iou


def grounding(heatmap: np.ndarray, mask: np.ndarray, *, alpha: float = 1.3) -> Grounding:
    """:func:`grounding_iou` with its threshold and the note that explains a 0 or a NaN.

    Raises:
        ValueError: a heat map that is not 2-D or holds NaN, a mask of another shape or not
            binary, ``alpha <= 0``.
    """
    heat = np.asarray(heatmap, dtype=np.float64)
    if heat.ndim != 2:
        raise ValueError(f"heatmap must be (H, W), got shape {heat.shape}")
    if not np.isfinite(heat).all():
        raise ValueError("heatmap holds NaN or infinite values")
    roi = as_bool_mask(mask, "mask")
    if roi.shape != heat.shape:
        raise ValueError(
            f"mask shape {roi.shape} differs from heatmap shape {heat.shape} (both (H, W)): "
            "resize the heat map to the mask first"
        )
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    otsu = _otsu(heat)
    threshold = alpha * otsu
    binary = heat > threshold
    pixels = int(binary.sum())
    union = int((binary | roi).sum())
    note = None
    if pixels == 0:
        note = (
            f"threshold {threshold:.4g} = {alpha} x Otsu {otsu:.4g} is not below the map's maximum "
            f"{heat.max():.4g}: the binarised map is empty"
        )
    if union == 0:
        return Grounding(math.nan, otsu, threshold, alpha, 0, f"{note}, and so is the mask")
    return Grounding(float((binary & roi).sum() / union), otsu, threshold, alpha, pixels, note)


def normalize_heatmap(heatmap: np.ndarray) -> np.ndarray:
    """Min-max normalise to [0, 1] (float64); a constant map becomes all zeros."""
    heat = np.asarray(heatmap, dtype=np.float64)
    lo, hi = float(heat.min()), float(heat.max())
    if hi <= lo:
        return np.zeros_like(heat)
    return (heat - lo) / (hi - lo)


def diagnose(
    rows: Iterable[Mapping[str, Any]],
    accuracy: Mapping[tuple[str, str, int], float | None],
    *,
    iou_threshold: float = 0.5,
    accuracy_threshold: float = 0.5,
) -> list[dict[str, Any]]:
    """The failure diagnosis of each attention row that has a judged accuracy.

    ``rows`` carry ``model``, ``sample_id``, ``k``, ``iou`` (and ``region``); ``accuracy`` maps
    ``(model, sample_id, k)`` to the judged editing accuracy in [0, 1] (MedEBench's EA / 10).
    The diagnosis: ``iou >= iou_threshold`` and ``accuracy < accuracy_threshold``:
    ``conservative edit``; ``iou < iou_threshold``: ``mislocalised``; otherwise ``grounded``.
    Rows without an accuracy or with a NaN IoU are left out.
    """
    out = []
    for r in rows:
        key = (str(r["model"]), str(r["sample_id"]), int(r["k"]))
        acc, iou = accuracy.get(key), r.get("iou")
        if acc is None or iou is None or math.isnan(acc) or math.isnan(iou):
            continue
        if iou < iou_threshold:
            verdict = "mislocalised"
        elif acc < accuracy_threshold:
            verdict = "conservative edit"
        else:
            verdict = "grounded"
        out.append({**dict(r), "accuracy": acc, "diagnosis": verdict})
    return out


def _otsu(heat: np.ndarray) -> float:
    from skimage.filters import threshold_otsu

    if float(heat.max()) <= float(heat.min()):
        return float(heat.max())  # one level: no class split (skimage returns the value too)
    return float(threshold_otsu(heat))
