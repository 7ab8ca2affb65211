"""SciPy's tests of the Wilcoxon signed-rank test (``stats/tests/test_morestats.py``,
``TestWilcoxon``) and of the percentile bootstrap (``stats/tests/test_resampling.py``), their
data, expected values and tolerances, through :func:`medibench.stats.paired_wilcoxon` (pairs by
sample id, zero differences dropped: ``zero_method="wilcox"``; scipy's default method) and
:func:`medibench.stats.bootstrap_ci` (percentile, a seed instead of a generator object)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from medibench.stats import bootstrap_ci, paired_wilcoxon


def _paired(x, y):
    ids = [f"s{i}" for i in range(len(x))]
    return dict(zip(ids, map(float, x), strict=True)), dict(zip(ids, map(float, y), strict=True))


def test_accuracy_wilcoxon_wilcox_zero_method():
    freq = [1, 4, 16, 15, 8, 4, 5, 1, 2]
    x = np.concatenate([[u] * v for u, v in zip(range(-4, 5), freq, strict=True)])
    res = paired_wilcoxon(*_paired(x, np.zeros_like(x)))
    # scipy: wilcoxon(x, y, "wilcox", method="asymptotic", correction=False); with ties and
    # zeros scipy's default method is the same asymptotic one
    assert res["statistic"] == 327.0
    assert res["pvalue"] == pytest.approx(0.00641346115861, rel=1e-7)
    assert res["n_zero"] == 8 and res["n"] == 56  # the 8 zero differences are dropped


X = [120, 114, 181, 188, 180, 146, 121, 191, 132, 113, 127, 112]
Y = [133, 143, 119, 189, 112, 199, 198, 113, 115, 121, 142, 187]


def test_accuracy_wilcoxon_statistic_against_r():
    assert paired_wilcoxon(*_paired(X, Y))["statistic"] == 34.0


@pytest.mark.xfail(
    strict=True,
    reason="paired_wilcoxon uses scipy's default method, exact for 12 pairs without ties (as "
    "MedGEN-Bench's paired_wilcoxon_test does); scipy's test asks for the asymptotic p-value",
)
def test_accuracy_wilcoxon_asymptotic_pvalue_against_r():
    assert paired_wilcoxon(*_paired(X, Y))["pvalue"] == pytest.approx(0.6948866023724735)


ONESIDED = (
    [125, 115, 130, 140, 140, 115, 140, 125, 140, 135],
    [110, 122, 125, 120, 140, 124, 123, 137, 135, 145],
)


def test_onesided_statistic_against_r():
    less = paired_wilcoxon(*_paired(*ONESIDED), alternative="less")
    greater = paired_wilcoxon(*_paired(*ONESIDED), alternative="greater")
    assert less["statistic"] == greater["statistic"] == 27.0


@pytest.mark.xfail(
    strict=True,
    reason="paired_wilcoxon uses scipy's default method (exact for 10 pairs, the zero dropped); "
    "scipy's test asks for R's asymptotic p-values (0.7032 / 0.2968; exact gives 0.7051)",
)
def test_onesided_asymptotic_pvalues_against_r():
    less = paired_wilcoxon(*_paired(*ONESIDED), alternative="less")
    greater = paired_wilcoxon(*_paired(*ONESIDED), alternative="greater")
    assert less["pvalue"] == pytest.approx(0.7031847042787, rel=1e-7)
    assert greater["pvalue"] == pytest.approx(0.2968152957213, rel=1e-7)


@pytest.mark.slow
def test_bootstrap_percentile_against_r():
    x = [10, 12, 12.5, 12.5, 13.9, 15, 21, 22, 23, 34, 50, 81, 89, 121, 134, 213]
    low, high = bootstrap_ci(x, n_resamples=1_000_000, seed=0)
    assert low == pytest.approx(28.86, rel=0.005) and high == pytest.approx(84.21, rel=0.005)


@pytest.mark.slow
def test_bootstrap_percentile_against_theory():
    rng = np.random.default_rng(2442101192988600726)
    data = stats.norm.rvs(loc=5, scale=2, size=5000, random_state=rng)
    dist = stats.t(df=len(data) - 1, loc=np.mean(data), scale=stats.sem(data))
    ref_low, ref_high = dist.interval(confidence=0.95)
    low, high = bootstrap_ci(data, n_resamples=5000, seed=0)
    assert low == pytest.approx(ref_low, rel=5e-4) and high == pytest.approx(ref_high, rel=5e-4)
