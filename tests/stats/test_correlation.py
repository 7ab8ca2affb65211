"""medibench.stats correlations and the linear fit, against scipy.stats on the same inputs."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from medibench.stats import correlation, correlation_ci, correlation_rows, linear_fit

SCIPY = {"spearman": stats.spearmanr, "kendall": stats.kendalltau, "pearson": stats.pearsonr}
TOL = 1e-12


def _data(n: int, seed: int, ties: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 0.6 * x + rng.normal(size=n)
    if ties:
        x, y = np.round(x), np.round(y * 2) / 2
    return x, y


@pytest.mark.parametrize("method", sorted(SCIPY))
@pytest.mark.parametrize("n,ties", [(3, False), (5, True), (10, False), (12, True), (40, False)])
def test_statistic_and_default_pvalue_match_scipy(method, n, ties):
    x, y = _data(n, n, ties)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        pytest.skip("constant draw")
    ours, ref = correlation(x, y, method=method), SCIPY[method](x, y)
    assert ours.statistic == pytest.approx(ref.statistic, abs=TOL)
    assert ours.pvalue == pytest.approx(ref.pvalue, abs=TOL)
    assert ours.n == n
    if method == "kendall":  # the label names the test scipy chose
        assert ours.pvalue_method == ("exact" if not ties and n <= 33 else "normal")
        how = {"exact": "exact", "normal": "asymptotic"}[ours.pvalue_method]
        assert ours.pvalue == pytest.approx(stats.kendalltau(x, y, method=how).pvalue, abs=TOL)
    else:
        assert ours.pvalue_method == "t"


def test_kendall_auto_uses_the_normal_approximation_above_33():
    x, y = _data(40, 1, False)
    assert correlation(x, y, method="kendall").pvalue_method == "normal"


@pytest.mark.parametrize("method", sorted(SCIPY))
@pytest.mark.parametrize("n,ties", [(3, False), (4, True), (5, False), (5, True)])
def test_exact_pvalue_is_scipys_enumerated_permutation_test(method, n, ties):
    x, y = _data(n, 7 + n, ties)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        pytest.skip("constant draw")
    ours = correlation(x, y, method=method, pvalue="exact")
    ref = stats.permutation_test(
        (x,),
        lambda a: SCIPY[method](a, y).statistic,
        permutation_type="pairings",
        vectorized=False,
        n_resamples=np.inf,
    )
    assert ours.pvalue_method == "exact"
    assert ours.pvalue == pytest.approx(ref.pvalue, abs=TOL)


def test_kendall_exact_without_ties_is_its_exact_distribution_at_any_n():
    x, y = _data(15, 3, False)
    ours = correlation(x, y, method="kendall", pvalue="exact")
    assert ours.pvalue == pytest.approx(stats.kendalltau(x, y, method="exact").pvalue, abs=TOL)
    # ... which is the permutation distribution: the same on an enumerable n.
    x, y = _data(5, 3, False)
    perm = stats.permutation_test(
        (x,), lambda a: stats.kendalltau(a, y).statistic, permutation_type="pairings"
    )
    assert correlation(x, y, method="kendall", pvalue="exact").pvalue == pytest.approx(
        perm.pvalue, abs=TOL
    )


def test_exact_by_hand_n3():
    # x = 1, 2, 3 against y = 1, 2, 3: of the 6 pairings one gives rho = 1 and one rho = -1,
    # so p = 2 min(1/6, 6/6) = 1/3.
    res = correlation([1, 2, 3], [1, 2, 3], method="spearman", pvalue="exact")
    assert (res.statistic, res.pvalue, res.n_permutations) == (pytest.approx(1.0), 1 / 3, 6)


@pytest.mark.parametrize("method", sorted(SCIPY))
def test_permutation_pvalue_matches_scipy_with_the_same_seed(method):
    x, y = _data(11, 5, method == "kendall")
    ours = correlation(x, y, method=method, pvalue="permutation", n_permutations=199, seed=3)
    ref = stats.permutation_test(
        (x,),
        lambda a: SCIPY[method](a, y).statistic,
        permutation_type="pairings",
        vectorized=False,
        n_resamples=199,
        rng=np.random.default_rng(3),
    )
    assert ours.pvalue_method == "permutation" and ours.n_permutations == 199
    assert ours.pvalue == pytest.approx(ref.pvalue, abs=TOL)


def test_permutation_with_enough_resamples_is_exact():
    x, y = _data(5, 1, False)
    res = correlation(x, y, pvalue="permutation", n_permutations=500)
    assert res.pvalue_method == "exact" and res.n_permutations == 120
    assert res.pvalue == correlation(x, y, pvalue="exact").pvalue


@pytest.mark.parametrize("method", sorted(SCIPY))
def test_correlation_rows_match_scipy(method):
    rng = np.random.default_rng(2)
    x = np.round(rng.normal(size=(5, 8)), 0)
    y = np.round(rng.normal(size=(5, 8)), 1)
    rows = correlation_rows(x, y, method=method)
    ref = [SCIPY[method](a, b).statistic for a, b in zip(x, y, strict=True)]
    np.testing.assert_allclose(rows, ref, atol=TOL)
    assert np.isnan(correlation_rows([[1, 1, 1]], [[1, 2, 3]], method=method)[0])


@pytest.mark.parametrize("method", sorted(SCIPY))
def test_model_bootstrap_is_scipys_paired_percentile_bootstrap(method):
    x, y = _data(12, 4, False)
    low, high, undefined = correlation_ci(x, y, method=method, n_resamples=200, seed=9)
    ref = stats.bootstrap(
        (x, y),
        lambda a, b: SCIPY[method](a, b).statistic,
        paired=True,
        vectorized=False,
        n_resamples=200,
        method="percentile",
        rng=np.random.default_rng(9),
    )
    assert undefined == 0
    assert (low, high) == pytest.approx(
        (ref.confidence_interval.low, ref.confidence_interval.high), abs=TOL
    )


def test_within_model_bootstrap_follows_its_recipe():
    rng = np.random.default_rng(0)
    xs = [rng.normal(m, 1, 6) for m in range(4)]
    ys = [rng.normal(m, 1, 6) for m in range(4)]
    ys[1][2] = np.nan  # a sample the second side has no value for
    x = np.array([v.mean() for v in xs])
    y = np.array([np.nanmean(v) for v in ys])
    within = [(a, b) for a, b in zip(xs, ys, strict=True)]
    within[3] = (xs[3], None)  # a side known only as a model value stays fixed
    low, high, undefined = correlation_ci(
        x, y, method="pearson", within=within, n_resamples=50, seed=1
    )
    # The documented recipe, a loop at a time.
    draw = np.random.default_rng(1)
    bx, by = np.tile(x, (50, 1)), np.tile(y, (50, 1))
    for i, (a, b) in enumerate(within):
        idx = draw.integers(0, 6, size=(50, 6))
        for r in range(50):
            bx[r, i] = np.nanmean(a[idx[r]])
            if b is not None:
                by[r, i] = np.nanmean(b[idx[r]])
    boot = [stats.pearsonr(bx[r], by[r]).statistic for r in range(50)]
    assert undefined == 0
    assert (low, high) == pytest.approx(tuple(np.percentile(boot, [2.5, 97.5])), abs=TOL)


def test_within_one_sample_per_model_is_no_resampling():
    x, y = np.array([1.0, 2, 3, 5]), np.array([2.0, 1, 4, 3])
    within = [(np.array([a]), np.array([b])) for a, b in zip(x, y, strict=True)]
    low, high, _ = correlation_ci(x, y, within=within, n_resamples=20)
    assert low == high == pytest.approx(stats.spearmanr(x, y).statistic, abs=TOL)


def test_undefined_resamples_are_counted_and_left_out():
    low, high, undefined = correlation_ci([1, 2, 3], [3, 1, 2], n_resamples=200, seed=0)
    assert 0 < undefined < 200 and -1 <= low <= high <= 1


def test_linear_fit_matches_linregress():
    x, y = _data(11, 6, False)
    fit, ref = linear_fit(x, y), stats.linregress(x, y)
    for ours, theirs in (
        (fit.slope, ref.slope),
        (fit.intercept, ref.intercept),
        (fit.rvalue, ref.rvalue),
        (fit.r_squared, ref.rvalue**2),
        (fit.pvalue, ref.pvalue),
        (fit.stderr, ref.stderr),
        (fit.intercept_stderr, ref.intercept_stderr),
    ):
        assert ours == pytest.approx(theirs, abs=TOL)
    # The band at the mean of x is yhat +- t s / sqrt(n); the slope's stderr is s / sqrt(Sxx).
    ((lo, hi),) = fit.band([x.mean()])
    t = stats.t.ppf(0.975, 9)
    assert (hi - lo) / 2 == pytest.approx(t * fit.residual_std / math.sqrt(11), abs=TOL)
    assert fit.stderr == pytest.approx(fit.residual_std / math.sqrt(fit.sxx), abs=TOL)


@pytest.mark.parametrize(
    "x,y,match",
    [
        ([1, 2], [1, 2], "at least 3 pairs"),
        ([1, 2, np.nan], [1, 2, 3], "x has a missing"),
        ([1, 2, 3], [1, 2], "one length"),
        ([1, 2, 3], [4, 4, 4], "y is constant"),
    ],
)
def test_bad_input_is_refused(x, y, match):
    with pytest.raises(ValueError, match=match):
        correlation(x, y)


def test_exact_refuses_a_large_n_and_unknown_options():
    x, y = _data(10, 1, True)
    with pytest.raises(ValueError, match="n = 10 is more than 9"):
        correlation(x, y, pvalue="exact")
    with pytest.raises(ValueError, match="method must be"):
        correlation(x, y, method="tau")
    with pytest.raises(ValueError, match="pvalue must be"):
        correlation(x, y, pvalue="asymptotic")


def test_all_pairings_enumerated_is_every_permutation():
    # A sanity check on the enumeration itself: n = 4 has 24 pairings.
    assert len(list(itertools.permutations(range(4)))) == 24
    assert correlation([1, 2, 3, 4], [1, 3, 2, 4], pvalue="exact").n_permutations == 24
