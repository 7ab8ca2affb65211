"""FID, KID and cosine similarity against closed forms and plain references."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import linalg

from medibench.metrics import features as F
from medibench.metrics.features import (
    FeatureSetWarning,
    cosine_similarity,
    frechet_distance,
    frechet_distance_ci,
    gaussian_frechet_distance,
    kid,
    kid_ci,
)


def _spd(rng, d):
    q = rng.normal(size=(d, d))
    return q @ q.T / d + 0.1 * np.eye(d)


def _closed_form(mu1, s1, mu2, s2):
    """|mu1-mu2|^2 + tr(S1 + S2 - 2 (S1 S2)^(1/2)) with scipy's principal square root."""
    root = linalg.sqrtm(s1 @ s2).real
    return float(np.sum((mu1 - mu2) ** 2) + np.trace(s1 + s2 - 2 * root))


@pytest.mark.parametrize("method", ["eigen", "sqrtm"])
def test_gaussian_distance_matches_the_closed_form(method):
    rng = np.random.default_rng(0)
    d = 12
    mu1, mu2 = rng.normal(size=d), rng.normal(size=d)
    s1, s2 = _spd(rng, d), _spd(rng, d)
    want = _closed_form(mu1, s1, mu2, s2)
    got = gaussian_frechet_distance(mu1, s1, mu2, s2, method=method)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_diagonal_covariances_by_hand():
    # tr sqrt(diag(s1) diag(s2)) = sum sqrt(s1 s2): (1-0)^2 + (4 + 1 - 2*2) + (9 + 4 - 2*6) = 3
    got = gaussian_frechet_distance(
        np.array([1.0, 0.0]), np.diag([4.0, 9.0]), np.zeros(2), np.diag([1.0, 4.0])
    )
    assert got == pytest.approx(3.0, abs=1e-12)


def _exact_sample(rng, mu, sigma, n):
    """``n`` rows whose sample mean is ``mu`` and sample covariance ``sigma`` exactly."""
    z = rng.normal(size=(n, len(mu)))
    z -= z.mean(0)
    z = z @ np.linalg.inv(np.linalg.cholesky(np.cov(z, rowvar=False))).T  # cov(z) = I
    return z @ np.linalg.cholesky(sigma).T + mu


def test_gaussian_features_give_the_closed_form():
    rng = np.random.default_rng(1)
    d = 6
    mu1, mu2 = np.zeros(d), np.full(d, 0.5)
    s1, s2 = _spd(rng, d), _spd(rng, d)
    a, b = _exact_sample(rng, mu1, s1, 500), _exact_sample(rng, mu2, s2, 700)
    want = _closed_form(mu1, s1, mu2, s2)
    assert frechet_distance(a, b) == pytest.approx(want, rel=1e-9)
    assert frechet_distance(a, b, method="sqrtm") == pytest.approx(want, rel=1e-9)


def test_sample_estimate_uses_numpy_cov_and_both_methods_agree():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(300, 20)), rng.normal(1.0, 2.0, size=(250, 20))
    want = _closed_form(a.mean(0), np.cov(a, rowvar=False), b.mean(0), np.cov(b, rowvar=False))
    assert frechet_distance(a, b) == pytest.approx(want, rel=1e-10)
    assert frechet_distance(a, b, method="sqrtm") == pytest.approx(want, rel=1e-10)


def test_sqrtm_adds_eps_to_the_diagonals_when_the_root_is_not_finite(monkeypatch):
    calls = []
    real = linalg.sqrtm

    def flaky(m):
        calls.append(m.copy())
        return np.full_like(m, np.inf) if len(calls) == 1 else real(m)

    monkeypatch.setattr(linalg, "sqrtm", flaky)
    rng = np.random.default_rng(3)
    s1, s2 = _spd(rng, 5), _spd(rng, 5)
    got = gaussian_frechet_distance(np.zeros(5), s1, np.zeros(5), s2, method="sqrtm", eps=1e-2)
    off = np.eye(5) * 1e-2
    np.testing.assert_allclose(calls[1], (s1 + off) @ (s2 + off))
    want = np.trace(s1 + s2) - 2 * np.trace(real((s1 + off) @ (s2 + off)).real)
    assert got == pytest.approx(want, rel=1e-10)


def test_fewer_samples_than_dimensions_warns_and_gives_the_plug_in_estimate():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(30, 64)), rng.normal(size=(40, 64))
    with pytest.warns(FeatureSetWarning) as caught:
        got = frechet_distance(a, b)
    messages = [str(w.message) for w in caught]
    assert "a has 30 rows for 64 dimensions" in messages[0] and "rank <= 29" in messages[0]
    assert "b has 40 rows for 64 dimensions" in messages[1]
    # the stated estimate: the closed form on the (singular) sample covariances, its trace
    # term from the data: tr (S1 S2)^(1/2) = nuclear norm of A_c B_c^T / sqrt((n1-1)(n2-1))
    ac, bc = a - a.mean(0), b - b.mean(0)
    tr = np.linalg.svd(ac @ bc.T, compute_uv=False).sum() / np.sqrt(29 * 39)
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    want = np.sum((a.mean(0) - b.mean(0)) ** 2) + np.trace(s1) + np.trace(s2) - 2 * tr
    assert got == pytest.approx(want, rel=1e-12)
    assert got > 0


@pytest.mark.parametrize("fn", [frechet_distance, kid, cosine_similarity])
def test_nan_features_are_refused_naming_the_rows(fn):
    a = np.random.default_rng(5).normal(size=(10, 3))
    b = a.copy()
    b[[2, 7], 1] = np.nan
    with pytest.raises(
        ValueError, match=r"b has NaN or infinite features in 2 row\(s\), first \[2, 7\]"
    ):
        fn(a, b)


def test_bad_shapes_are_refused():
    a = np.zeros((5, 3))
    with pytest.raises(ValueError, match="must be \\(N, D\\)"):
        frechet_distance(a, np.zeros(5))
    with pytest.raises(ValueError, match="3 and 4 dimensions"):
        frechet_distance(a, np.zeros((5, 4)))
    with pytest.raises(ValueError, match="method"):
        frechet_distance(a + np.arange(3), a, method="svd")  # type: ignore[arg-type]


def _kid_reference(a, b, m, subsets, seed):
    """A plain double loop over pairs (same subset draws)."""
    rng = np.random.default_rng(seed)
    d = a.shape[1]
    k = lambda x, y: (x @ y / d + 1.0) ** 3  # noqa: E731
    out = []
    for _ in range(subsets):
        x = a[rng.choice(len(a), m, replace=False)]
        y = b[rng.choice(len(b), m, replace=False)]
        xx = sum(k(x[i], x[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
        yy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
        xy = sum(k(x[i], y[j]) for i in range(m) for j in range(m)) / m**2
        out.append(xx + yy - 2 * xy)
    return np.mean(out), np.std(out)


def test_kid_matches_a_plain_loop():
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=(40, 5)), rng.normal(0.3, 1.0, size=(50, 5))
    got = kid(a, b, subset_size=12, subsets=7, seed=3)
    mean, std = _kid_reference(a, b, 12, 7, 3)
    assert got.mean == pytest.approx(mean, rel=1e-10) and got.std == pytest.approx(std, rel=1e-10)
    assert got.subset_size == 12 and got.subsets == 7 and got.notes == ()


def test_kid_by_hand_on_two_points():
    # D = 1, X = {0, 1}, Y = {0, 0}: k(x, y) = (xy + 1)^3
    # kxx off-diagonal: 2 * k(0, 1) / 2 = 1; kyy: 1; kxy: (1 + 1 + 1 + 1) / 4 = 1 -> MMD^2 = 0
    # X = {1, 1}: kxx = 8, kyy = 1, kxy = 1 -> 8 + 1 - 2 = 7
    res = kid(np.array([[1.0], [1.0]]), np.array([[0.0], [0.0]]), subset_size=2, subsets=1)
    assert res.mean == pytest.approx(7.0) and res.std == 0.0


def test_kid_caps_the_subset_size_with_a_note():
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(30, 4)), rng.normal(size=(20, 4))
    with pytest.warns(FeatureSetWarning, match="capped at 20"):
        res = kid(a, b, subset_size=1000, subsets=3)
    assert res.subset_size == 20 and "capped at 20" in res.notes[0]


def test_kid_of_one_distribution_is_near_zero_and_of_shifted_ones_positive():
    rng = np.random.default_rng(8)
    a, b = rng.normal(size=(400, 8)), rng.normal(size=(400, 8))
    same = kid(a, b, subset_size=200, subsets=20)
    shifted = kid(a, b + 1.0, subset_size=200, subsets=20)
    assert abs(same.mean) < 3 * same.std + 1e-3
    assert shifted.mean > 10 * abs(same.mean)


def test_cosine_similarity_per_pair():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    b = np.array([[0.0, 1.0], [2.0, 2.0], [-1.0, 0.0]])
    np.testing.assert_allclose(cosine_similarity(a, b), [0.0, 1.0, -1.0], atol=1e-15)
    with pytest.raises(ValueError, match=r"row\(s\) \[1\] are all zeros"):
        cosine_similarity(a, np.array([[1.0, 0], [0, 0], [1, 1]]))


def test_bootstrap_intervals_resample_both_sets_with_the_stats_percentiles():
    rng = np.random.default_rng(9)
    a, b = rng.normal(size=(60, 3)), rng.normal(0.5, 1.0, size=(50, 3))
    low, high = frechet_distance_ci(a, b, n_resamples=50, seed=1)
    r = np.random.default_rng(1)
    vals = []
    for _ in range(50):
        ia, ib = r.integers(0, 60, 60), r.integers(0, 50, 50)
        vals.append(frechet_distance(a[ia], b[ib]))
    assert (low, high) == pytest.approx(tuple(np.percentile(vals, [2.5, 97.5])))
    assert low < frechet_distance(a, b) < high
    klow, khigh = kid_ci(a, b, subset_size=20, subsets=3, n_resamples=20, seed=0)
    assert klow < khigh


def test_bootstrap_warns_once_not_per_resample():
    rng = np.random.default_rng(10)
    a, b = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frechet_distance_ci(a, b, n_resamples=5)
    assert not [w for w in caught if issubclass(w.category, F.FeatureSetWarning)]


def test_fid_and_kid_match_torchmetrics():
    torch = pytest.importorskip("torch")
    tm_fid = pytest.importorskip("torchmetrics.image.fid")
    tm_kid = pytest.importorskip("torchmetrics.image.kid")
    rng = np.random.default_rng(11)
    for d in (4, 32):
        a, b = rng.normal(size=(300, d)), rng.normal(0.3, 1.2, size=(250, d))
        mu1, mu2 = a.mean(0), b.mean(0)
        s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
        t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
        want = float(tm_fid._compute_fid(t(mu1), t(s1), t(mu2), t(s2)))
        assert frechet_distance(a, b) == pytest.approx(want, rel=1e-9)
        # one subset of every row: KID is torchmetrics' poly_mmd (degree 3, gamma 1/D, coef 1)
        x, y = a[:250], b
        got = kid(x, y, subset_size=250, subsets=1).mean
        assert got == pytest.approx(float(tm_kid.poly_mmd(t(x), t(y))), rel=1e-9)
