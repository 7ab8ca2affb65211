"""Post-hoc calibrators: fitted values against closed forms and references, saved and reloaded,
and the bad inputs (validation split missing, one class only)."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.calibration import as_predictions, softmax
from medibench.calibration.calibrators import (
    apply_calibrator,
    fit_calibrator,
    load_calibrator,
    save_calibrator,
)
from medibench.calibration.metrics import expected_calibration_error, negative_log_likelihood
from tests.calibration.conftest import make_logits


def split(n=2000, c=4, seed=0, temper=0.5):
    z, y = make_logits(n, c, seed=seed, temper=temper)
    half = n // 2
    return (
        as_predictions(y[:half], logits=z[:half], source="val"),
        as_predictions(y[half:], logits=z[half:], source="test"),
    )


def test_temperature_recovers_the_generating_temperature_and_minimises_nll():
    val, test = split(temper=0.5)  # labels drawn from softmax(0.5 z): T = 2
    cal = fit_calibrator(val, "temperature")
    t = cal.params["temperature"]
    assert t == pytest.approx(2.0, rel=0.15)
    nll = [
        negative_log_likelihood(softmax(val.logits / s), val.labels)
        for s in (t * 0.97, t, t * 1.03)
    ]
    assert nll[1] < nll[0] and nll[1] < nll[2]  # a minimum
    after = apply_calibrator(cal, test)
    np.testing.assert_allclose(after.probs, softmax(test.logits / t))
    assert expected_calibration_error(after.probs, after.labels) < 0.5 * expected_calibration_error(
        test.probs, test.labels
    )
    assert cal.nll_after < cal.nll_before


def test_temperature_matches_torch_lbfgs():
    torch = pytest.importorskip("torch")
    val, _ = split(n=600, seed=4, temper=0.7)
    log_t = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    z, y = torch.from_numpy(val.logits), torch.from_numpy(val.labels)
    opt = torch.optim.LBFGS([log_t], lr=0.5, max_iter=200, tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / log_t.exp(), y)
        loss.backward()
        return loss

    opt.step(closure)
    assert fit_calibrator(val, "temperature").params["temperature"] == pytest.approx(
        float(log_t.detach().exp()), rel=1e-4
    )


@pytest.mark.parametrize("method", ["vector", "matrix"])
def test_scaling_methods_reduce_nll_and_are_seeded(method):
    val, test = split(seed=2)
    a, b = fit_calibrator(val, method, seed=3), fit_calibrator(val, method, seed=3)
    assert a.params == b.params
    assert a.nll_after < fit_calibrator(val, "temperature").nll_before
    temp = fit_calibrator(val, "temperature")
    assert a.nll_after <= temp.nll_after + 1e-6  # a superset of temperature scaling
    w = np.asarray(a.params["weights"])
    assert w.shape == ((4,) if method == "vector" else (4, 4))
    out = apply_calibrator(a, test)
    z = test.logits * w if method == "vector" else test.logits @ w
    np.testing.assert_allclose(out.probs, softmax(z + np.asarray(a.params["bias"])))


def test_histogram_binning_by_hand():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.45, 0.55]])
    val = as_predictions([0, 1, 1, 1], probs=probs)
    cal = fit_calibrator(val, "histogram", n_bins=2)
    # class 0: (0,.5] holds .3,.45 (never class 0) -> 0; (.5,1] holds .9,.8 (one of 2) -> .5
    assert cal.params["values"][0] == [0.0, 0.5]
    assert cal.params["values"][1] == [0.5, 1.0]
    out = apply_calibrator(cal, as_predictions([0], probs=[[0.7, 0.3]]))
    np.testing.assert_allclose(out.probs, [[0.5, 0.5]])  # (.5, .5) renormalised


def test_isotonic_matches_sklearn():
    from sklearn.isotonic import IsotonicRegression

    val, test = split(n=800, c=3, seed=6)
    cal = fit_calibrator(val, "isotonic")
    out = apply_calibrator(cal, test)
    raw = np.stack(
        [
            IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
            .fit(val.probs[:, c], val.labels == c)
            .predict(test.probs[:, c])
            for c in range(3)
        ],
        axis=1,
    )
    np.testing.assert_allclose(out.probs, raw / raw.sum(axis=1, keepdims=True), atol=1e-12)


def test_save_load_round_trip(tmp_path):
    val, test = split(n=400, seed=7)
    cal = fit_calibrator(val, "matrix")
    back = load_calibrator(save_calibrator(cal, tmp_path / "params.json"))
    np.testing.assert_allclose(
        apply_calibrator(back, test).probs, apply_calibrator(cal, test).probs
    )
    (tmp_path / "bad.json").write_text('{"what": 1}')
    with pytest.raises(ValueError, match="not calibrator parameters"):
        load_calibrator(tmp_path / "bad.json")


def test_validation_split_missing_and_one_class():
    with pytest.raises(ValueError, match="no validation split"):
        fit_calibrator(None, "temperature")
    z, y = make_logits(20, 3, seed=1)
    marked = as_predictions(y, logits=z, groups={"split": np.array(["test"] * 20)}, source="p.csv")
    with pytest.raises(ValueError, match="p.csv: the split column has no validation rows"):
        fit_calibrator(marked, "temperature")
    with pytest.raises(ValueError, match="one class only"):
        fit_calibrator(as_predictions(np.zeros(20, int), logits=z), "temperature")
    with pytest.raises(ValueError, match="unknown calibration method"):
        fit_calibrator(marked, "platt")  # type: ignore[arg-type]
    mixed = as_predictions(y, logits=z, groups={"split": np.array(["val", "test"] * 10)})
    assert fit_calibrator(mixed, "temperature").n_val == 10


def test_class_count_mismatch_is_refused():
    val, _ = split(n=200, c=4, seed=1)
    cal = fit_calibrator(val, "temperature")
    with pytest.raises(ValueError, match="3 classes, but the calibrator was fitted on 4"):
        apply_calibrator(cal, as_predictions([0], probs=[[0.2, 0.3, 0.5]]))


def test_before_after_table():
    from medibench.calibration import score
    from medibench.calibration.calibrators import before_after

    val, test = split(n=1000, seed=3)
    cal = fit_calibrator(val, "temperature")
    table = before_after(cal, test)
    assert table["before"]["ece"] == score(test, n_resamples=0)["ece"]
    assert table["after"]["ece"] == score(apply_calibrator(cal, test), n_resamples=0)["ece"]
    assert table["after"]["nll"] < table["before"]["nll"]
