"""Correlations across models with p-values and bootstrap intervals, and a linear fit.

* :func:`correlation`: Spearman rho, Kendall tau-b or Pearson r of paired values with a p-value:
  ``pvalue="auto"`` gives scipy's default test (Spearman and Pearson: the t distribution with
  ``n - 2`` degrees of freedom; Kendall: its exact distribution without ties and ``n <= 33``,
  else the normal approximation), ``"exact"`` the exact permutation distribution (every pairing
  enumerated; Kendall without ties: scipy's exact distribution, any ``n``), ``"permutation"`` a
  seeded random permutation test (``scipy.stats.permutation_test``, pairings).
* :func:`correlation_ci`: the percentile bootstrap interval of a correlation, resampling the
  models, or the samples within each model (the model means recomputed on each resample).
* :func:`linear_fit`: least squares ``y = intercept + slope x`` (``scipy.stats.linregress``):
  R^2, the slope's two-sided t-test p-value, the standard errors, and the confidence band of
  the fitted line.

Example:
    >>> r = correlation([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], method="spearman", pvalue="exact")
    >>> round(r.statistic, 3), round(r.pvalue, 4), r.pvalue_method
    (0.8, 0.1333, 'exact')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from medibench.stats._agreement import _pearson_rows
from medibench.stats._bootstrap import (
    BOOTSTRAP_MAX_ENTRIES,
    _index_chunks,
    _quantiles,
    _rng,
    percentile_interval,
)

__all__ = [
    "EXACT_MAX_N",
    "Correlation",
    "CorrelationMethod",
    "LinearFit",
    "PValueMethod",
    "correlation",
    "correlation_ci",
    "correlation_rows",
    "linear_fit",
]

CorrelationMethod = Literal["spearman", "kendall", "pearson"]
PValueMethod = Literal["auto", "exact", "permutation"]
#: The largest ``n`` whose ``n!`` pairings an exact permutation p-value enumerates (362,880).
EXACT_MAX_N = 9
_METHODS = ("spearman", "kendall", "pearson")
_BATCH = 20_000  # permutations per vectorised call: bounds memory at _BATCH x n


@dataclass(frozen=True)
class Correlation:
    """A correlation of ``n`` pairs, its two-sided p-value and (when asked) its interval.

    ``pvalue_method``: ``"t"`` (t distribution, ``n - 2`` df), ``"normal"`` (Kendall's normal
    approximation), ``"exact"`` (the exact null distribution) or ``"permutation"``
    (``n_permutations`` random pairings, ``p = (1 + hits) / (1 + n_permutations)``).
    ``ci_resampling``: ``"models"`` or ``"samples"`` (within models); ``n_undefined`` resamples
    on which the statistic was undefined (a constant side) are left out of the interval.
    """

    method: str
    statistic: float
    pvalue: float
    pvalue_method: str
    n: int
    n_permutations: int | None = None
    ci_low: float = math.nan
    ci_high: float = math.nan
    ci_level: float | None = None
    ci_resampling: str | None = None
    n_resamples: int | None = None
    n_undefined: int = 0


@dataclass(frozen=True)
class LinearFit:
    """``y = intercept + slope x`` by least squares over ``n`` points; ``pvalue`` tests
    ``slope == 0`` (two-sided t-test, ``n - 2`` df), as ``scipy.stats.linregress``."""

    slope: float
    intercept: float
    rvalue: float
    r_squared: float
    pvalue: float
    stderr: float
    intercept_stderr: float
    n: int
    x_mean: float
    sxx: float
    residual_std: float

    def band(self, x: Sequence[float] | np.ndarray, level: float = 0.95) -> np.ndarray:
        """The confidence band of the fitted line at ``x``: an ``(len(x), 2)`` array of
        ``yhat -+ t_{(1+level)/2, n-2} s sqrt(1/n + (x - mean x)^2 / Sxx)``, ``s`` the residual
        standard deviation."""
        x = np.asarray(x, dtype=np.float64)
        _quantiles(level)  # validates level
        t = stats.t.ppf((1 + level) / 2, self.n - 2)
        half = t * self.residual_std * np.sqrt(1 / self.n + (x - self.x_mean) ** 2 / self.sxx)
        yhat = self.intercept + self.slope * x
        return np.column_stack([yhat - half, yhat + half])


def correlation(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    method: CorrelationMethod = "spearman",
    pvalue: PValueMethod = "auto",
    n_permutations: int = 9999,
    seed: int = 42,
) -> Correlation:
    """``method``'s coefficient of paired values and its two-sided p-value (module docstring).

    With ``pvalue="permutation"`` and ``n! <= n_permutations`` every pairing is enumerated and
    the p-value is exact (``pvalue_method="exact"``), as ``scipy.stats.permutation_test`` does.
    The random pairings are ``scipy.stats.permutation_test((x,), ..., permutation_type=
    "pairings", n_resamples=n_permutations, rng=numpy.random.default_rng(seed))``'s.

    Raises:
        ValueError: lengths differ, fewer than 3 pairs, a missing or infinite value, a constant
            side (the coefficient is undefined), an unknown method, ``pvalue="exact"`` with
            ``n > EXACT_MAX_N`` (and ties, for Kendall).
    """
    x, y = _pairs(x, y, "correlation")
    _check_method(method)
    if pvalue not in ("auto", "exact", "permutation"):
        raise ValueError(f"pvalue must be 'auto', 'exact' or 'permutation', got {pvalue!r}")
    n = x.size
    if method == "kendall":
        res = stats.kendalltau(x, y)
    elif method == "spearman":
        res = stats.spearmanr(x, y)
    else:
        res = stats.pearsonr(x, y)
    value = float(res.statistic)
    ties = np.unique(x).size < n or np.unique(y).size < n
    if pvalue == "auto":
        if method != "kendall":
            return Correlation(method, value, float(res.pvalue), "t", n)
        tot = n * (n - 1) // 2
        dis = round(tot * (1 - value) / 2) if not ties else 0
        exact = not ties and (n <= 33 or min(dis, tot - dis) <= 1)  # scipy's own rule
        return Correlation(method, value, float(res.pvalue), "exact" if exact else "normal", n)
    if pvalue == "exact" and method == "kendall" and not ties:
        p = float(stats.kendalltau(x, y, method="exact").pvalue)
        return Correlation(method, value, p, "exact", n)
    if pvalue == "exact" and n > EXACT_MAX_N:
        raise ValueError(
            f"an exact {method} p-value enumerates all n! pairings: n = {n} is more than "
            f"{EXACT_MAX_N}; use a permutation p-value"
        )
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations!r}")
    wanted = math.factorial(n) if pvalue == "exact" else n_permutations
    perm = stats.permutation_test(
        (_rank(x) if method == "spearman" else x,),
        _permuted_statistic(method, y),
        permutation_type="pairings",
        vectorized=True,
        n_resamples=wanted,
        batch=max(1, _BATCH),
        rng=np.random.default_rng(seed),
    )
    exact = wanted >= math.factorial(n)
    used = math.factorial(n) if exact else wanted
    return Correlation(
        method, value, float(perm.pvalue), "exact" if exact else "permutation", n, used
    )


def correlation_ci(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    method: CorrelationMethod = "spearman",
    within: Sequence[tuple[np.ndarray | None, np.ndarray | None]] | None = None,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    max_entries: int = BOOTSTRAP_MAX_ENTRIES,
) -> tuple[float, float, int]:
    """Percentile bootstrap interval of ``method``'s coefficient of the model values ``x, y``.

    ``within=None`` resamples the models: ``default_rng(seed).integers(0, n, size=
    (n_resamples, n))``, as :func:`medibench.stats.bootstrap_ci` draws them (and as
    ``scipy.stats.bootstrap((x, y), paired=True, method="percentile")``).

    ``within`` resamples the samples within each model and keeps the models: ``within[i] =
    (xs_i, ys_i)``, model ``i``'s per-sample values of each side, rows aligned by sample (``nan``
    where a side has no value for that sample), or ``None`` for a side known only as the model
    value (``x[i]``), which stays fixed. For each model in order, from one generator, ``idx =
    rng.integers(0, m_i, size=(n_resamples, m_i))`` over its ``m_i`` rows, drawn jointly for
    both sides; a side's resampled model value is the mean of its drawn values (``nan`` when
    none has a value).

    Returns:
        ``(low, high, n_undefined)``: the percentiles over the resamples on which the statistic
        is defined, and how many were not (a constant side); ``nan`` bounds when none is.

    Raises:
        ValueError: as :func:`correlation`; ``within`` of another length than the models, rows
            of different lengths, no per-sample values at all.
    """
    x, y = _pairs(x, y, "correlation_ci")
    _check_method(method)
    _quantiles(level)
    rng = _rng(seed, n_resamples)
    if within is None:
        boot = np.concatenate(
            [
                correlation_rows(x[idx], y[idx], method=method)
                for idx in _index_chunks(rng, x.size, n_resamples, max_entries)
            ]
        )
    else:
        bx, by = _resampled_means(x, y, within, rng, n_resamples, max_entries)
        boot = correlation_rows(bx, by, method=method)
    defined = boot[np.isfinite(boot)]
    if defined.size == 0:
        return math.nan, math.nan, int(boot.size)
    low, high = percentile_interval(defined, level)
    return low, high, int(boot.size - defined.size)


def correlation_rows(x: np.ndarray, y: np.ndarray, *, method: CorrelationMethod) -> np.ndarray:
    """``method``'s coefficient of each row pair of two ``(r, n)`` arrays (``nan`` for a row
    with a constant side or a ``nan``)."""
    _check_method(method)
    x, y = np.atleast_2d(np.asarray(x, np.float64)), np.atleast_2d(np.asarray(y, np.float64))
    bad = ~(np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1))
    if method == "pearson":
        out = _pearson_rows(x, y)
    elif method == "spearman":
        out = _pearson_rows(_rank(x), _rank(y))
    else:
        out = _kendall_rows(x, y)
    return np.where(bad, np.nan, out)


def linear_fit(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> LinearFit:
    """Least-squares line of ``y`` on ``x`` (``scipy.stats.linregress``), ``r_squared =
    rvalue**2``.

    Raises:
        ValueError: fewer than 3 points, a missing value, a constant ``x``.
    """
    x, y = _pairs(x, y, "linear_fit", check_y=False)
    res = stats.linregress(x, y)
    n = x.size
    resid = y - (res.intercept + res.slope * x)
    return LinearFit(
        slope=float(res.slope),
        intercept=float(res.intercept),
        rvalue=float(res.rvalue),
        r_squared=float(res.rvalue) ** 2,
        pvalue=float(res.pvalue),
        stderr=float(res.stderr),
        intercept_stderr=float(res.intercept_stderr),
        n=n,
        x_mean=float(x.mean()),
        sxx=float(((x - x.mean()) ** 2).sum()),
        residual_std=float(np.sqrt((resid**2).sum() / (n - 2))),
    )


# --- helpers ---------------------------------------------------------------------------------


def _pairs(x, y, who: str, *, check_y: bool = True) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1 or x.size != y.size:
        raise ValueError(f"{who}: x and y must be 1-D of one length, got {x.shape} and {y.shape}")
    if x.size < 3:
        raise ValueError(f"{who}: needs at least 3 pairs, got {x.size}")
    for name, v in (("x", x), ("y", y)):
        if not np.isfinite(v).all():
            raise ValueError(f"{who}: {name} has a missing (NaN) or infinite value")
        if np.ptp(v) == 0 and (name == "x" or check_y):
            raise ValueError(f"{who}: {name} is constant, so the coefficient is undefined")
    return x, y


def _check_method(method: str) -> None:
    if method not in _METHODS:
        raise ValueError(f"method must be one of {', '.join(_METHODS)}, got {method!r}")


def _rank(a: np.ndarray) -> np.ndarray:
    return stats.rankdata(a, axis=-1)


def _kendall_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall tau-b of each row pair: ``sum s_x s_y / sqrt(sum s_x^2 sum s_y^2)`` over the
    pairs ``i < j``, ``s = sign(a_i - a_j)`` (a tied pair counts 0)."""
    i, j = np.triu_indices(x.shape[1], k=1)
    sx, sy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    den = np.sqrt((sx**2).sum(axis=1) * (sy**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (sx * sy).sum(axis=1) / den, np.nan)


def _permuted_statistic(method: str, y: np.ndarray):
    """The vectorised statistic ``permutation_test`` calls on permuted ``x`` (ranks, for
    Spearman: a permutation of the ranks is the ranks of the permutation)."""
    fixed = _rank(y) if method == "spearman" else y

    def statistic(xp: np.ndarray, axis: int = -1) -> np.ndarray:
        xp = np.moveaxis(np.asarray(xp, np.float64), axis, -1)
        rows = xp.reshape(-1, xp.shape[-1])
        ys = np.broadcast_to(fixed, rows.shape)
        fn = _kendall_rows if method == "kendall" else _pearson_rows
        return fn(rows, ys).reshape(xp.shape[:-1])

    return statistic


def _resampled_means(
    x: np.ndarray,
    y: np.ndarray,
    within: Sequence[tuple[np.ndarray | None, np.ndarray | None]],
    rng: np.random.Generator,
    n_resamples: int,
    max_entries: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``(n_resamples, n_models)`` resampled model values of each side (see
    :func:`correlation_ci`)."""
    if len(within) != x.size:
        raise ValueError(f"within has {len(within)} models, the values {x.size}")
    bx = np.repeat(x[None, :], n_resamples, axis=0)
    by = np.repeat(y[None, :], n_resamples, axis=0)
    resampled = False
    for i, (xs, ys) in enumerate(within):
        sides = [(bx, xs), (by, ys)]
        present = [(b, np.asarray(v, np.float64)) for b, v in sides if v is not None]
        if not present:
            continue
        m = {v.size for _, v in present}
        if len(m) > 1:
            raise ValueError(f"within[{i}]: the sides' sample rows differ in length {sorted(m)}")
        m_i = m.pop()
        if m_i == 0:
            raise ValueError(f"within[{i}]: no samples")
        resampled = True
        start = 0
        for idx in _index_chunks(rng, m_i, n_resamples, max_entries):
            for b, v in present:
                drawn = v[idx]
                count = np.isfinite(drawn).sum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    b[start : start + len(idx), i] = np.where(
                        count > 0, np.nansum(drawn, axis=1) / count, np.nan
                    )
            start += len(idx)
    if not resampled:
        raise ValueError("within: no model has per-sample values to resample")
    return bx, by
