"""``mvcbench-dassl@paper`` and ``mvcbench-vl@paper`` against re-implementations of MVC-Bench's
two evaluators, written here the slow way (per-sample loops, pandas group-bys, torch and
scikit-learn where the official code calls them), one quirk per test (issue 28)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import softmax as scipy_softmax
from sklearn.preprocessing import KBinsDiscretizer

from medibench.calibration import as_predictions, load_predictions, score, softmax
from medibench.calibration.protocols import MVCBENCH_DASSL, load_calibration_protocol
from tests.calibration.conftest import make_logits

pytestmark = pytest.mark.filterwarnings("ignore:Bins whose width are too small")


# --- the official functions, in our words ------------------------------------------------------
def ref_dassl_probs(scores):
    """Dassl ``logits_to_probs``: torch's allclose test; clamp (no renormalising) or softmax."""
    t = torch.as_tensor(np.asarray(scores, dtype=np.float64))
    sums = t.sum(dim=1)
    probable = bool(torch.all(t >= -1e-7)) and torch.allclose(
        sums, torch.ones_like(sums), atol=1e-4, rtol=1e-4
    )
    return (t.clamp(0.0, 1.0) if probable else torch.softmax(t, dim=1)).numpy()


def ref_vl_probs(scores):
    """``ensure_probability_matrix``: clip and divide by the row sum, or a stable softmax."""
    s = np.asarray(scores, dtype=np.float64)
    if np.all(s >= -1e-8) and np.allclose(s.sum(axis=1), 1.0, atol=1e-4, rtol=1e-4):
        p = np.clip(s, 0.0, 1.0)
        return p / np.clip(p.sum(axis=1, keepdims=True), 1e-12, None)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / np.clip(e.sum(axis=1, keepdims=True), 1e-12, None)


def ref_ece_loss(n_bins, conf, correct):
    """Dassl ``ECE_Loss``: torch float32 edges, first bin with ``low < conf <= up``."""
    edges = torch.linspace(0, 1, n_bins + 1)
    count, hits, total_conf = [0] * n_bins, [0.0] * n_bins, [0.0] * n_bins
    for c, ok in zip(conf.tolist(), correct.tolist(), strict=True):
        for j in range(n_bins):
            if edges[j].item() < c <= edges[j + 1].item():
                count[j] += 1
                hits[j] += ok
                total_conf[j] += c
                break
    return sum(
        abs(hits[j] / count[j] - total_conf[j] / count[j]) * count[j] / len(conf)
        for j in range(n_bins)
        if count[j]
    )


def ref_vl_ece(conf, correct, n_bins):
    """``tools/metrics.py`` ``ECE``: digitize - 1 for the statistics, histogram for weights."""
    edges = np.linspace(0, 1, n_bins + 1)
    which = np.digitize(conf, edges) - 1
    gaps = []
    for b in range(n_bins):
        sel = which == b
        gaps.append(abs(correct[sel].mean() - conf[sel].mean()) if sel.any() else 0.0)
    return float(np.sum(np.histogram(conf, edges)[0] / len(conf) * np.array(gaps)))


def _grouped(df, column="bin"):
    g = df.groupby(column)
    return np.abs(g["correct"].mean() - g["conf"].mean()) * g["conf"].count() / len(df)


def ref_mce(conf, correct, n_bins=10):
    df = pd.DataFrame({"conf": conf, "correct": correct})
    inner = np.linspace(0, 1, n_bins + 1)[1:-1]
    df["bin"] = df["conf"].apply(lambda v: np.digitize(v, inner))
    return float(_grouped(df).max())


def ref_ace(conf, correct, n_bins=10, *, cut):
    """``AdaptiveECE``: the VL one cuts the bins to the distinct confidences; Dassl's does not."""
    conf = np.clip(conf, 0, 1) if cut else conf
    if cut:
        distinct = min(len(conf), np.unique(conf).size)
        if distinct <= 1:
            return float(abs(correct.mean() - conf.mean()))
        n_bins = int(max(2, min(n_bins, distinct)))
    binner = KBinsDiscretizer(
        n_bins=n_bins, encode="ordinal", strategy="quantile", quantile_method="linear"
    )
    df = pd.DataFrame({"conf": conf, "correct": correct})
    df["bin"] = binner.fit_transform(conf[:, None]).astype(int).ravel()
    return float(_grouped(df).sum())


def ref_binary_ece(scores, targets, n_bins):
    ids = np.digitize(scores, np.linspace(0.0, 1.0, n_bins + 1)[1:-1], right=True)
    return sum(
        (ids == b).sum() / len(scores) * abs(targets[ids == b].mean() - scores[ids == b].mean())
        for b in range(n_bins)
        if (ids == b).any()
    )


def ref_tables(probs, labels, n_bins):
    """The two class-wise tables, their summaries and the Brier values."""
    pred = probs.argmax(axis=1)
    conf = probs[np.arange(len(labels)), pred]
    onehot = np.eye(probs.shape[1])[labels]
    per_sample = np.sum((probs - onehot) ** 2, axis=1)
    rows = []
    for c in range(probs.shape[1]):
        m = labels == c
        rows.append(
            {
                "n": int(m.sum()),
                "top": ref_binary_ece(conf[m], (pred[m] == c).astype(float), n_bins)
                if m.any()
                else np.nan,
                "ovr": ref_binary_ece(probs[:, c], m.astype(float), n_bins),
                "brier": per_sample[m].mean() if m.any() else np.nan,
            }
        )
    df = pd.DataFrame(rows)
    valid = df[df["n"] > 0]
    out = {"brier": per_sample.mean(), "brier_norm": per_sample.mean() / probs.shape[1]}
    for key, name in (("top", "toplabel_ece"), ("ovr", "ovr_ece")):
        out[f"{name}_macro"] = valid[key].mean()
        out[f"{name}_weighted"] = np.average(valid[key], weights=valid["n"])
        out[f"{name}_max"] = valid[key].max()
    out["classwise_brier_macro"] = np.nanmean(df["brier"])
    return out


def _official(path, scores, labels, *, from_logits=False):
    """Every value of one evaluator, the official way: the VL trainer softmaxes the logits
    (``scipy.special.softmax``) before ``evaluate``, whose ``ensure_probability_matrix`` divides
    the rows by their sums; its Brier and class-wise calls divide them again."""
    bins = {"dassl": (20, 10, 10, 20), "vl": (10, 10, 10, 10)}[path]
    if path == "dassl":
        probs = again = ref_dassl_probs(scores)
    else:
        probs = ref_vl_probs(scipy_softmax(scores, axis=1) if from_logits else scores)
        again = ref_vl_probs(probs)
    pred = probs.argmax(axis=1)
    conf = probs[np.arange(len(labels)), pred]
    correct = (pred == labels).astype(float)
    ece = ref_ece_loss(bins[0], conf, correct) if path == "dassl" else ref_vl_ece(conf, correct, 10)
    return {
        "accuracy": correct.mean(),
        "ece": ece,
        "mce": ref_mce(conf, correct, bins[1]),
        "ace": ref_ace(conf, correct, bins[2], cut=path == "vl"),
        **ref_tables(again, labels, bins[3]),
    }


def _ours(spec, labels, **scores):
    return score(as_predictions(labels, **scores), spec, n_resamples=0)


# --- every value, both paths --------------------------------------------------------------------
@pytest.mark.parametrize("path", ["dassl", "vl"])
@pytest.mark.parametrize("seed", [0, 1])
def test_each_path_matches_its_evaluator(path, seed):
    z, y = make_logits(400, 5, seed=seed)
    y[y == 4] = 3  # class 4 has no sample: the summaries leave it out
    for given in ({"logits": z}, {"probs": softmax(z)}):
        raw = given.get("logits", given.get("probs"))
        ours = _ours(f"mvcbench-{path}@paper", y, **given)
        ref = _official(path, raw, y, from_logits="logits" in given)
        for name, value in ref.items():
            assert ours[name] == pytest.approx(value, abs=1e-12), name
        assert ours["classwise_ece"] == ours["ovr_ece_macro"]


def test_mvcbench_paper_is_the_dassl_evaluator():
    # MVC-Bench's train.py leaves TEST.EVALUATOR at Dassl's Classification (the patched one)
    assert load_calibration_protocol("mvcbench@paper") is MVCBENCH_DASSL
    assert load_calibration_protocol("mvcbench").spec == "mvcbench-dassl@paper"
    z, y = make_logits(120, 3, seed=3)
    assert _ours("mvcbench@paper", y, logits=z)["protocol"] == "mvcbench-dassl@paper"


# --- the quirks, one each ------------------------------------------------------------------------
def test_vl_renormalisation_moves_a_confidence_across_a_bin_edge():
    # rows summing to 1 - 1.1e-5 (inside the 1e-4 test): 0.6 - 1e-6 becomes 0.6 + 5.6e-6
    row = [0.6 - 1e-6, 0.2, 0.2 - 1e-5]
    probs = np.array([row, [0.2, 0.7, 0.1], [0.1, 0.2, 0.7], [0.45, 0.3, 0.25]] * 5)
    y = np.array([1, 1, 2, 0] * 5)
    vl = _ours("mvcbench-vl@paper", y, probs=probs)
    assert vl["ece"] == pytest.approx(_official("vl", probs, y)["ece"], abs=1e-12)
    conf = probs.max(axis=1)
    plain = ref_vl_ece(conf, (probs.argmax(axis=1) == y).astype(float), 10)
    assert vl["ece"] != pytest.approx(plain, abs=1e-3)  # without the division it stays below
    dassl = _ours("mvcbench-dassl@paper", y, probs=probs)  # clamped, not renormalised
    assert dassl["ece"] == pytest.approx(_official("dassl", probs, y)["ece"], abs=1e-12)


# Rows of tenths sit on the bin edges: the first division lifts 0.4 to 0.4 + 1 ulp (bin
# (0.4, 0.5]), the second brings it back to 0.4 - 1 ulp (bin (0.3, 0.4]).
EDGE_ROWS = np.array(
    [
        [0.4, 0.3, 0.2, 0.1],
        [0.5, 0.2, 0.2, 0.1],
        [0.1, 0.5, 0.3, 0.1],
        [0.3, 0.4, 0.2, 0.1],
        [0.35, 0.25, 0.3, 0.1],
    ]
)
EDGE_LABELS = np.array([1, 1, 0, 0, 0])


def test_vl_divides_twice_in_its_brier_and_class_wise_calls():
    probs, y = np.repeat(EDGE_ROWS, 4, axis=0), np.repeat(EDGE_LABELS, 4)
    once = ref_vl_probs(probs)
    assert once[0, 0] > 0.4 >= ref_vl_probs(once)[0, 0]  # one ulp each way
    ours, ref = _ours("mvcbench-vl@paper", y, probs=probs), _official("vl", probs, y)
    for name, value in ref.items():
        assert ours[name] == pytest.approx(value, abs=1e-12), name
    single = ref_tables(once, y, 10)  # the tables on rows divided once are far off
    assert (ref["ovr_ece_macro"], single["ovr_ece_macro"]) == pytest.approx((0.45, 0.53))
    assert (ref["toplabel_ece_macro"], single["toplabel_ece_macro"]) == pytest.approx(
        (0.35, 0.29 / 0.6)
    )


def test_vl_softmaxes_logits_then_divides_by_the_sum():
    # softmax(log [.6, .3, .1]) is 0.6, one ulp under the edge 6 * 0.1 = 0.6000000000000001;
    # divided by its sum it is on the edge: ECE's [lo, hi) bins put it with the 0.65 rows
    rows = np.log([[0.6, 0.3, 0.1]] * 10 + [[0.65, 0.2, 0.15]] * 10)
    y = np.array([0] * 10 + [1] * 10)
    assert scipy_softmax(rows, axis=1)[0, 0] < np.linspace(0, 1, 11)[6]
    ours = _ours("mvcbench-vl@paper", y, logits=rows)
    ref = _official("vl", rows, y, from_logits=True)
    for name, value in ref.items():
        assert ours[name] == pytest.approx(value, abs=1e-12), name
    # one bin |10 - (6 + 6.5)| / 20, not two: (4 + 6.5) / 20
    assert ours["ece"] == pytest.approx(0.125, abs=1e-12)
    assert ours["mce"] == pytest.approx(0.125, abs=1e-12)


def test_dassl_ece_bins_with_float32_edges():
    # 0.35 is above the float32 edge 0.3499999940..., so ECE_Loss puts it in (0.35, 0.40]
    assert float(np.float32(0.35)) < 0.35 and torch.linspace(0, 1, 21)[7].item() < 0.35
    conf = np.array([0.35] * 18 + [0.38] * 12)
    correct = np.array([1.0] * 18 + [0.0] * 12)
    rest = (1 - conf) / 2
    probs = np.stack([conf, rest + 0.01, rest - 0.01], axis=1)
    y = np.where(correct == 1, 0, 1)
    ours = _ours("mvcbench-dassl@paper", y, probs=probs)
    assert ours["ece"] == pytest.approx(ref_ece_loss(20, conf, correct), abs=1e-12)
    # with float64 edges 0.35 would be alone in (0.30, 0.35]: |1 - .35| * .6 + |0 - .38| * .4
    assert ours["ece"] == pytest.approx(abs(0.6 - (6 * 0.35 + 4 * 0.38) / 10), abs=1e-12)
    assert ours["ece"] != pytest.approx(0.65 * 0.6 + 0.38 * 0.4, abs=1e-3)


def test_dassl_adaptive_ece_keeps_ten_bins_where_vl_cuts_them():
    rng = np.random.default_rng(7)  # four distinct confidences, most of them 0.55
    conf = rng.choice([0.55, 0.62, 0.7, 0.91], size=60, p=[0.6, 0.2, 0.1, 0.1])
    correct = (rng.random(60) < conf).astype(float)
    probs = np.stack([conf, 1 - conf], axis=1)
    y = np.where(correct == 1, 0, 1)
    dassl = _ours("mvcbench-dassl@paper", y, probs=probs)["ace"]
    vl = _ours("mvcbench-vl@paper", y, probs=probs)["ace"]
    assert dassl == pytest.approx(ref_ace(conf, correct, 10, cut=False), abs=1e-12)
    assert vl == pytest.approx(ref_ace(conf, correct, 10, cut=True), abs=1e-12)
    assert dassl != pytest.approx(vl, abs=1e-4)


def test_mce_is_count_weighted_on_both_paths():
    conf = np.array([0.95] * 2 + [0.65] * 18)
    correct = np.array([0.0] * 2 + [1.0] * 9 + [0.0] * 9)
    probs = np.stack([conf, 1 - conf], axis=1)
    y = np.where(correct == 1, 0, 1)
    for path in ("dassl", "vl"):
        got = _ours(f"mvcbench-{path}@paper", y, probs=probs)["mce"]
        # the top bin's gap .95 is the largest, but weighted by 2/20 it loses to .15 * 18/20
        assert got == pytest.approx(ref_mce(conf, correct), abs=1e-12) == pytest.approx(0.135)


def test_half_precision_probabilities_need_the_tolerance_which_is_noted(tmp_path):
    z, y = make_logits(300, 4, seed=9)
    p16 = softmax(z).astype(np.float16)
    assert np.abs(p16.astype(np.float64).sum(axis=1) - 1).max() > 2e-4  # the evaluators softmax
    path = tmp_path / "coop_fp16.npz"
    np.savez(path, probs=p16, labels=y)
    with pytest.raises(ValueError, match="tolerance 0.0001"):
        load_predictions(path)
    pred = load_predictions(path, atol=2e-3)
    p = p16.astype(np.float64)
    for spec in ("mvcbench-dassl@paper", "mvcbench-vl@paper"):
        res = score(pred, spec, n_resamples=0, prob_tolerance=2e-3)
        note = next(n for n in res["notes"] if "--prob-tolerance 0.002" in n)
        assert "off by up to 0.000305" in note and "divided by its sum" in note
        assert "never softmaxed a second time" in note
        path_name = spec.split("@")[0].removeprefix("mvcbench-")
        # the rows divided by their sums are the softmax of log(p16): the evaluator on those
        on_logits = _official(path_name, np.log(p), y, from_logits=True)
        for name, value in on_logits.items():
            assert res[name] == pytest.approx(value, abs=1e-12), (spec, name)
        # and within fp16's rounding of the evaluator on the logits they were saved from
        original = _official(path_name, z, y, from_logits=True)
        for name, value in original.items():
            assert res[name] == pytest.approx(value, abs=1e-5), (spec, name)
        # a second softmax (what the evaluator does to these rows) is far off
        assert res["ece"] != pytest.approx(_official(path_name, p, y)["ece"], abs=0.05)
    plain = score(pred, "calibration@1", n_resamples=0, prob_tolerance=2e-3)
    assert any("each metric uses them as saved" in n for n in plain["notes"])


def test_the_tolerance_given_to_score_is_checked():
    z, y = make_logits(40, 3, seed=4)
    p = softmax(z)
    p[5] *= 1.004
    pred = as_predictions(y, probs=p, atol=1e-2)
    with pytest.raises(ValueError, match=r"row 5: probabilities sum to 1\.004.*--prob-tolerance"):
        score(pred, "mvcbench-vl@paper", n_resamples=0, prob_tolerance=1e-3)


def test_half_precision_intervals_are_those_of_the_renormalised_rows():
    z, y = make_logits(120, 3, seed=5)
    p16 = softmax(z).astype(np.float16).astype(np.float64)
    got = score(
        as_predictions(y, probs=p16, atol=2e-3),
        "mvcbench-vl@paper",
        n_resamples=40,
        prob_tolerance=2e-3,
    )
    want = score(
        as_predictions(y, probs=p16 / p16.sum(axis=1, keepdims=True)),
        "mvcbench-vl@paper",
        n_resamples=40,
    )
    for name, (low, high) in want["ci"].items():
        assert got["ci"][name] == pytest.approx([low, high], abs=1e-12), name


def test_a_file_saved_by_the_two_trainer_lines_is_read(tmp_path):
    # docs/calibration.md: what the two lines added to Dassl's SimpleTrainer.test() write
    z, y = make_logits(64, 3, seed=2)
    outputs = [torch.as_tensor(z[i : i + 16]).half() for i in range(0, 64, 16)]  # CoOp fp16
    labels = [torch.as_tensor(y[i : i + 16]) for i in range(0, 64, 16)]
    saved = [(o.float().cpu(), lab.cpu()) for o, lab in zip(outputs, labels, strict=True)]
    np.savez(
        tmp_path / "predictions_test.npz",
        logits=torch.cat([o for o, _ in saved]).numpy(),
        labels=torch.cat([lab for _, lab in saved]).numpy(),
    )
    pred = load_predictions(tmp_path / "predictions_test.npz")
    assert pred.logits is not None and pred.logits.dtype == np.float64 and pred.n == 64
    res = score(pred, "mvcbench@paper", n_resamples=0)
    ref = _official("dassl", torch.cat([o for o, _ in saved]).numpy(), y, from_logits=True)
    assert res["ece"] == pytest.approx(ref["ece"], abs=1e-12)
