"""Paired comparisons of two models on the same samples: a permutation test and effect sizes.

* :func:`paired_permutation_test`: sign-flip permutation test of the mean paired difference
  (exact over all ``2**n`` sign vectors when that is at most ``n_resamples``).
* :func:`rank_biserial`: the matched-pairs rank-biserial correlation (Kerby 2014), the effect
  size that goes with the Wilcoxon signed-rank test.
* :func:`compare_models`: both tests (Wilcoxon from :mod:`medibench.stats`), the mean
  difference with its bootstrap CI and the rank-biserial, for every pair of models.

Pairs are sample ids with a finite value for both models; a missing value is never a 0.

Example:
    >>> res = paired_permutation_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    >>> res["pvalue"], res["exact"]
    (0.25, True)
    >>> rank_biserial([1.0, 2.0, 3.0], [0.0, 3.0, 0.0])  # d = 1, -1, 3: (4.5 - 1.5) / 6
    0.5
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import rankdata

from medibench.stats._bootstrap import bootstrap_ci, paired_wilcoxon

__all__ = ["compare_models", "paired_permutation_test", "paired_values", "rank_biserial"]

_CHUNK = 512  # sign vectors per block: bounds memory at _CHUNK x n


def paired_permutation_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int = 10_000,
    seed: int = 42,
) -> dict[str, Any]:
    """Two-sided sign-flip permutation test of ``mean(a - b) == 0``.

    Under the null each difference ``d_i = a_i - b_i`` is as likely to have either sign. The
    statistic is ``|sum(s_i d_i)|``; the p-value is the fraction of sign vectors ``s`` whose
    statistic is at least the observed one. When ``2**n <= n_resamples`` every sign vector is
    enumerated (``exact=True``, the observed one included); otherwise ``n_resamples`` random
    vectors (``numpy.random.default_rng(seed)``) give ``p = (1 + hits) / (1 + n_resamples)``.

    Returns:
        ``{"statistic": mean difference, "pvalue", "n", "exact", "n_resamples"}``.

    Raises:
        ValueError: lengths differ, no pairs, a non-finite value, ``n_resamples < 1``.
    """
    d = _differences(a, b, "paired_permutation_test")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    n = d.size
    observed = abs(float(d.sum()))
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))  # float sums of the same terms in any order
    if n <= 30 and 2**n <= n_resamples:
        hits = 0
        for signs in itertools.product((1.0, -1.0), repeat=n):
            hits += int(abs(float(np.dot(signs, d))) >= observed - tol)
        return {
            "statistic": float(d.mean()),
            "pvalue": hits / 2**n,
            "n": n,
            "exact": True,
            "n_resamples": 2**n,
        }
    rng = np.random.default_rng(seed)
    hits = 0
    total = d.sum()
    for start in range(0, n_resamples, _CHUNK):
        m = min(_CHUNK, n_resamples - start)
        flips = rng.integers(0, 2, size=(m, n), dtype=np.int8).astype(np.float64)
        # sum(s d) with s = 1 - 2 flip: the total minus twice the flipped part.
        stats = np.abs(total - 2.0 * (flips @ d))
        hits += int(np.count_nonzero(stats >= observed - tol))
    return {
        "statistic": float(d.mean()),
        "pvalue": (1 + hits) / (1 + n_resamples),
        "n": n,
        "exact": False,
        "n_resamples": n_resamples,
    }


def rank_biserial(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Matched-pairs rank-biserial correlation of ``a - b``, in [-1, 1].

    ``r = (R+ - R-) / (R+ + R-)`` where ``R+`` (``R-``) is the sum of the ranks of ``|d_i|``
    (average ranks for ties) over the positive (negative) differences; zero differences are
    dropped, as the Wilcoxon test drops them. ``None`` when every difference is zero.
    """
    d = _differences(a, b, "rank_biserial")
    d = d[d != 0]
    if d.size == 0:
        return None
    ranks = rankdata(np.abs(d))
    plus, minus = ranks[d > 0].sum(), ranks[d < 0].sum()
    return float((plus - minus) / (plus + minus))


def paired_values(
    a: Mapping[str, float | None], b: Mapping[str, float | None]
) -> tuple[list[str], list[float], list[float]]:
    """The sample ids with a finite value in both mappings (sorted) and the two value lists."""
    ids = [sid for sid in sorted(set(a) & set(b)) if _finite(a[sid]) and _finite(b[sid])]
    return ids, [float(a[s]) for s in ids], [float(b[s]) for s in ids]  # type: ignore[arg-type]


def compare_models(
    values: Mapping[str, Mapping[str, float | None]],
    *,
    metric: str,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
) -> list[dict[str, Any]]:
    """Every pair of models (``a`` before ``b`` in sorted order) compared on ``metric``.

    ``values`` maps a model to ``{sample_id: value}``. Each row: ``model_a``, ``model_b``,
    ``metric``, ``n`` (pairs), ``n_unpaired`` (ids with a value for only one model, or a
    non-finite one), ``mean_a``, ``mean_b``, ``mean_diff`` (a - b) with ``diff_ci_low`` and
    ``diff_ci_high`` (percentile bootstrap of the paired differences), ``rank_biserial``,
    ``wilcoxon_stat``, ``wilcoxon_p``, ``permutation_p``. A pair without any common value
    gives a row with ``n = 0`` and ``None`` statistics.
    """
    rows = []
    for ma, mb in itertools.combinations(sorted(values), 2):
        va, vb = values[ma], values[mb]
        ids, xa, xb = paired_values(va, vb)
        either = {s for s in set(va) | set(vb) if _finite(va.get(s)) or _finite(vb.get(s))}
        row: dict[str, Any] = {
            "model_a": ma,
            "model_b": mb,
            "metric": metric,
            "n": len(ids),
            "n_unpaired": len(either) - len(ids),
        }
        keys = (
            "mean_a",
            "mean_b",
            "mean_diff",
            "diff_ci_low",
            "diff_ci_high",
            "rank_biserial",
            "wilcoxon_stat",
            "wilcoxon_p",
            "permutation_p",
        )
        row.update(dict.fromkeys(keys))
        if ids:
            diffs = np.subtract(xa, xb)
            low, high = (  # one pair: no spread to resample (None, never [d, d])
                bootstrap_ci(diffs.tolist(), n_resamples=n_resamples, seed=seed, level=level)
                if len(ids) > 1
                else (None, None)
            )
            w = paired_wilcoxon(dict(zip(ids, xa, strict=True)), dict(zip(ids, xb, strict=True)))
            perm = paired_permutation_test(xa, xb, n_resamples=n_resamples, seed=seed)
            row.update(
                mean_a=math.fsum(xa) / len(xa),
                mean_b=math.fsum(xb) / len(xb),
                mean_diff=float(diffs.mean()),
                diff_ci_low=low,
                diff_ci_high=high,
                rank_biserial=rank_biserial(xa, xb),
                wilcoxon_stat=w["statistic"],
                wilcoxon_p=w["pvalue"],
                permutation_p=perm["pvalue"],
            )
        rows.append(row)
    return rows


def _differences(a: Sequence[float], b: Sequence[float], who: str) -> np.ndarray:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"{who}: a and b must be 1-D and of the same length")
    if x.size == 0:
        raise ValueError(f"{who}: no pairs")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"{who}: values must be finite (drop missing pairs first)")
    return x - y


def _finite(v: Any) -> bool:
    return v is not None and math.isfinite(v)
