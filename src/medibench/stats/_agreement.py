"""Agreement coefficients between two raters' paired values, with bootstrap intervals.

* :func:`pearson`, :func:`spearman`, :func:`kendall` (tau-b), via ``scipy.stats``; ``nan`` when
  a side is constant or there are fewer than two pairs.
* :func:`icc_2_1`: ICC(2,1), two-way random effects, absolute agreement, single rater (Shrout &
  Fleiss 1979; McGraw & Wong's ICC(A,1)). For ``n`` items rated by ``k`` raters, with row (item)
  means, column (rater) means and grand mean ``m``::

      MSR = k * sum_i (row_i - m)^2 / (n - 1)                 between items
      MSC = n * sum_j (col_j - m)^2 / (k - 1)                 between raters
      MSE = (SST - SSR - SSC) / ((n - 1)(k - 1))             residual
      ICC(2,1) = (MSR - MSE) / (MSR + (k - 1) MSE + k (MSC - MSE) / n)

* :func:`paired_estimate`: a statistic of paired values and its percentile bootstrap interval
  (pairs resampled; vectorised for Pearson, Spearman and ICC).

Example:
    >>> icc_2_1([[1, 2], [2, 3], [3, 4]])  # rater 2 is always 1 higher
    0.6666666666666666
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from medibench.stats._bootstrap import bootstrap_ci

__all__ = ["Estimate", "icc_2_1", "icc_or_nan", "kendall", "paired_estimate", "pearson", "spearman"]


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Pearson r (``nan`` when either side is constant or n < 2)."""
    return _safe(lambda: stats.pearsonr(x, y)[0], x, y)


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman rho with average ranks for ties (``nan`` when undefined)."""
    return _safe(lambda: stats.spearmanr(x, y)[0], x, y)


def kendall(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Kendall tau-b (``nan`` when undefined)."""
    return _safe(lambda: stats.kendalltau(x, y)[0], x, y)


def icc_2_1(ratings: Sequence[Sequence[float]] | np.ndarray) -> float:
    """ICC(2,1) of an ``(n items, k raters)`` table (formula in the module docstring).

    Raises:
        ValueError: fewer than 2 items or 2 raters, or a missing value.
    """
    y = np.asarray(ratings, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2:
        raise ValueError(f"icc_2_1 needs an (n >= 2, k >= 2) table, got shape {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError("icc_2_1: the table has missing or infinite values")
    n, k = y.shape
    m = y.mean()
    ssr = k * ((y.mean(axis=1) - m) ** 2).sum()
    ssc = n * ((y.mean(axis=0) - m) ** 2).sum()
    sse = ((y - m) ** 2).sum() - ssr - ssc
    msr, msc, mse = ssr / (n - 1), ssc / (k - 1), sse / ((n - 1) * (k - 1))
    denom = msr + (k - 1) * mse + k * (msc - mse) / n
    return float((msr - mse) / denom) if denom != 0 else math.nan


@dataclass(frozen=True)
class Estimate:
    """A statistic, its bootstrap interval and (for a correlation) its two-sided p-value."""

    value: float
    low: float
    high: float
    pvalue: float = math.nan

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "-"
        ci = "" if math.isnan(self.low) else f" [{self.low:.3f}, {self.high:.3f}]"
        return f"{self.value:.3f}{ci}"


def paired_estimate(
    fn: Callable[[np.ndarray, np.ndarray], float],
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
) -> Estimate:
    """``fn(x, y)`` and its percentile bootstrap interval over resampled pairs (``nan`` bounds
    with fewer than three pairs or an undefined value)."""
    value = fn(x, y) if len(x) >= 2 else math.nan
    if len(x) < 3 or math.isnan(value):
        return Estimate(value, math.nan, math.nan)
    batched = _BATCHED.get(fn)

    # bootstrap_ci resamples its values; resampling the indices resamples the pairs.
    def statistic(idx: np.ndarray, axis: int) -> np.ndarray:
        rows = idx.astype(np.intp)
        if batched is not None:
            return batched(x[rows], y[rows])
        return np.array([fn(x[row], y[row]) for row in rows])

    low, high = bootstrap_ci(
        np.arange(len(x)), n_resamples=n_resamples, seed=seed, level=level, statistic=statistic
    )
    return Estimate(value, low, high)


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of each row pair of two (r, n) arrays (nan for a constant row)."""
    xc, yc = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * yc).sum(axis=1) / den, np.nan)


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _pearson_rows(stats.rankdata(x, axis=1), stats.rankdata(y, axis=1))


def _icc_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ICC(2,1) of each row pair (k = 2 raters, n = row length), as :func:`icc_2_1`."""
    n = x.shape[1]
    m = (x.mean(axis=1) + y.mean(axis=1)) / 2
    row = (x + y) / 2
    ssr = 2 * ((row - m[:, None]) ** 2).sum(axis=1)
    ssc = n * ((x.mean(axis=1) - m) ** 2 + (y.mean(axis=1) - m) ** 2)
    sst = ((x - m[:, None]) ** 2).sum(axis=1) + ((y - m[:, None]) ** 2).sum(axis=1)
    msr, msc, mse = ssr / (n - 1), ssc, (sst - ssr - ssc) / (n - 1)
    den = msr + mse + 2 * (msc - mse) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den != 0, (msr - mse) / den, np.nan)


def icc_or_nan(x: np.ndarray, y: np.ndarray) -> float:
    """:func:`icc_2_1` of two raters' paired values (``nan`` with fewer than two pairs)."""
    return icc_2_1(np.column_stack([x, y])) if len(x) >= 2 else math.nan


def _safe(fn, x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) != len(y):
        raise ValueError(f"paired values differ in length: {len(x)} and {len(y)}")
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(fn())


_BATCHED: dict[Callable[..., float], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    pearson: _pearson_rows,
    spearman: _spearman_rows,
    icc_or_nan: _icc_rows,
}
