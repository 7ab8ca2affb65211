import numpy as np
import pytest
from scipy import stats

from medibench.report import compare_models, paired_permutation_test, rank_biserial


def test_exact_permutation_hand_checked():
    # d = (1, 2, 3): the 8 signed sums are +-6, +-4, +-2, 0, 0; |sum| >= 6 twice -> p = 2/8.
    res = paired_permutation_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    assert res == {"statistic": 2.0, "pvalue": 0.25, "n": 3, "exact": True, "n_resamples": 8}
    # d = (1, -1): sums 0, 2, -2, 0 -> |sum| >= 0 always -> p = 1.
    assert paired_permutation_test([1.0, 0.0], [0.0, 1.0])["pvalue"] == 1.0


def test_exact_permutation_matches_scipy():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.3, 1, 9), rng.normal(0, 1, 9)
    ours = paired_permutation_test(a, b, n_resamples=1024)
    ref = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=np.inf,
        alternative="two-sided",
    )
    assert ours["exact"] and ours["pvalue"] == pytest.approx(ref.pvalue)


def test_monte_carlo_permutation_is_seeded_and_bounded():
    a, b = [1.0] * 20, [0.0] * 20
    res = paired_permutation_test(a, b, n_resamples=1000, seed=3)
    # Only the two all-same-sign vectors reach |sum| = 20 (chance 2 / 2**20): p = 1 / 1001.
    assert res["pvalue"] == pytest.approx(1 / 1001) and not res["exact"]
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=40), rng.normal(size=40)
    assert paired_permutation_test(x, y, seed=5) == paired_permutation_test(x, y, seed=5)


def test_permutation_refuses_bad_input():
    with pytest.raises(ValueError, match="no pairs"):
        paired_permutation_test([], [])
    with pytest.raises(ValueError, match="finite"):
        paired_permutation_test([1.0, float("nan")], [0.0, 0.0])
    with pytest.raises(ValueError, match="same length"):
        paired_permutation_test([1.0], [0.0, 1.0])


def test_rank_biserial_hand_checked():
    assert rank_biserial([1, 2, 3], [0, 0, 0]) == 1.0
    # d = (1, -2, 3): ranks 1, 2, 3; R+ = 4, R- = 2 -> (4 - 2) / 6.
    assert rank_biserial([1, 0, 3], [0, 2, 0]) == pytest.approx(1 / 3)
    # d = (0, 1, -1, 2): the zero is dropped; |d| ranks 1.5, 1.5, 3; R+ = 4.5, R- = 1.5 -> 0.5.
    assert rank_biserial([0, 1, 0, 2], [0, 0, 1, 0]) == pytest.approx(0.5)
    assert rank_biserial([1, 1], [1, 1]) is None


def test_compare_models_hand_checked():
    a = {"s1": 1.0, "s2": 2.0, "s3": 3.0, "s4": None}
    b = {"s1": 0.0, "s2": 0.0, "s3": 0.0, "s4": 1.0, "s5": float("inf")}
    (row,) = compare_models({"b": b, "a": a}, metric="ssim", n_resamples=200, seed=0)
    assert (row["model_a"], row["model_b"], row["metric"]) == ("a", "b", "ssim")
    assert row["n"] == 3 and row["n_unpaired"] == 1  # s4 has a value for b only; s5 is inf
    assert row["mean_a"] == 2.0 and row["mean_b"] == 0.0 and row["mean_diff"] == 2.0
    assert row["diff_ci_low"] >= 1.0 and row["diff_ci_high"] <= 3.0
    assert row["rank_biserial"] == 1.0
    assert row["permutation_p"] == 0.25
    # Wilcoxon exact, n = 3, all differences positive: W = min(T+, T-) = 0, p = 2 / 8.
    assert row["wilcoxon_stat"] == 0.0 and row["wilcoxon_p"] == pytest.approx(0.25)


def test_compare_models_without_common_values():
    (row,) = compare_models({"a": {"s1": 1.0}, "b": {"s2": 1.0}}, metric="m")
    assert row["n"] == 0 and row["n_unpaired"] == 2
    assert row["wilcoxon_p"] is None and row["mean_diff"] is None
