"""Statistics of score tables: bootstrap confidence intervals, paired tests, pass rates.

Pure functions on lists of numbers. A missing value (``None`` or NaN) is never a 0: each function
either refuses it (``missing="error"``, the default of the bootstrap helpers) or leaves it out and
counts it.

* :func:`bootstrap_ci`: percentile bootstrap of one statistic (MedGEN-Bench: 1,000 resamples,
  seed 42).
* :func:`hierarchical_bootstrap_ci` and :func:`macro_mean`: PaintBench's macro mean over a
  hierarchy of groups (tasks within categories) and its hierarchical bootstrap.
* :func:`paired_wilcoxon`: Wilcoxon signed-rank test of two models paired by sample id.
* :func:`pass_rate`: fraction of values on the good side of a threshold.

Example:
    >>> low, high = bootstrap_ci([0.1, 0.4, 0.35, 0.8], n_resamples=200, seed=0)
    >>> low <= 0.4125 <= high
    True
    >>> pass_rate([30.0, 25.0, None], 28.0)
    PassRate(rate=0.5, passed=1, n=2, n_missing=1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

__all__ = [
    "BOOTSTRAP_MAX_ENTRIES",
    "PassRate",
    "bootstrap_ci",
    "bootstrap_indices",
    "interval_text",
    "percentile_interval",
    "hierarchical_bootstrap_ci",
    "macro_mean",
    "paired_wilcoxon",
    "pass_rate",
]

Missing = Literal["error", "skip"]
#: The most resample x sample indices a bootstrap draws at once (int64, 8 bytes each; the
#: resampled values take as much again): 2,000,000 is about 32 MB, so a report's intervals over
#: 100,000 samples take no more memory than over 2,000 (larger chunks are no faster). The
#: resamples are drawn in chunks of whole rows from one generator, so the intervals do not
#: depend on it; a row longer than it is drawn alone. Every bootstrap here takes
#: ``max_entries=`` to change it.
BOOTSTRAP_MAX_ENTRIES = 2_000_000


def interval_text(low: float | None, high: float | None, n: int | None = None,
                  fmt: str = ".3f") -> str:  # fmt: skip
    """How every table shows an interval: ``"[low, high]"``; ``"n=N"`` when it would rest on
    fewer than two values (one value has no spread to resample: a zero-width interval would
    claim a certainty there is none; the intervals here are ``None`` then); ``"-"`` without
    one."""
    if n is not None and n < 2:
        return f"n={n}"
    if low is None or high is None:
        return "-"
    return f"[{low:{fmt}}, {high:{fmt}}]"


class PassRate(NamedTuple):
    """``rate = passed / n`` over the ``n`` present values (``None`` when ``n == 0``);
    ``n_missing`` values (``None`` or NaN) were left out."""

    rate: float | None
    passed: int
    n: int
    n_missing: int


def bootstrap_ci(
    values: Sequence[float | None] | np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    statistic: Callable[..., Any] = np.mean,
    missing: Missing = "error",
    max_entries: int = BOOTSTRAP_MAX_ENTRIES,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``statistic(values)``.

    Exactly: ``rng = numpy.random.default_rng(seed)``; ``idx = rng.integers(0, n, size=
    (n_resamples, n))`` (row ``i`` is resample ``i``, drawn with replacement);
    ``stats = statistic(values[idx], axis=1)``; the interval is
    ``numpy.percentile(stats, [50 (1 - level), 50 (1 + level)])`` (linear interpolation).
    This equals ``scipy.stats.bootstrap(..., method="percentile", random_state=
    default_rng(seed))`` and MedGEN-Bench's ``bootstrap_ci`` (a loop of ``rng.choice(values,
    n)`` draws the same indices). The index matrix is drawn ``max_entries`` at a time
    (:func:`bootstrap_indices`: the same indices, in bounded memory), and ``statistic`` is
    called on each chunk of rows.

    Args:
        values: the per-sample values; ``inf`` is allowed (it is a value, not a missing one).
        n_resamples: number of bootstrap resamples (>= 1).
        seed: seed of the numpy ``Generator``.
        level: confidence level in (0, 1).
        statistic: a reduction that takes ``axis=`` (``np.mean``, ``np.median``, ...).
        missing: ``"error"``: a ``None`` or NaN raises ``ValueError``; ``"skip"``: they are left
            out (count them with :func:`pass_rate` or ``len``).

    Raises:
        ValueError: no values, a missing value with ``missing="error"``, bad settings.
    """
    arr = _present(values, missing, "bootstrap_ci")
    if arr.size == 0:
        raise ValueError("bootstrap_ci: no values to resample")
    q = _quantiles(level)
    chunks = bootstrap_indices(arr.size, n_resamples, seed, max_entries=max_entries)
    stats = np.concatenate(
        [np.asarray(statistic(arr[idx], axis=1), dtype=np.float64) for idx in chunks]
    )
    low, high = np.percentile(stats, q)
    return float(low), float(high)


def bootstrap_indices(
    n: int, n_resamples: int, seed: int, *, max_entries: int = BOOTSTRAP_MAX_ENTRIES
) -> Iterator[np.ndarray]:
    """The rows of :func:`bootstrap_ci`'s index matrix (``default_rng(seed).integers(0, n,
    size=(n_resamples, n))``), in chunks of at most ``max_entries`` indices (at least one row):
    concatenated, exactly that matrix (numpy draws the rows one after another from one stream).
    """
    return _index_chunks(_rng(seed, n_resamples), n, n_resamples, max_entries)


def percentile_interval(stats: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval of bootstrap statistics: ``numpy.percentile`` at
    ``[50 (1 - level), 50 (1 + level)]``."""
    low, high = np.percentile(np.asarray(stats, dtype=np.float64), _quantiles(level))
    return float(low), float(high)


def macro_mean(
    values: Sequence[float | None],
    groups: Sequence[tuple[Hashable, ...] | Hashable],
    *,
    missing: Missing = "error",
) -> float:
    """Mean over the first key of the means over the next key ... of the leaf means.

    ``groups[i]`` is the key tuple of ``values[i]`` (``(category, task)`` for PaintBench): the
    result is the mean over categories of the mean over their tasks of the task's mean value.
    A group whose values are all skipped is dropped. A plain key is a 1-tuple.
    """
    leaves = _leaves(values, groups, missing, "macro_mean")
    return float(_macro(leaves, {key: float(np.mean(v)) for key, v in leaves.items()}))


def hierarchical_bootstrap_ci(
    values: Sequence[float | None],
    groups: Sequence[tuple[Hashable, ...] | Hashable],
    *,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    missing: Missing = "error",
    max_entries: int = BOOTSTRAP_MAX_ENTRIES,
) -> tuple[float, float]:
    """Percentile bootstrap CI of :func:`macro_mean`, resampling items within each leaf group.

    As PaintBench's ``stats.py`` does for its benchmark row: the groups (categories, tasks) are
    fixed, since the benchmark *is* those tasks; each bootstrap round resamples the items of
    every leaf group with replacement, then takes the macro mean. Exactly: ``rng =
    default_rng(seed)``; for each leaf in sorted key order (categories sorted, tasks sorted within
    them, as PaintBench orders them), ``idx = rng.integers(0, n_leaf, size=(n_resamples,
    n_leaf))`` and the leaf's resampled means; then the macro mean of each round and
    ``numpy.percentile`` at ``[50 (1 - level), 50 (1 + level)]``. With PaintBench's settings
    (``n_resamples=10000, seed=0``) this reproduces its ``ci95_*`` fields. Each leaf's index
    matrix is drawn ``max_entries`` at a time, as in :func:`bootstrap_ci`.

    Raises:
        ValueError: lengths differ, keys of different depths, no values, a missing value with
            ``missing="error"``, bad settings.
    """
    leaves = _leaves(values, groups, missing, "hierarchical_bootstrap_ci")
    q = _quantiles(level)
    rng = _rng(seed, n_resamples)
    boot = {}
    for key in sorted(leaves, key=_order):  # one stream: each leaf's rows after the last's
        arr = leaves[key]
        chunks = _index_chunks(rng, arr.size, n_resamples, max_entries)
        boot[key] = np.concatenate([arr[idx].mean(axis=1) for idx in chunks])
    low, high = np.percentile(_macro(leaves, boot), q)
    return float(low), float(high)


def paired_wilcoxon(
    a: Mapping[str, float | None],
    b: Mapping[str, float | None],
    *,
    alternative: Literal["two-sided", "greater", "less"] = "two-sided",
) -> dict[str, Any]:
    """Wilcoxon signed-rank test of ``a`` against ``b``, paired by sample id.

    Pairs are the ids present in both mappings with a finite value in both. Zero differences are
    dropped before ranking (``zero_method="wilcox"``, scipy's default and MedGEN-Bench's choice);
    when every difference is zero the result is ``statistic 0, pvalue 1`` (as MedGEN-Bench
    reports it) instead of scipy's undefined value. ``alternative="greater"`` tests whether
    ``a - b`` tends to be positive.

    Returns:
        ``{"statistic", "pvalue", "n", "n_dropped", "n_missing", "n_zero"}``: ``n`` pairs used,
        ``n_dropped`` ids present in only one mapping, ``n_missing`` ids in both whose value is
        ``None``, NaN or infinite in either, ``n_zero`` pairs with a zero difference.

    Raises:
        ValueError: no id has a finite value in both mappings; an unknown ``alternative``.
    """
    from scipy.stats import wilcoxon

    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(
            f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}"
        )
    common = sorted(set(a) & set(b), key=str)
    n_dropped = len(set(a) ^ set(b))
    xs: list[float] = []
    ys: list[float] = []
    for sid in common:
        va, vb = _number(a[sid]), _number(b[sid])
        if va is not None and vb is not None and math.isfinite(va) and math.isfinite(vb):
            xs.append(va)
            ys.append(vb)
    n_missing = len(common) - len(xs)
    if not xs:
        raise ValueError(
            f"paired_wilcoxon: no sample id has a finite value in both ({len(common)} common "
            f"ids, {n_missing} with a missing value, {n_dropped} in only one)"
        )
    x, y = np.array(xs), np.array(ys)
    n_zero = int(np.count_nonzero(x == y))
    if n_zero == x.size:
        statistic, pvalue = 0.0, 1.0
    elif x.size <= _SIGN_FLIPS_UP_TO and (n_zero or _has_ties(np.abs(x - y)[x != y])):
        # scipy's default here is an exact permutation test over all 2^n sign flips, which it
        # evaluates one flip at a time (about a second for n = 13); the same test, vectorised
        res = wilcoxon(x, y, zero_method="wilcox", alternative=alternative, method="asymptotic")
        statistic, pvalue = float(res.statistic), _sign_flip_pvalue(x - y, alternative)
    else:
        res = wilcoxon(x, y, zero_method="wilcox", alternative=alternative)
        statistic, pvalue = float(res.statistic), float(res.pvalue)
    return {
        "statistic": statistic,
        "pvalue": pvalue,
        "n": int(x.size),
        "n_dropped": n_dropped,
        "n_missing": n_missing,
        "n_zero": n_zero,
    }


#: scipy's ``wilcoxon(method="auto")`` runs an exact permutation test (every sign flip, its
#: ``PermutationMethod`` default of 9,999 resamples covering them) when the differences have
#: ties or zeros and there are at most this many pairs.
_SIGN_FLIPS_UP_TO = 13


def _has_ties(values: np.ndarray) -> bool:
    return bool(np.unique(values).size < values.size)


def _sign_flip_pvalue(d: np.ndarray, alternative: str) -> float:
    """The p-value of scipy's exact permutation Wilcoxon test (zeros dropped from the ranking):
    the signed-rank sum ``r_plus`` under each of the ``2^n`` sign flips of ``d``, counted against
    the observed one with scipy's relative tolerance (100 ulp) and no +1 adjustment. Ranks are
    multiples of 1/2 and the sums small integers or halves, exact in float64: the counts, and so
    the p-value, are scipy's bit for bit."""
    from scipy.stats import rankdata

    n = d.size
    nonzero = d != 0
    ranks = np.zeros(n)
    ranks[nonzero] = rankdata(np.abs(d[nonzero]))
    flips = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
    positive = np.where(flips, d < 0, d > 0)
    null = (positive * ranks).sum(axis=1)
    observed = float(ranks[d > 0].sum())
    gamma = abs(np.finfo(np.float64).eps * 100 * observed)
    less = np.count_nonzero(null <= observed + gamma) / float(2**n)
    greater = np.count_nonzero(null >= observed - gamma) / float(2**n)
    p = {"less": less, "greater": greater}.get(alternative, min(less, greater) * 2)
    return float(min(max(p, 0.0), 1.0))


def pass_rate(
    values: Sequence[float | None], threshold: float, *, higher_is_better: bool = True
) -> PassRate:
    """Fraction of the present values with ``value >= threshold`` (``<=`` when lower is better).

    ``None`` and NaN are left out and counted in ``n_missing``, never counted as failures.
    """
    if not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    present = [v for v in (_number(x) for x in values) if v is not None and not math.isnan(v)]
    n_missing = len(values) - len(present)
    passed = sum(1 for v in present if (v >= threshold if higher_is_better else v <= threshold))
    rate = passed / len(present) if present else None
    return PassRate(rate=rate, passed=passed, n=len(present), n_missing=n_missing)


# --- helpers ---------------------------------------------------------------------------------


def _number(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"expected a number or None, got {v!r}")
    return float(v)


def _present(values: Sequence[float | None] | np.ndarray, missing: Missing, who: str) -> np.ndarray:
    if missing not in ("error", "skip"):
        raise ValueError(f"{who}: missing must be 'error' or 'skip', got {missing!r}")
    nums = [_number(v) for v in values]
    absent = sum(1 for v in nums if v is None or math.isnan(v))
    if absent and missing == "error":
        raise ValueError(
            f"{who}: {absent} of {len(nums)} values are missing (None or NaN); a missing value "
            "is not a 0: filter them or pass missing='skip'"
        )
    return np.array([v for v in nums if v is not None and not math.isnan(v)], dtype=np.float64)


def _quantiles(level: float) -> list[float]:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    # Rounded so 0.95 gives exactly [2.5, 97.5], the percentiles everyone else uses.
    return [round(50.0 * (1.0 - level), 10), round(50.0 * (1.0 + level), 10)]


def _index_chunks(
    rng: np.random.Generator, n: int, n_resamples: int, max_entries: int
) -> Iterator[np.ndarray]:
    """``rng.integers(0, n, size=(n_resamples, n))`` in chunks of whole rows of at most
    ``max_entries`` indices (at least one row), drawn lazily from ``rng``."""
    if max_entries < 1:
        raise ValueError(f"max_entries must be a positive integer, got {max_entries!r}")
    rows = max(1, max_entries // max(n, 1))
    for start in range(0, n_resamples, rows):
        yield rng.integers(0, n, size=(min(rows, n_resamples - start), n))


def _rng(seed: int, n_resamples: int) -> np.random.Generator:
    if not (isinstance(n_resamples, (int, np.integer)) and n_resamples >= 1):
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    return np.random.default_rng(seed)


def _leaves(
    values: Sequence[float | None],
    groups: Sequence[tuple[Hashable, ...] | Hashable],
    missing: Missing,
    who: str,
) -> dict[tuple[Hashable, ...], np.ndarray]:
    if len(values) != len(groups):
        raise ValueError(f"{who}: {len(values)} values but {len(groups)} group keys")
    keys = [g if isinstance(g, tuple) else (g,) for g in groups]
    depths = {len(k) for k in keys}
    if len(depths) > 1 or 0 in depths:
        raise ValueError(f"{who}: group keys must all have the same (non-zero) length")
    by_key: dict[tuple[Hashable, ...], list[float | None]] = {}
    for key, v in zip(keys, values, strict=True):
        by_key.setdefault(key, []).append(v)
    leaves = {}
    for key, vs in by_key.items():
        arr = _present(vs, missing, f"{who}, group {key}")
        if arr.size:
            leaves[key] = arr
    if not leaves:
        raise ValueError(f"{who}: no values")
    return leaves


def _macro(leaves: Mapping[tuple[Hashable, ...], Any], means: Mapping[tuple, Any]) -> Any:
    """Average ``means`` (scalars or per-round arrays) up the key hierarchy of ``leaves``."""
    level: dict[tuple, Any] = {key: means[key] for key in leaves}
    while True:
        depth = len(next(iter(level)))
        if depth == 1:
            return sum(level[k] for k in sorted(level, key=_order)) / len(level)
        parents: dict[tuple, list[Any]] = {}
        for key in sorted(level, key=_order):
            parents.setdefault(key[:-1], []).append(level[key])
        level = {key: sum(vs) / len(vs) for key, vs in parents.items()}


def _order(key: tuple) -> tuple[str, ...]:
    # PaintBench sorts category and task names; str() also orders keys that are not strings.
    return tuple(str(k) for k in key)
