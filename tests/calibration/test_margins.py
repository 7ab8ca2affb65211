"""MVC-Bench-style margin analysis (medibench.calibration.margins, `calibration analyze`):
margins of hand-written logits, group splitting, ECE as `calibration score` computes it,
Spearman as scipy computes it, the report panel, and the bad inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from medibench.calibration import as_predictions, save_predictions, score, softmax
from medibench.calibration.margins import margin_analysis, top_two_margins
from medibench.cli import app

LOGITS = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [5.0, 5.0, 1.0], [-1.0, 0.5, 4.0]])
LABELS = np.array([0, 0, 1, 2])  # rows 0 and 3 right; row 1 wrong; row 2 a tie (argmax 0)


def test_top_two_margins_of_logits_and_of_probabilities():
    pred = as_predictions(LABELS, logits=LOGITS)
    margins, source = top_two_margins(pred)
    assert source == "logits" and margins.tolist() == [1.0, 2.0, 0.0, 3.5]
    # probabilities only: log p_(1) - log p_(2), the same numbers for a softmax
    only = as_predictions(LABELS, probs=softmax(LOGITS))
    margins, source = top_two_margins(only)
    assert source == "log-probabilities"
    assert margins == pytest.approx([1.0, 2.0, 0.0, 3.5], abs=1e-12)
    zero = as_predictions([0, 1], probs=[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]], source="p.npz")
    with pytest.raises(ValueError, match=r"p.npz: row 1: the second-largest probability is 0"):
        top_two_margins(zero)


def test_one_groups_distribution_by_hand():
    result = margin_analysis([as_predictions(LABELS, logits=LOGITS)], n_bins=2, margin_bins=2)
    (g,) = result["groups"]
    assert (g["group"], g["n"], g["margin_source"]) == ("<arrays>", 4, "logits")
    m = g["margin"]
    assert m["mean"] == pytest.approx(1.625) and m["median"] == pytest.approx(1.5)
    assert m["min"] == 0.0 and m["max"] == 3.5
    assert m["quantiles"]["0.25"] == pytest.approx(np.quantile([1, 2, 0, 3.5], 0.25))
    assert result["histogram_edges"] == [0.0, 1.75, 3.5] and m["histogram"] == [2, 2]
    assert g["margin_correct"] == pytest.approx((1.0 + 3.5) / 2)  # rows 0 and 3
    assert g["margin_incorrect"] == pytest.approx((2.0 + 0.0) / 2)
    assert g["accuracy"] == 0.5
    # equal-mass margin bins: {0, 1} and {2, 3.5}; confidence = the top probability
    conf = softmax(LOGITS).max(axis=1)
    low, high = g["margin_bins"]
    assert (low["n"], high["n"]) == (2, 2)
    assert low["confidence"] == pytest.approx(conf[[0, 2]].mean()) and low["accuracy"] == 0.5
    assert high["confidence"] == pytest.approx(conf[[1, 3]].mean()) and high["accuracy"] == 0.5


def _grouped(seed=0, n=240):
    """Predictions of 2 methods x 3 domains whose sharpness (and so margin) differs by group."""
    rng = np.random.default_rng(seed)
    method = np.repeat(["coop", "mcm"], n // 2)
    domain = np.tile(["aptos", "eyepacs", "messidor"], n // 3)
    labels = rng.integers(0, 3, n)
    sharp = 1 + 3 * (method == "coop") + np.searchsorted(["aptos", "eyepacs", "messidor"], domain)
    logits = rng.normal(size=(n, 3)) + 1.5 * np.eye(3)[labels]
    return as_predictions(
        labels, logits=logits * sharp[:, None], groups={"method": method, "domain": domain},
        source="grid.npz",
    )  # fmt: skip


def test_groups_ece_and_spearman_match_score_and_scipy():
    pred = _grouped()
    result = margin_analysis([pred], by=["method", "domain"], n_bins=10)
    scored = score(pred, by=["method", "domain"], n_bins=10, n_resamples=0)["groups"]
    names = [g["group"] for g in result["groups"]]
    assert names == [
        f"{m} / {d}" for m in ("coop", "mcm") for d in ("aptos", "eyepacs", "messidor")
    ]
    margins = top_two_margins(pred)[0]
    for g in result["groups"]:
        key = f"{g['by']['method']}/{g['by']['domain']}"
        assert g["ece"] == scored[key]["ece"] and g["accuracy"] == scored[key]["accuracy"]
        rows = (pred.groups["method"] == g["by"]["method"]) & (
            pred.groups["domain"] == g["by"]["domain"]
        )
        assert g["n"] == rows.sum() and g["margin"]["mean"] == pytest.approx(margins[rows].mean())
        assert sum(g["margin"]["histogram"]) == g["n"] == sum(b["n"] for b in g["margin_bins"])
    x = [g["margin"]["mean"] for g in result["groups"]]
    for key in ("ece", "accuracy"):
        ref = stats.spearmanr(x, [g[key] for g in result["groups"]])
        rel = result["relation"][key]
        assert rel["rho"] == pytest.approx(ref.statistic) and rel["pvalue"] == pytest.approx(
            ref.pvalue
        )
        assert rel["n"] == 6
    # two files: each group is named by its file too; fewer than 3 groups: no correlation
    two = margin_analysis([_grouped(1), _grouped(2)], n_bins=10)
    assert [g["group"] for g in two["groups"]] == ["grid.npz", "grid.npz"]
    assert two["relation"]["ece"]["why"] == "fewer than 3 groups"


def test_the_command_stores_the_analysis_and_the_report_shows_it(tmp_path):
    from medibench.calibration._report import calibration_panel
    from medibench.runs import RunStore

    path = save_predictions(_grouped(), tmp_path / "grid.npz")
    run = tmp_path / "run"
    args = ["calibration", "analyze", str(path), "--by", "domain", "--bins", "10",
            "--json", str(tmp_path / "m.json"), "--out", str(run)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "m.json").read_text())
    assert [g["group"] for g in saved["groups"]] == ["aptos", "eyepacs", "messidor"]
    with RunStore.open_existing(run) as store:
        panel = calibration_panel(store, run)
    assert panel is not None
    (table,) = panel["tables"]
    assert [r[0] for r in table["rows"]] == ["aptos", "eyepacs", "messidor"]
    assert table["rows"][0][4] == f"{saved['groups'][0]['ece']:.4f}"
    assert "Spearman, mean margin vs ece" in table["notes"][0]
    (figure,) = panel["figures"]
    assert figure["svg"].startswith("<svg")


def test_bad_inputs_name_the_file_and_the_columns(tmp_path):
    bare = tmp_path / "bare.csv"
    bare.write_text("label,domain\n0,a\n1,b\n")
    result = CliRunner().invoke(app, ["calibration", "analyze", str(bare)])
    assert result.exit_code == 2
    assert "bare.csv: neither probabilities nor logits were given" in result.output
    path = save_predictions(_grouped(), tmp_path / "grid.npz")
    result = CliRunner().invoke(app, ["calibration", "analyze", str(path), "--by", "backbone"])
    assert result.exit_code == 2
    assert "no group column 'backbone' (columns: domain, method)" in " ".join(result.output.split())
