"""The binned-statistics cores every binned metric shares: bin assignment under a named edge
policy, per-bin sums and equal-mass bins.

Edge policies for ``n`` equal-width bins with edges ``numpy.linspace(0, 1, n + 1)``:

* ``"right"``: bins ``(lo, hi]``; a confidence of exactly 0 goes to the first bin (medibench's
  default; scikit-learn's ``calibration_curve``, Guo et al.'s reference code and the dassl
  evaluator MVC-Bench ships bin so).
* ``"left"``: bins ``[lo, hi)``; a confidence of exactly 1 goes to the last bin (numpy's
  ``histogram`` and ``digitize``, MVC-Bench's ``tools/metrics.py``).
* ``"torchmetrics"``: bins ``[lo, hi)`` plus a hidden ``n + 1``-th bin that holds confidences of
  exactly 1 (``torch.bucketize(conf, edges, right=True) - 1``, as torchmetrics'
  ``CalibrationError`` bins; it casts confidences and edges to float32, so a float64 confidence
  within float32 rounding of an edge may land one bin apart from it).
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

import numpy as np

__all__ = [
    "EDGE_POLICIES",
    "BinSums",
    "EdgePolicy",
    "bin_index",
    "bin_sums",
    "check_bins",
    "equal_mass_sums",
    "uniform_edges",
]

EdgePolicy = Literal["right", "left", "torchmetrics"]
EDGE_POLICIES: tuple[str, ...] = get_args(EdgePolicy)


class BinSums(NamedTuple):
    """Per-bin sample count ``counts``, sum of confidences ``conf`` and sum of outcomes ``hits``
    (correct predictions, or positives for a one-vs-rest score); ``total`` is the number of
    samples."""

    counts: np.ndarray
    conf: np.ndarray
    hits: np.ndarray
    total: float


def check_bins(n_bins: int, n_samples: float, who: str) -> None:
    """Refuse a bin count that is not a positive integer, or more bins than samples."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"{who}: the number of bins must be a positive integer, got {n_bins!r}")
    if n_samples < n_bins:
        raise ValueError(
            f"{who}: {int(n_samples)} samples but {n_bins} bins; fewer samples than bins leaves "
            "bins empty by construction: use fewer bins"
        )


def uniform_edges(n_bins: int) -> np.ndarray:
    """``numpy.linspace(0, 1, n_bins + 1)``: the equal-width edges every policy uses."""
    return np.linspace(0.0, 1.0, n_bins + 1)


def bin_index(conf: np.ndarray, n_bins: int, edges: EdgePolicy = "right") -> tuple[np.ndarray, int]:
    """Bin of each confidence and the number of bins (``n_bins``, or ``n_bins + 1`` for the
    torchmetrics policy, whose last bin holds the confidences equal to 1).

    Computed as ``ceil(conf * n) - 1`` (right) or ``floor(conf * n)`` (left, torchmetrics), then
    exactly (``searchsorted`` on the ``linspace`` edges) for the values within 1e-6 of an edge,
    where the product may round across it.
    """
    if edges not in EDGE_POLICIES:
        raise ValueError(f"edge policy must be one of {', '.join(EDGE_POLICIES)}, got {edges!r}")
    e = uniform_edges(n_bins)
    t = conf * n_bins
    near = np.flatnonzero(np.abs(t - np.rint(t)) < 1e-6)
    if edges == "right":
        index = np.ceil(t).astype(np.int64)
        index -= 1
        np.clip(index, 0, n_bins - 1, out=index)
        index[near] = np.searchsorted(e[1:-1], conf[near], side="left")
        return index, n_bins
    index = np.floor(t).astype(np.int64)
    if edges == "left":
        np.clip(index, 0, n_bins - 1, out=index)
        index[near] = np.searchsorted(e[1:-1], conf[near], side="right")
        return index, n_bins
    np.clip(index, 0, n_bins, out=index)
    index[near] = np.searchsorted(e, conf[near], side="right") - 1
    return index, n_bins + 1


def bin_sums(index: np.ndarray, n_slots: int, conf: np.ndarray, hits: np.ndarray) -> BinSums:
    """Sum the count, confidences and outcomes of the samples in each bin."""
    return BinSums(
        np.bincount(index, minlength=n_slots).astype(np.float64),
        np.bincount(index, weights=conf, minlength=n_slots),
        np.bincount(index, weights=hits, minlength=n_slots),
        float(index.shape[0]),
    )


def equal_mass_sums(conf: np.ndarray, hits: np.ndarray, n_bins: int) -> BinSums:
    """Equal-mass bins: the samples sorted by confidence (a stable sort, so ties keep their
    input order) and cut into ``n_bins`` runs of ``ceil(N / n_bins)`` or ``floor(N / n_bins)``
    samples, the longer runs first (``numpy.array_split``)."""
    order = np.argsort(conf)
    n = conf.shape[0]
    q, r = divmod(n, n_bins)
    sizes = np.full(n_bins, q, dtype=np.int64)
    sizes[:r] += 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ordered = conf[order]
    for s in starts[1:]:
        # Only the order of ties across a bin boundary changes the sums: make it the input order.
        lo = np.searchsorted(ordered, ordered[s], side="left")
        hi = np.searchsorted(ordered, ordered[s], side="right")
        if hi - lo > 1:
            order[lo:hi] = np.sort(order[lo:hi])
    return BinSums(
        sizes.astype(np.float64),
        np.add.reduceat(conf[order], starts),
        np.add.reduceat(hits[order], starts),
        float(n),
    )
