"""Bootstrap CIs, PaintBench's hierarchical bootstrap, paired Wilcoxon and pass rates."""

import math

import numpy as np
import pytest
from scipy import stats

from medibench.stats._bootstrap import (
    PassRate,
    bootstrap_ci,
    hierarchical_bootstrap_ci,
    macro_mean,
    paired_wilcoxon,
    pass_rate,
)

VALUES = list(np.random.default_rng(1).normal(0.6, 0.2, 37))


def test_bootstrap_matches_scipy_percentile():
    ref = stats.bootstrap(
        (np.array(VALUES),),
        np.mean,
        n_resamples=1000,
        method="percentile",
        random_state=np.random.default_rng(42),
        vectorized=True,
    ).confidence_interval
    low, high = bootstrap_ci(VALUES)
    assert low == pytest.approx(ref.low, abs=1e-12) and high == pytest.approx(ref.high, abs=1e-12)


def test_bootstrap_matches_medgen_loop():
    # MedGEN-Bench-eval's bootstrap_ci: a loop of rng.choice draws, percentiles 2.5 / 97.5.
    rng = np.random.default_rng(42)
    arr = np.array(VALUES)
    means = [np.median(rng.choice(arr, size=arr.size, replace=True)) for _ in range(500)]
    ref = np.percentile(means, [5.0, 95.0])
    got = bootstrap_ci(VALUES, n_resamples=500, level=0.9, statistic=np.median)
    assert got == pytest.approx(tuple(ref), abs=1e-12)


def test_bootstrap_missing_values():
    with pytest.raises(ValueError, match="1 of 3 values are missing"):
        bootstrap_ci([1.0, None, 2.0])
    with pytest.raises(ValueError, match="1 of 3 values are missing"):
        bootstrap_ci([1.0, float("nan"), 2.0])
    assert bootstrap_ci([1.0, None, 2.0, 4.0], missing="skip") == bootstrap_ci([1.0, 2.0, 4.0])
    with pytest.raises(ValueError, match="no values"):
        bootstrap_ci([None], missing="skip")
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([1.0], level=1.0)
    assert bootstrap_ci([3.0, 3.0]) == (3.0, 3.0)


def test_macro_mean_hand_computed():
    values = [1.0, 3.0, 4.0, 0.0, 1.0]
    groups = [("A", "t1"), ("A", "t1"), ("A", "t2"), ("B", "t3"), ("B", "t3")]
    # A: mean(2, 4) = 3; B: 0.5; macro = 1.75 (micro would be 1.8).
    assert macro_mean(values, groups) == 1.75
    assert macro_mean(values, [g[1] for g in groups]) == pytest.approx((2 + 4 + 0.5) / 3)
    assert macro_mean([*values, None], [*groups, ("C", "t4")], missing="skip") == 1.75


def _paintbench_bench_ci(per_cat_task, n_boot, seed):
    """PaintBench stats.py _bootstrap_ci_subtasks_then_tasks, written out."""
    rng = np.random.default_rng(seed)
    per_cat = []
    for tasks in per_cat_task:
        boot = []
        for arr in tasks:
            idx = rng.integers(0, len(arr), size=(n_boot, len(arr)))
            boot.append(np.asarray(arr)[idx].mean(axis=1))
        per_cat.append(np.stack(boot).mean(axis=0))
    return np.percentile(np.stack(per_cat).mean(axis=0), [2.5, 97.5])


def test_hierarchical_bootstrap_mirrors_paintbench():
    rng = np.random.default_rng(5)
    layout = {("color", "recolor"): 7, ("color", "blending"): 4, ("geo", "rotation"): 9}
    values, groups = [], []
    for key, n in layout.items():
        values += list(rng.uniform(0, 1, n))
        groups += [key] * n
    per = {k: [v for v, g in zip(values, groups, strict=True) if g == k] for k in layout}
    # PaintBench orders categories, then tasks within them, by name.
    ordered = [[per[("color", "blending")], per[("color", "recolor")]], [per[("geo", "rotation")]]]
    ref = _paintbench_bench_ci(ordered, 2000, 0)
    got = hierarchical_bootstrap_ci(values, groups, n_resamples=2000, seed=0)
    assert got == pytest.approx(tuple(ref), abs=1e-12)
    point = macro_mean(values, groups)
    assert got[0] <= point <= got[1]


def test_hierarchical_bad_groups():
    with pytest.raises(ValueError, match="2 values but 1 group keys"):
        hierarchical_bootstrap_ci([1.0, 2.0], [("a", "b")])
    with pytest.raises(ValueError, match="same"):
        hierarchical_bootstrap_ci([1.0, 2.0], [("a", "b"), ("a",)])
    with pytest.raises(ValueError, match="missing"):
        hierarchical_bootstrap_ci([1.0, None], [("a", "b"), ("a", "b")])


def test_paired_wilcoxon_by_sample_id():
    a = {"s1": 1.0, "s2": 2.0, "s3": 3.5, "s4": 4.0, "s5": 7.0, "s6": 5.0, "s8": None}
    b = {"s1": 2.0, "s2": 2.0, "s3": 3.0, "s4": 5.0, "s5": 9.0, "s7": 1.0, "s8": 3.0}
    res = paired_wilcoxon(a, b)
    # Differences a - b: -1, 0, 0.5, -1, -2; the zero is dropped; |d| ranks 2.5, 1, 2.5, 4;
    # R+ = 1, R- = 9: statistic = min = 1.
    assert res["statistic"] == 1.0
    ref = stats.wilcoxon([1.0, 2.0, 3.5, 4.0, 7.0], [2.0, 2.0, 3.0, 5.0, 9.0])
    assert res["pvalue"] == pytest.approx(ref.pvalue, abs=1e-12)
    assert (res["n"], res["n_dropped"], res["n_missing"], res["n_zero"]) == (5, 2, 1, 1)
    less = paired_wilcoxon(a, b, alternative="less")
    assert less["pvalue"] == pytest.approx(
        stats.wilcoxon(
            [1.0, 2.0, 3.5, 4.0, 7.0], [2.0, 2.0, 3.0, 5.0, 9.0], alternative="less"
        ).pvalue
    )


@pytest.mark.parametrize("seed", range(6))
def test_paired_wilcoxon_with_ties_or_zeros_is_scipys_exact_permutation_test(seed):
    # up to 13 pairs with ties or zeros scipy enumerates every sign flip, one call each; medibench
    # counts them vectorised: the same p-values, bit for bit, for each alternative (13, the last
    # size scipy enumerates, for one; 14 is scipy's asymptotic test again)
    rng = np.random.default_rng(seed)
    n = (4, 7, 9, 11, 13, 14)[seed]
    x = rng.integers(0, 4, n) / 4.0
    y = x + rng.integers(-2, 3, n) / 8.0  # zeros and tied differences
    a, b = dict(enumerate(x)), dict(enumerate(y))
    for alternative in ("two-sided", "greater", "less") if n != 13 else ("greater",):
        ours = paired_wilcoxon(a, b, alternative=alternative)
        ref = stats.wilcoxon(x, y, zero_method="wilcox", alternative=alternative)
        assert (ours["statistic"], ours["pvalue"]) == (float(ref.statistic), float(ref.pvalue))
    assert ours["n_zero"] == int(np.count_nonzero(x == y)) > 0 or len(set(np.abs(x - y))) < n


def test_paired_wilcoxon_edge_cases():
    same = paired_wilcoxon({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0})
    assert (same["statistic"], same["pvalue"], same["n_zero"]) == (0.0, 1.0, 2)
    with pytest.raises(ValueError, match="no sample id has a finite value in both"):
        paired_wilcoxon({"a": 1.0}, {"b": 1.0})
    inf = paired_wilcoxon({"a": math.inf, "b": 1.0}, {"a": 1.0, "b": 2.0})
    assert inf["n"] == 1 and inf["n_missing"] == 1


def test_pass_rate_counts_missing_separately():
    assert pass_rate([30.0, 25.0, None, float("nan"), 28.0], 28.0) == PassRate(2 / 3, 2, 3, 2)
    assert pass_rate([0.5, 0.7, 0.6], 0.6, higher_is_better=False) == PassRate(2 / 3, 2, 3, 0)
    assert pass_rate([math.inf], 28.0).rate == 1.0
    assert pass_rate([None], 1.0) == PassRate(None, 0, 0, 1)
    with pytest.raises(ValueError, match="expected a number"):
        pass_rate(["x"], 1.0)


# --- bootstraps at any size (issue 28): chunked draws, the same intervals -------------------
@pytest.mark.parametrize("n, max_entries", [(1, 1), (7, 5), (50, 49), (50, 50), (50, 1000)])
def test_chunked_indices_are_the_one_matrix(n, max_entries):
    from medibench.stats import bootstrap_indices

    chunks = list(bootstrap_indices(n, 37, 42, max_entries=max_entries))
    assert all(c.size <= max(max_entries, n) for c in chunks)  # a row longer than the bound: alone
    full = np.random.default_rng(42).integers(0, n, size=(37, n))
    assert np.array_equal(np.concatenate(chunks), full)


@pytest.mark.parametrize("seed", [0, 42])
def test_chunked_bootstraps_give_todays_intervals(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=83).tolist()
    whole = bootstrap_ci(values, n_resamples=500, seed=seed)  # one chunk: today's code path
    for bound in (1, 83, 84 * 3 + 1, 10_000):
        assert bootstrap_ci(values, n_resamples=500, seed=seed, max_entries=bound) == whole
    median = bootstrap_ci(values, n_resamples=200, seed=seed, statistic=np.median)
    assert (
        bootstrap_ci(values, n_resamples=200, seed=seed, statistic=np.median, max_entries=90)
        == median
    )
    groups = [("a", "x")] * 30 + [("a", "y")] * 20 + [("b", "z")] * 33
    h = hierarchical_bootstrap_ci(values, groups, n_resamples=300, seed=seed)
    assert hierarchical_bootstrap_ci(values, groups, n_resamples=300, seed=seed, max_entries=7) == h
    with pytest.raises(ValueError, match="max_entries must be a positive integer"):
        bootstrap_ci(values, max_entries=0)
