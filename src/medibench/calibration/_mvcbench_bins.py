"""The binned MVC-Bench metrics that both of its evaluators (:mod:`._mvcbench_paths`) and the
named variants (:mod:`._mvcbench`) compute: the VL path's ECE, the KBinsDiscretizer "ACE", and
the count-weighted sum they reduce to (the quirks are named in :mod:`._mvcbench`).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

__all__ = [
    "kbins_ace",
    "mvcbench_ace",
    "mvcbench_ece",
    "mvcbench_ece_from_sums",
    "mvcbench_ece_index",
]


def kbins_ace(
    conf: np.ndarray,
    correct: np.ndarray,
    n_bins: int,
    *,
    cut_to_distinct: bool,
    clip: bool,
    quantile_method: str = "linear",
) -> float:
    """``AdaptiveECE``: equal-mass bins by KBinsDiscretizer's quantile strategy (edges are
    ``numpy.percentile`` levels, edges closer than 1e-8 merged, ``searchsorted(side="right")``
    on the inner edges), count-weighted. The VL version clips to [0, 1] and cuts the bin count
    to the number of distinct confidences (at least 2; one distinct value is one bin); the
    Dassl version does neither."""
    conf = np.clip(conf, 0.0, 1.0) if clip else np.asarray(conf, dtype=np.float64)
    bins = n_bins
    if cut_to_distinct:
        distinct = min(conf.shape[0], np.unique(conf).size)
        if distinct <= 1:
            return float(abs(correct.mean() - conf.mean()))
        bins = int(max(2, min(n_bins, distinct)))
    levels = np.linspace(0, 100, bins + 1)
    edges = np.asarray(
        np.percentile(conf, levels, method=cast(Any, quantile_method)), dtype=np.float64
    )
    edges = edges[np.ediff1d(edges, to_begin=np.inf) > 1e-8]
    index = np.searchsorted(edges[1:-1], conf, side="right")
    return _count_weighted_sum(index, max(edges.shape[0] - 1, 1), conf, correct, conf.size)


def mvcbench_ece(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """``tools/metrics.py`` ``ECE``: ``[lo, hi)`` bins; 1.0 counted in the weights only."""
    index = mvcbench_ece_index(conf, n_bins)
    return mvcbench_ece_from_sums(
        np.bincount(index, minlength=n_bins + 1).astype(np.float64),
        np.bincount(index, weights=conf, minlength=n_bins + 1),
        np.bincount(index, weights=correct, minlength=n_bins + 1),
        conf.shape[0],
    )


def mvcbench_ece_index(conf: np.ndarray, n_bins: int) -> np.ndarray:
    """``numpy.digitize(conf, edges) - 1``: bins ``[lo, hi)``, and ``n_bins`` for 1.0."""
    return np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1), conf, side="right") - 1


def mvcbench_ece_from_sums(
    counts: np.ndarray, conf_sum: np.ndarray, hit_sum: np.ndarray, total: float
) -> float:
    """:func:`mvcbench_ece` from the count and sums of each of ``n_bins + 1`` slots of
    :func:`mvcbench_ece_index` (the last holds the confidences of 1.0: in the last bin's
    weight only)."""
    count, conf_sum, hit_sum = counts[:-1], conf_sum[:-1], hit_sum[:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(count > 0, hit_sum / count, 0.0)
        mean_conf = np.where(count > 0, conf_sum / count, 0.0)
    weights = count.copy()
    weights[-1] += counts[-1]
    return float(np.sum(weights / total * np.abs(mean_conf - acc)))


def mvcbench_ace(
    conf: np.ndarray, correct: np.ndarray, n_bins: int, *, quantile_method: str = "linear"
) -> float:
    """``tools/metrics.py`` ``AdaptiveECE`` (KBinsDiscretizer quantile bins, count-weighted,
    cut to the distinct confidences): :func:`kbins_ace`."""
    return kbins_ace(
        conf, correct, n_bins, cut_to_distinct=True, clip=True, quantile_method=quantile_method
    )


def _count_weighted_sum(index, n_slots, conf, hits, total) -> float:
    if index.size == 0:
        return 0.0
    gap = np.abs(
        np.bincount(index, weights=hits, minlength=n_slots)
        - np.bincount(index, weights=conf, minlength=n_slots)
    )
    return float(gap.sum() / total)
