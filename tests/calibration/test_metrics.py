"""Calibration metrics against hand-computed values and reference implementations
(torchmetrics, scikit-learn, relplot), with confidences at bin edges and at 1.0."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.calibration import metrics as M
from medibench.calibration import softmax
from tests.calibration.conftest import make_logits


def two_class(conf: list[float], correct: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Binary probabilities with the given top-label confidences (>= 0.5) and outcomes."""
    c = np.asarray(conf, dtype=np.float64)
    probs = np.stack([c, 1.0 - c], axis=1)
    labels = np.where(np.asarray(correct) == 1, 0, 1)
    return probs, labels


# --- hand-computed values --------------------------------------------------------------------


def test_ece_hand_computed_and_edge_policies():
    # 4 bins of width 0.25. Confidences 0.5 and 0.75 sit exactly on edges.
    probs, labels = two_class([0.5, 0.75, 0.8, 1.0], [1, 0, 1, 1])
    # right (lo, hi]: 0.5 -> (.25,.5]; 0.75 -> (.5,.75]; 0.8 and 1.0 -> (.75,1]
    #   gaps: |1-.5|*1 + |0-.75|*1 + |2-1.8| = .5 + .75 + .2 = 1.45 -> /4
    assert M.expected_calibration_error(probs, labels, n_bins=4) == pytest.approx(1.45 / 4)
    # left [lo, hi): 0.5 -> [.5,.75); 0.75, 0.8, 1.0 -> [.75,1]
    #   |1-.5| + |2-2.55| = .5 + .55 -> /4
    assert M.expected_calibration_error(probs, labels, n_bins=4, edges="left") == pytest.approx(
        1.05 / 4
    )
    # torchmetrics: [lo, hi) and 1.0 alone in an extra bin: .5 | .75, .8 | 1.0
    #   |1-.5| + |1-1.55| + |1-1| = .5 + .55 + 0
    assert M.expected_calibration_error(
        probs, labels, n_bins=4, edges="torchmetrics"
    ) == pytest.approx(1.05 / 4)
    probs, labels = two_class([0.5, 0.75, 0.8, 1.0], [1, 1, 1, 0])
    # left: |1-.5| + |2-2.55| = 1.05 again; torchmetrics: .5 + |2-1.55| + |0-1| = 1.95
    assert M.expected_calibration_error(probs, labels, n_bins=4, edges="left") == pytest.approx(
        1.05 / 4
    )
    assert M.expected_calibration_error(
        probs, labels, n_bins=4, edges="torchmetrics"
    ) == pytest.approx(1.95 / 4)


def test_zero_confidence_goes_to_the_first_bin():
    # A one-vs-rest score of exactly 0 is in the first bin (right-closed policy).
    bins = M.binned_reliability(np.array([0.0, 0.1, 0.9]), np.array([0, 0, 1]), n_bins=2)
    assert bins.counts.tolist() == [2, 1]
    assert bins.confidence[0] == pytest.approx(0.05)


def test_mce_variants_and_empty_bins():
    probs, labels = two_class([0.55, 0.6, 0.95, 0.9] * 3, [0, 0, 1, 1] * 3)
    # 10 bins: (.5,.6] holds the .55s and .6s (acc 0, conf .575); (.8,.9] the .9s; (.9,1] the .95s
    assert M.maximum_calibration_error(probs, labels, n_bins=10) == pytest.approx(0.575)
    assert M.maximum_calibration_error(
        probs, labels, n_bins=4, variant="mvcbench_count_weighted"
    ) == pytest.approx(6 * 0.575 / 12)
    bins = M.reliability_bins(probs, labels, n_bins=10)
    assert bins.counts.tolist() == [0, 0, 0, 0, 0, 6, 0, 0, 3, 3]
    assert np.isnan(bins.accuracy[:5]).all() and np.isnan(bins.confidence[6])
    # empty bins weigh nothing: ECE = 3 * (2 * .575 + .1 + .05) / 12
    assert M.expected_calibration_error(probs, labels, n_bins=10) == pytest.approx(1.3 / 4)


def test_ace_variants_hand_computed():
    probs, labels = two_class([0.55, 0.6, 0.7, 0.9, 0.95, 0.99], [0, 1, 1, 1, 1, 1])
    # equal mass, 3 bins of 2: (.55,.6) acc .5 conf .575; (.7,.9) 1 vs .8; (.95,.99) 1 vs .97
    want = (2 * 0.075 + 2 * 0.2 + 2 * 0.03) / 6
    assert M.adaptive_calibration_error(probs, labels, n_bins=3) == pytest.approx(want)
    # netcal: equal width, mean over non-empty bins of |acc - conf|; 2 bins -> all in (.5, 1]
    assert M.adaptive_calibration_error(probs, labels, n_bins=2, variant="netcal") == pytest.approx(
        abs(5 / 6 - np.mean([0.55, 0.6, 0.7, 0.9, 0.95, 0.99]))
    )
    # 5 bins: (.4,.6] {.55,.6}: |.5-.575|; (.6,.8] {.7}: .3; (.8,1] {.9,.95,.99}: 1-.9467
    got = M.adaptive_calibration_error(probs, labels, n_bins=5, variant="netcal")
    assert got == pytest.approx((0.075 + 0.3 + (1 - np.mean([0.9, 0.95, 0.99]))) / 3)


def test_equal_mass_uneven_split_matches_array_split():
    z, y = make_logits(103, 3, seed=5)
    probs = softmax(z)
    conf, correct = M.top_label(probs, y)
    order = np.argsort(conf, kind="stable")
    parts = zip(np.array_split(conf[order], 10), np.array_split(correct[order], 10), strict=True)
    want = sum(len(c) * abs(h.mean() - c.mean()) for c, h in parts) / 103
    assert M.adaptive_calibration_error(probs, y, n_bins=10) == pytest.approx(want, abs=1e-12)


def test_classwise_ece_hand_computed():
    probs = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    labels = np.array([0, 2, 2])
    # 2 bins (0,.5], (.5,1]. class 0: scores .7 (y1) | .2 .1 (y0): |1-.7| + |0-.3| = .6
    # class 1: .2 .5 .1 all low, y 0: .8; class 2: .1 .3 low (y 0,1): |1-.4| = .6; .8 high y1: .2
    want = np.array([0.6, 0.8, 0.8]) / 3
    got = M.classwise_ece_per_class(probs, labels, n_bins=2)
    np.testing.assert_allclose(got, want)
    assert M.classwise_ece(probs, labels, n_bins=2) == pytest.approx(want.mean())


def test_nll_and_accuracy_by_hand():
    probs = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]])
    labels = np.array([0, 1, 1])
    want = -(np.log(0.5) + np.log(0.1) + np.log(0.8)) / 3
    assert M.negative_log_likelihood(probs, labels) == pytest.approx(want)
    assert M.accuracy(probs, labels) == pytest.approx(2 / 3)  # a tie goes to class 0
    zero = np.array([[1.0, 0.0]])
    assert M.negative_log_likelihood(zero, np.array([1]), eps=1e-8) == pytest.approx(-np.log(1e-8))


# --- reference implementations ---------------------------------------------------------------


@pytest.mark.parametrize("n_bins", [1, 5, 10, 15])
def test_ece_and_mce_match_torchmetrics(n_bins):
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.classification")
    z, y = make_logits(800, 5, seed=n_bins)
    probs = softmax(z)
    probs[:40] = np.eye(5)[y[:40]]  # confidences of exactly 1.0, right and wrong
    probs[40:50] = np.eye(5)[(y[40:50] + 1) % 5]
    p_t, y_t = torch.from_numpy(probs), torch.from_numpy(y)
    for norm, ours in (
        ("l1", M.expected_calibration_error(probs, y, n_bins=n_bins, edges="torchmetrics")),
        ("max", M.maximum_calibration_error(probs, y, n_bins=n_bins, edges="torchmetrics")),
    ):
        ref = tm.multiclass_calibration_error(p_t, y_t, num_classes=5, n_bins=n_bins, norm=norm)
        assert ours == pytest.approx(float(ref), abs=1e-6)  # torchmetrics sums in float32


def test_binned_reliability_matches_sklearn_calibration_curve():
    from sklearn.calibration import calibration_curve

    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.random(300), np.linspace(0, 1, 11)])  # edges exactly
    outcomes = (rng.random(scores.size) < scores**1.5).astype(int)
    bins = M.binned_reliability(scores, outcomes, n_bins=10)
    full = bins.counts > 0
    prob_true, prob_pred = calibration_curve(outcomes, scores, n_bins=10, strategy="uniform")
    np.testing.assert_allclose(bins.accuracy[full], prob_true, atol=1e-12)
    np.testing.assert_allclose(bins.confidence[full], prob_pred, atol=1e-12)


def test_brier_and_nll_match_sklearn_and_torch():
    torch = pytest.importorskip("torch")
    from sklearn.metrics import brier_score_loss, log_loss

    z, y = make_logits(500, 6, seed=9)
    probs = softmax(z)
    assert M.brier_score(probs, y) == pytest.approx(
        brier_score_loss(y, probs, labels=list(range(6)), scale_by_half=False), abs=1e-12
    )
    assert M.negative_log_likelihood(probs, y) == pytest.approx(
        log_loss(y, probs, labels=list(range(6))), abs=1e-10
    )
    ref = torch.nn.functional.cross_entropy(torch.from_numpy(z * 7.0), torch.from_numpy(y))
    got = M.negative_log_likelihood(softmax(z * 7.0), y, logits=z * 7.0)
    assert got == pytest.approx(float(ref), abs=1e-10)


def test_smooth_ece_matches_the_continuous_definition_and_relplot():
    relplot = pytest.importorskip("relplot")
    z, y = make_logits(400, 3, seed=11)
    probs = softmax(z)
    conf, correct = M.top_label(probs, y)
    value = M.smooth_ece(probs, y)
    # the fixed point: smECE at its own bandwidth
    assert M.smooth_ece(probs, y, sigma=value) == pytest.approx(value, abs=1e-5)
    # the continuous definition, every reflection of the Gaussian, integrated on a fine grid
    for sigma in (0.02, 0.1, value, 0.4):
        t = np.linspace(0.0, 1.0, 4001)
        kernel = np.zeros((t.size, conf.size))
        for m in range(-3, 4):
            for s in (conf + 2 * m, -conf + 2 * m):
                kernel += np.exp(-0.5 * ((t[:, None] - s[None, :]) / sigma) ** 2)
        kernel /= sigma * np.sqrt(2 * np.pi)
        r = np.abs(kernel @ (correct - conf) / conf.size)
        exact = float(np.sum((r[1:] + r[:-1]) / 2) * (t[1] - t[0]))
        assert M.smooth_ece(probs, y, sigma=sigma) == pytest.approx(exact, abs=1e-4)
    # relplot searches the bandwidth to 2^-10 only
    assert value == pytest.approx(relplot.smECE(conf, correct), abs=3e-3)


def test_smooth_ece_of_a_one_sided_model_is_the_mean_gap():
    probs, labels = two_class([0.9] * 50 + [0.8] * 50, [1] * 60 + [0] * 40)
    assert M.smooth_ece(probs, labels) == pytest.approx(0.85 - 0.6, abs=1e-6)


# --- settings refused --------------------------------------------------------------------------


def test_more_bins_than_samples_and_bad_settings_are_refused():
    probs, labels = two_class([0.6, 0.7, 0.8], [1, 0, 1])
    with pytest.raises(ValueError, match="3 samples but 15 bins"):
        M.expected_calibration_error(probs, labels)
    with pytest.raises(ValueError, match="3 samples but 4 bins"):
        M.adaptive_calibration_error(probs, labels, n_bins=4)
    with pytest.raises(ValueError, match="positive integer"):
        M.expected_calibration_error(probs, labels, n_bins=0)
    with pytest.raises(ValueError, match="edge policy"):
        M.expected_calibration_error(probs, labels, n_bins=2, edges="closed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ACE variant"):
        M.adaptive_calibration_error(probs, labels, n_bins=2, variant="x")  # type: ignore[arg-type]


@pytest.mark.parametrize("n_bins", [3, 10, 15, 20])
def test_bin_index_equals_searchsorted_at_and_around_every_edge(n_bins):
    from medibench.calibration._binning import bin_index

    e = np.linspace(0, 1, n_bins + 1)
    x = np.concatenate(
        [e, np.nextafter(e, 2), np.nextafter(e, -1), np.random.default_rng(0).random(500)]
    )
    x = np.clip(x, 0, 1)
    assert bin_index(x, n_bins, "right")[0].tolist() == np.searchsorted(e[1:-1], x, "left").tolist()
    assert bin_index(x, n_bins, "left")[0].tolist() == np.searchsorted(e[1:-1], x, "right").tolist()
    tm = np.searchsorted(e, x, "right") - 1
    assert bin_index(x, n_bins, "torchmetrics")[0].tolist() == tm.tolist()


def test_equal_mass_ties_across_a_boundary_keep_input_order():
    rng = np.random.default_rng(2)
    conf = rng.choice([0.55, 0.7, 0.8, 0.95], size=97)
    correct = (rng.random(97) < 0.7).astype(float)
    probs = np.stack([conf, 1 - conf], axis=1)
    labels = np.where(correct == 1, 0, 1)
    order = np.argsort(conf, kind="stable")
    parts = zip(np.array_split(conf[order], 7), np.array_split(correct[order], 7), strict=True)
    want = sum(len(c) * abs(h.mean() - c.mean()) for c, h in parts) / 97
    assert M.adaptive_calibration_error(probs, labels, n_bins=7) == pytest.approx(want, abs=1e-12)
