"""``mvcbench-vl@paper`` against a re-implementation of MVC-Bench's ``tools/metrics.py``
(every metric at one bin count, ``ECE_BINS``; here 20 through ``n_bins``, 10 for MCE and ACE
where the test says so; tests/calibration/test_mvcbench_paths.py has both evaluators).

The ``ref_*`` functions below follow the official code step by step (per-bin loops, pandas
group-bys, scikit-learn's KBinsDiscretizer) so that every quirk is reproduced the slow way; the
protocol computes the same values with vectorised code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medibench.calibration import as_predictions, score, softmax
from medibench.calibration.metrics import expected_calibration_error, top_label
from tests.calibration.conftest import make_logits

pytestmark = pytest.mark.filterwarnings("ignore:Bins whose width are too small")

# --- the official metrics, re-implemented --------------------------------------------------------


def ref_ece(conf, pred, gt, conf_bin_num=10):
    edges = np.linspace(0, 1, conf_bin_num + 1)
    which = np.digitize(conf, edges) - 1  # 1.0 -> conf_bin_num: in no bin below
    accs, confs = [], []
    for b in range(conf_bin_num):
        sel = which == b
        accs.append(np.mean(gt[sel] == pred[sel]) if sel.sum() > 0 else 0)
        confs.append(np.mean(conf[sel]) if sel.sum() > 0 else 0)
    weight = np.histogram(conf, edges)[0] / len(conf)  # ... but in the last bin's weight
    return float(np.sum(weight * np.abs(np.array(confs) - np.array(accs))))


def _grouped_gaps(df):
    acc = df.groupby("bin")["correct"].mean()
    mean_conf = df.groupby("bin")["conf"].mean()
    count = df.groupby("bin")["conf"].count()
    return np.abs(acc - mean_conf) * count / len(df)


def ref_mce(conf, pred, gt, conf_bin_num=10):
    df = pd.DataFrame({"ys": gt, "conf": conf, "pred": pred})
    df["correct"] = (df.pred == df.ys).astype(int)
    inner = np.linspace(0, 1, conf_bin_num + 1)[1:-1]
    df["bin"] = df["conf"].apply(lambda v: np.digitize(v, inner))
    return float(_grouped_gaps(df).max())


def ref_adaptive_ece(conf, pred, gt, conf_bin_num=10, quantile_method=None):
    from sklearn.preprocessing import KBinsDiscretizer

    conf = np.clip(np.asarray(conf, dtype=float), 0.0, 1.0)
    limit = min(len(conf), np.unique(conf).size)
    if limit <= 1:
        return float(abs(np.mean(pred == gt) - conf.mean()))
    n_bins = int(max(2, min(conf_bin_num, limit)))
    options = {} if quantile_method is None else {"quantile_method": quantile_method}
    binner = KBinsDiscretizer(n_bins=n_bins, encode="ordinal", strategy="quantile", **options)
    df = pd.DataFrame({"ys": gt, "conf": conf, "pred": pred})
    df["bin"] = binner.fit_transform(conf[:, None]).astype(int).ravel()
    df["correct"] = (df["pred"] == df["ys"]).astype(int)
    return float(_grouped_gaps(df).sum())


def ref_binary_ce(scores, targets, conf_bin_num=10):
    scores = np.clip(scores, 0.0, 1.0)
    ids = np.digitize(scores, np.linspace(0.0, 1.0, conf_bin_num + 1)[1:-1], right=True)
    total = 0.0
    for b in range(conf_bin_num):
        sel = ids == b
        if sel.any():
            total += sel.sum() / len(scores) * abs(targets[sel].mean() - scores[sel].mean())
    return total


def ref_ovr_classwise_macro(probs, labels, conf_bin_num=10):
    rows = []
    for c in range(probs.shape[1]):
        rows.append(
            {
                "n": int((labels == c).sum()),
                "ovr": ref_binary_ce(probs[:, c], (labels == c).astype(float), conf_bin_num),
            }
        )
    df = pd.DataFrame(rows)
    return float(df[df["n"] > 0]["ovr"].mean())


def ref_brier(probs, labels):
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(labels)), labels] = 1.0
    return float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))


def ref_logged_nll(logits, labels):
    return float(-np.mean(logits[np.arange(len(labels)), labels]))


# --- tests ---------------------------------------------------------------------------------------


def predictions_with_edges(seed: int):
    z, y = make_logits(500, 5, seed=seed)
    z[:25] = 0.0
    z[np.arange(25), y[:25]] = 80.0  # softmax gives exactly 1.0: right ...
    z[25:35] = 0.0
    z[np.arange(25, 35), (y[25:35] + 1) % 5] = 80.0  # ... and wrong
    probs = softmax(z)
    probs[35:45] = 0.0  # top-label confidences exactly on bin edges (0.5, 0.6, 0.7, 0.8, 0.9)
    for i, c in enumerate(np.repeat([0.5, 0.6, 0.7, 0.8, 0.9], 2)):
        probs[35 + i, y[35 + i]] = c
        probs[35 + i, (y[35 + i] + 1) % 5] = 1.0 - c
    return probs, z, y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mvcbench_paper_matches_the_official_metrics(seed):
    probs, z, y = predictions_with_edges(seed)
    conf, _ = top_label(probs, y)
    assert (conf == 1.0).sum() == 35 and (conf == 0.5).sum() == 2
    pred = probs.argmax(axis=1)
    res = score(as_predictions(y, probs=probs), "mvcbench-vl@paper", n_resamples=0, n_bins=20)
    at10 = score(as_predictions(y, probs=probs), "mvcbench-vl@paper", n_resamples=0)
    assert res["protocol"] == "mvcbench-vl@paper" and at10["settings"]["ece_bins"] == 10
    assert res["settings"]["ece_bins"] == 20 and res["settings"]["mce_bins"] == 20
    with_logits = score(as_predictions(y, logits=z), "mvcbench-vl@paper", n_resamples=0)
    assert res["accuracy"] == pytest.approx(np.mean(pred == y))
    assert res["ece"] == pytest.approx(ref_ece(conf, pred, y, 20), abs=1e-12)
    assert at10["mce"] == pytest.approx(ref_mce(conf, pred, y, 10), abs=1e-12)
    assert at10["ace"] == pytest.approx(
        ref_adaptive_ece(conf, pred, y, 10, quantile_method="linear"), abs=1e-12
    )
    assert res["classwise_ece"] == pytest.approx(ref_ovr_classwise_macro(probs, y, 20), abs=1e-12)
    assert res["brier"] == pytest.approx(ref_brier(probs, y), abs=1e-12)
    assert with_logits["nll"] == pytest.approx(ref_logged_nll(z, y), abs=1e-12)


def test_kbins_quantile_default_changed_in_sklearn_1_9():
    # The official ACE depends on the installed scikit-learn; the protocol declares "linear".
    import sklearn

    rng = np.random.default_rng(4)
    conf = np.round(rng.uniform(0.4, 1.0, 37), 2)
    pred = np.zeros(37, dtype=int)
    gt = (rng.random(37) < 0.3).astype(int)
    linear = ref_adaptive_ece(conf, pred, gt, 10, quantile_method="linear")
    averaged = ref_adaptive_ece(conf, pred, gt, 10, quantile_method="averaged_inverted_cdf")
    assert linear != pytest.approx(averaged, abs=1e-6)
    if tuple(int(v) for v in sklearn.__version__.split(".")[:2]) >= (1, 9):
        assert ref_adaptive_ece(conf, pred, gt, 10) == pytest.approx(averaged)


def test_the_one_point_zero_quirk_by_hand():
    # Two samples in the top bin: conf 1.0 (right) and 0.97 (wrong).
    probs = np.array([[1.0, 0.0], [0.97, 0.03], [0.6, 0.4], [0.55, 0.45]] * 5)
    labels = np.array([0, 1, 0, 0] * 5)
    pred = as_predictions(labels, probs=probs)
    paper = score(pred, "mvcbench-vl@paper", n_resamples=0, n_bins=20)
    # official: the top bin's statistics come from 0.97 alone (acc 0, conf .97) but its weight
    # counts both: 2/4 * .97; the (.55, .6) bins are exact: |1 - .6| and |1 - .55|, 1/4 each
    assert paper["ece"] == pytest.approx((2 * 0.97 + 0.4 + 0.45) / 4)
    # right-closed ECE: |1 - 1.97| / 4 in the top bin
    assert expected_calibration_error(probs, labels, n_bins=20) == pytest.approx(
        (0.97 + 0.4 + 0.45) / 4
    )


def test_official_nll_on_probabilities_only_is_noted():
    z, y = make_logits(200, 3, seed=8)
    res = score(as_predictions(y, probs=softmax(z)), "mvcbench-vl@paper", n_resamples=0)
    assert res["nll"] == pytest.approx(ref_logged_nll(np.log(softmax(z)), y))
    assert any("log-probabilities" in note for note in res["notes"])


def test_classwise_ece_leaves_out_classes_without_samples():
    probs, z, y = predictions_with_edges(5)
    y = np.where(y == 4, 3, y)  # class 4 has no sample: the official macro skips it
    res = score(as_predictions(y, probs=probs), "mvcbench-vl@paper", n_resamples=0, n_bins=20)
    assert res["classwise_ece"] == pytest.approx(ref_ovr_classwise_macro(probs, y, 20), abs=1e-12)
    ours = score(as_predictions(y, probs=probs), "calibration@1", n_bins=20, n_resamples=0)
    assert ours["classwise_ece"] != pytest.approx(res["classwise_ece"], abs=1e-6)
