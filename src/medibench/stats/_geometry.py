"""Statistics of representations: how well a distance separates two kinds of points (AUROC) and
how much a set of representations changed (linear CKA), each with a percentile bootstrap CI.

* :func:`auroc`: ``P(positive > negative) + P(tie) / 2`` over every (positive, negative) pair,
  the area under the ROC curve (``sklearn.metrics.roc_auc_score`` with the positives labelled 1).
* :func:`auroc_ci`: its percentile bootstrap interval, resampling the positives and the negatives
  separately (each class keeps its size).
* :func:`linear_cka`: linear centred kernel alignment of two representations of the same ``n``
  items (Kornblith et al., 2019, "Similarity of Neural Network Representations Revisited",
  eq. 5 with linear kernels).
* :func:`linear_cka_ci`: its percentile bootstrap interval, resampling the items (rows).

Example:
    >>> auroc([0.9, 0.8, 0.4], [0.5, 0.1])
    0.8333333333333334
    >>> import numpy as np
    >>> x = np.arange(12.0).reshape(4, 3) ** 2
    >>> round(linear_cka(x, 2 * x + 1), 12)
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from medibench.stats._bootstrap import (
    BOOTSTRAP_MAX_ENTRIES,
    _index_chunks,
    _quantiles,
    _rng,
    percentile_interval,
)

__all__ = ["auroc", "auroc_ci", "linear_cka", "linear_cka_ci"]

#: the most Gram-matrix entries of resamples :func:`linear_cka_ci` holds at once (16 MB each)
_GRAM_ENTRIES = 2_000_000


def auroc(positive: Sequence[float] | np.ndarray, negative: Sequence[float] | np.ndarray) -> float:
    """The area under the ROC curve of a score that should be higher for ``positive`` items:
    the fraction of (positive, negative) pairs where the positive scores higher, a tie counting
    one half. 1: every positive above every negative; 0.5: no separation.

    Raises:
        ValueError: an empty side, or a value that is not finite.
    """
    pos, neg = _scores(positive, "positive"), _scores(negative, "negative")
    return float(_pair_wins(pos, neg).mean())


def auroc_ci(
    positive: Sequence[float] | np.ndarray,
    negative: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`auroc`, stratified: ``rng = default_rng(seed)``;
    ``i = rng.integers(0, n_pos, size=(n_resamples, n_pos))``, then ``j = rng.integers(0, n_neg,
    size=(n_resamples, n_neg))``; resample ``r``'s AUROC is that of ``positive[i[r]]`` against
    ``negative[j[r]]``; the interval is ``numpy.percentile`` at ``[50 (1 - level),
    50 (1 + level)]``.

    Raises:
        ValueError: as :func:`auroc`; fewer than two values on a side (nothing to resample:
            report ``n`` instead, as :func:`interval_text` does); bad settings.
    """
    pos, neg = _scores(positive, "positive"), _scores(negative, "negative")
    if min(pos.size, neg.size) < 2:
        raise ValueError(f"auroc_ci: {pos.size} positive and {neg.size} negative value(s); a "
                         "bootstrap needs at least two on each side")  # fmt: skip
    _quantiles(level)
    rng = _rng(seed, n_resamples)
    i = rng.integers(0, pos.size, size=(n_resamples, pos.size))
    j = rng.integers(0, neg.size, size=(n_resamples, neg.size))
    wins = _pair_wins(pos, neg)
    # a resample's AUROC: its multiplicities of each positive and negative, weighting the pairs
    wi, wj = _multiplicities(i, pos.size), _multiplicities(j, neg.size)
    stats = np.einsum("ra,ab,rb->r", wi, wins, wj) / (pos.size * neg.size)
    return percentile_interval(stats, level)


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of ``x`` (n, p) and ``y`` (n, q), two representations of the same ``n`` items
    (row ``i`` of each is item ``i``): with each column centred,
    ``||y^T x||_F^2 / (||x^T x||_F ||y^T y||_F)``. 1 when ``y`` is ``x`` up to an orthogonal
    transform, an isotropic scale and a shift; it ignores nothing else.

    Raises:
        ValueError: not 2-D, different numbers of rows, fewer than two rows, a value that is not
            finite, or a representation that is constant over the items (no variance: CKA is
            undefined).
    """
    return _cka_or_nan(*_grams(x, y))


def linear_cka_ci(
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    max_entries: int = BOOTSTRAP_MAX_ENTRIES,
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`linear_cka`, resampling the items: ``rng =
    default_rng(seed)``; ``idx = rng.integers(0, n, size=(n_resamples, n))`` (drawn
    ``max_entries`` at a time, as :func:`bootstrap_ci` draws them); resample ``r``'s CKA is that
    of ``x[idx[r]]`` and ``y[idx[r]]`` (a resample with no variance on a side is left out).

    Raises:
        ValueError: as :func:`linear_cka`; every resample without variance; bad settings.
    """
    gx, gy = _grams(x, y)
    _quantiles(level)
    n = gx.shape[0]
    stats = []
    for chunk in _index_chunks(_rng(seed, n_resamples), n, n_resamples, max_entries):
        pieces = chunk.size * n // min(max_entries, _GRAM_ENTRIES) + 1
        for rows in np.array_split(chunk, pieces):
            pick = (rows[:, :, None], rows[:, None, :])  # each resample's Gram matrices
            stats.append(_cka_rows(gx[pick], gy[pick]))
    values = np.concatenate(stats)
    values = values[~np.isnan(values)]
    if not values.size:
        raise ValueError("linear_cka_ci: every resample is constant on one side")
    return percentile_interval(values, level)


# -- helpers ----------------------------------------------------------------------------------


def _scores(values: Sequence[float] | np.ndarray, side: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ValueError(f"auroc: no {side} value")
    if not np.isfinite(arr).all():
        raise ValueError(f"auroc: a {side} value is not finite")
    return arr


def _multiplicities(idx: np.ndarray, n: int) -> np.ndarray:
    """(resamples, n): how many times each item is drawn in each resample."""
    counts = np.zeros((idx.shape[0], n))
    np.add.at(counts, (np.arange(idx.shape[0])[:, None], idx), 1.0)
    return counts


def _pair_wins(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """(n_pos, n_neg): 1 where the positive scores higher, 1/2 on a tie, else 0."""
    diff = pos[:, None] - neg[None, :]
    return (diff > 0) + 0.5 * (diff == 0)


def _grams(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The linear Gram matrices (n, n) of ``x`` and ``y`` after the checks of :func:`linear_cka`."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"linear_cka: expected two 2-D arrays (items x features), got shapes "
                         f"{a.shape} and {b.shape}")  # fmt: skip
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"linear_cka: {a.shape[0]} and {b.shape[0]} rows; row i of each must be "
                         "the same item")  # fmt: skip
    if a.shape[0] < 2:
        raise ValueError("linear_cka: needs at least two items (rows)")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("linear_cka: a value is not finite")
    gx, gy = a @ a.T, b @ b.T
    if np.isnan(_cka_or_nan(gx, gy)):
        raise ValueError("linear_cka: a representation is constant over the items (no variance)")
    return gx, gy


def _cka_or_nan(gx: np.ndarray, gy: np.ndarray) -> float:
    """CKA from Gram matrices (n, n): ``<HKH, HLH> / (||HKH|| ||HLH||)`` (H centres; with
    linear kernels this is the column-centred formula); NaN when a side has no variance."""
    return float(_cka_rows(gx[None], gy[None])[0])


def _cka_rows(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """:func:`_cka_or_nan` of each pair of a stack of Gram matrices (b, n, n)."""
    kx, ky = _centred(gx), _centred(gy)
    nx, ny = np.linalg.norm(kx, axis=(1, 2)), np.linalg.norm(ky, axis=(1, 2))
    scale = np.maximum(np.maximum(np.abs(gx).max(axis=(1, 2)), np.abs(gy).max(axis=(1, 2))), 1.0)
    flat = (nx <= 1e-12 * scale) | (ny <= 1e-12 * scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.sum(kx * ky, axis=(1, 2)) / (nx * ny)
    return np.where(flat, np.nan, out)


def _centred(gram: np.ndarray) -> np.ndarray:
    """Double-centred Gram matrices (b, n, n)."""
    return (gram - gram.mean(axis=1, keepdims=True) - gram.mean(axis=2, keepdims=True)
            + gram.mean(axis=(1, 2), keepdims=True))  # fmt: skip
