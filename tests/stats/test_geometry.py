"""AUROC against scikit-learn and a hand count; linear CKA against a restatement of Kornblith et
al.'s HSIC formula; both intervals against a loop over the documented resamples."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.stats import auroc, auroc_ci, linear_cka, linear_cka_ci


def test_auroc_is_the_fraction_of_pairs_won_ties_counting_half():
    # pairs won by the positives (3, 1, 1) against (1, 2): 3>1, 3>2, 1=1 (half), 1<2, 1=1, 1<2
    assert auroc([3.0, 1.0, 1.0], [1.0, 2.0]) == pytest.approx((2 + 0.5 + 0.5) / 6)
    assert auroc([5.0, 6.0], [1.0, 2.0, 3.0]) == 1.0
    assert auroc([1.0], [2.0]) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auroc_agrees_with_sklearn(seed):
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    pos = np.round(rng.normal(0.5, 1.0, 17), 1)  # rounded: ties between the classes
    neg = np.round(rng.normal(0.0, 1.0, 23), 1)
    labels = np.r_[np.ones(pos.size), np.zeros(neg.size)]
    expected = roc_auc_score(labels, np.r_[pos, neg])
    assert auroc(pos, neg) == pytest.approx(expected, abs=1e-12)


def test_auroc_ci_is_the_percentile_interval_of_the_documented_resamples():
    rng = np.random.default_rng(5)
    pos, neg = rng.normal(1.0, 1.0, 9), rng.normal(0.0, 1.0, 7)
    draw = np.random.default_rng(3)
    i = draw.integers(0, pos.size, size=(200, pos.size))
    j = draw.integers(0, neg.size, size=(200, neg.size))
    stats = [auroc(pos[a], neg[b]) for a, b in zip(i, j, strict=True)]
    expected = np.percentile(stats, [2.5, 97.5])
    assert auroc_ci(pos, neg, n_resamples=200, seed=3) == pytest.approx(tuple(expected))


def test_auroc_refuses_what_it_cannot_rank():
    with pytest.raises(ValueError, match="no negative value"):
        auroc([1.0], [])
    with pytest.raises(ValueError, match="a positive value is not finite"):
        auroc([np.nan], [1.0])
    with pytest.raises(ValueError, match="1 positive and 3 negative value"):
        auroc_ci([1.0], [1.0, 2.0, 3.0])


def _hsic_cka(x, y):
    """Kornblith et al. (2019): CKA(K, L) = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)) with
    HSIC(K, L) = tr(K H L H) / (n - 1)^2, K = X X^T, L = Y Y^T, H = I - 11^T / n."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, l_ = x @ x.T, y @ y.T

    def hsic(a, b):
        return np.trace(a @ h @ b @ h) / (n - 1) ** 2

    return hsic(k, l_) / np.sqrt(hsic(k, k) * hsic(l_, l_))


@pytest.mark.parametrize("seed", [0, 1])
def test_linear_cka_agrees_with_the_hsic_formula(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(11, 5))
    y = x @ rng.normal(size=(5, 3)) + 0.5 * rng.normal(size=(11, 3))
    assert linear_cka(x, y) == pytest.approx(_hsic_cka(x, y), abs=1e-12)
    # the column-centred form the docstring states
    xc, yc = x - x.mean(0), y - y.mean(0)
    direct = np.linalg.norm(yc.T @ xc) ** 2 / (
        np.linalg.norm(xc.T @ xc) * np.linalg.norm(yc.T @ yc)
    )
    assert linear_cka(x, y) == pytest.approx(direct, abs=1e-12)


def test_linear_cka_is_one_under_rotation_scale_and_shift():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(8, 4))
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    assert linear_cka(x, 3.0 * x @ q + 7.0) == pytest.approx(1.0, abs=1e-12)


def test_linear_cka_ci_is_the_percentile_interval_of_the_documented_resamples():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(9, 3))
    y = x + rng.normal(size=(9, 3))
    idx = np.random.default_rng(1).integers(0, 9, size=(150, 9))
    stats = [_hsic_cka(x[r], y[r]) for r in idx]
    expected = np.percentile(stats, [2.5, 97.5])
    assert linear_cka_ci(x, y, n_resamples=150, seed=1) == pytest.approx(tuple(expected))


def test_linear_cka_refuses_what_it_cannot_compare():
    with pytest.raises(ValueError, match="3 and 4 rows"):
        linear_cka(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="constant over the items"):
        linear_cka(np.ones((3, 2)), np.arange(6.0).reshape(3, 2))
    with pytest.raises(ValueError, match="at least two items"):
        linear_cka(np.ones((1, 2)), np.ones((1, 2)))
