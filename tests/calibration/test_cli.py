"""``medibench calibration score|fit|apply|diagram`` end to end on generated predictions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.calibration import as_predictions, load_predictions, save_predictions, softmax
from medibench.calibration.calibrators import load_calibrator
from medibench.calibration.metrics import expected_calibration_error
from medibench.calibration.store import read_results
from medibench.cli import app
from tests.calibration.conftest import make_logits

runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    z, y = make_logits(900, 3, seed=12, temper=0.5)
    domain = np.array(["in", "shifted", "in"] * 300)
    split = np.where(np.arange(900) < 300, "val", "test")
    val = save_predictions(as_predictions(y[:300], logits=z[:300]), tmp_path / "val.npz")
    test = save_predictions(
        as_predictions(y[300:], logits=z[300:], groups={"domain": domain[300:]}),
        tmp_path / "test.csv",
    )
    both = save_predictions(
        as_predictions(y, logits=z, groups={"split": split}), tmp_path / "all.npz"
    )
    return val, test, both


def test_score_json_has_the_issue_keys_and_groups(tmp_path, files):
    _, test, _ = files
    out = tmp_path / "scores.json"
    res = runner.invoke(
        app,
        [
            "calibration",
            "score",
            str(test),
            "--by",
            "domain",
            "--json",
            str(out),
            "--resamples",
            "20",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    for key in ("accuracy", "ece", "mce", "ace", "brier", "nll"):
        assert isinstance(data[key], float)
        assert set(data["groups"]["in"]) >= {key, "n", "ci"}
    assert data["protocol"] == "calibration@1" and data["settings"]["ece_bins"] == 15
    pred = load_predictions(test)
    assert data["ece"] == pytest.approx(expected_calibration_error(pred.probs, pred.labels))
    assert data["groups"]["shifted"]["n"] == 200 and len(data["ci"]["ece"]) == 2
    rows = read_results(tmp_path / "run")
    assert len(rows) == 3 * 8  # all + 2 groups, 8 metrics
    ece = [r for r in rows if r["metric"] == "ece" and r["group_key"] == ""][0]
    assert ece["value"] == pytest.approx(data["ece"]) and ece["protocol"] == "calibration"


def test_score_with_the_paper_protocol_and_bins(tmp_path, files):
    _, test, _ = files
    out = tmp_path / "paper.json"
    res = runner.invoke(
        app,
        [
            "calibration",
            "score",
            str(test),
            "--protocol",
            "mvcbench@paper",
            "--json",
            str(out),
            "--resamples",
            "0",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["protocol"] == "mvcbench-dassl@paper" and data["settings"]["ece_bins"] == 20
    assert "groups" not in data and data["ci"] == {}
    res = runner.invoke(
        app,
        ["calibration", "score", str(test), "--bins", "10", "--json", str(out), "--resamples", "0"],
    )
    assert json.loads(out.read_text())["settings"]["mce_bins"] == 10


def test_fit_apply_improves_calibration(tmp_path, files):
    val, test, both = files
    params = tmp_path / "params.json"
    res = runner.invoke(
        app,
        ["calibration", "fit", "--val", str(val), "--method", "temperature", "--out", str(params)],
    )
    assert res.exit_code == 0, res.output
    t = load_calibrator(params).params["temperature"]
    assert 1.5 < t < 2.6  # the labels were drawn at temperature 2
    out = tmp_path / "calibrated.npz"
    res = runner.invoke(app, ["calibration", "apply", str(params), str(test), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "before and after" in res.output and "calibrated predictions (temperature)" in res.output
    before, after = load_predictions(test), load_predictions(out)
    np.testing.assert_allclose(after.probs, softmax(before.logits / t))
    assert after.groups["domain"].tolist() == before.groups["domain"].tolist()
    assert expected_calibration_error(after.probs, after.labels) < expected_calibration_error(
        before.probs, before.labels
    )
    # a split column: only the val rows are fitted
    res = runner.invoke(
        app,
        [
            "calibration",
            "fit",
            "--val",
            str(both),
            "--method",
            "isotonic",
            "--out",
            str(tmp_path / "iso.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert load_calibrator(tmp_path / "iso.json").n_val == 300


def test_fit_without_a_validation_split_is_a_clear_error(tmp_path, files):
    res = runner.invoke(
        app, ["calibration", "fit", "--method", "temperature", "--out", str(tmp_path / "p.json")]
    )
    assert res.exit_code == 2 and "no validation split" in res.output
    _, test, _ = files
    res = runner.invoke(
        app,
        [
            "calibration",
            "fit",
            "--val",
            str(test),
            "--method",
            "platt",
            "--out",
            str(tmp_path / "p.json"),
        ],
    )
    assert res.exit_code == 2 and "unknown calibration method 'platt'" in res.output


def test_score_of_a_bad_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("label,prob_0,prob_1\n0,0.5,0.5\n1,0.9,0.9\n")
    res = runner.invoke(app, ["calibration", "score", str(bad)])
    assert res.exit_code == 2
    assert "bad.csv: row 1: probabilities sum to 1.8" in " ".join(res.output.split())


def test_diagram_writes_png_and_svg(tmp_path, files):
    _, test, _ = files
    res = runner.invoke(
        app, ["calibration", "diagram", str(test), "--out", str(tmp_path / "d"), "--by", "domain"]
    )
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in (tmp_path / "d").iterdir())
    assert names == [
        "reliability.png",
        "reliability.svg",
        "reliability_in.png",
        "reliability_in.svg",
        "reliability_shifted.png",
        "reliability_shifted.svg",
    ]
    from PIL import Image

    with Image.open(tmp_path / "d" / "reliability.png") as im:
        assert im.size[0] > 300
    first = (tmp_path / "d" / "reliability.svg").read_bytes()
    runner.invoke(
        app, ["calibration", "diagram", str(test), "--out", str(tmp_path / "d"), "--format", "svg"]
    )
    assert (tmp_path / "d" / "reliability.svg").read_bytes() == first  # reproducible


def test_score_csv_is_the_printed_table_as_rows(tmp_path, files):
    import csv

    _, test, _ = files
    out, table = tmp_path / "scores.json", tmp_path / "scores.csv"
    res = runner.invoke(
        app,
        [
            "calibration",
            "score",
            str(test),
            "--by",
            "domain",
            "--resamples",
            "20",
            "--json",
            str(out),
            "--csv",
            str(table),
        ],  # fmt: skip
    )
    assert res.exit_code == 0, res.output
    assert f"summary -> {table}" in res.output.replace("\n", "")
    data = json.loads(out.read_text())
    rows = list(csv.DictReader(table.open()))
    assert [r["group"] for r in rows] == ["all", "in", "shifted"]
    assert [int(r["n"]) for r in rows] == [600, 400, 200]
    assert {r["protocol"] for r in rows} == {"calibration@1"}
    parts = [data, data["groups"]["in"], data["groups"]["shifted"]]
    for row, part in zip(rows, parts, strict=True):
        assert float(row["ece"]) == pytest.approx(part["ece"], rel=1e-12)
        assert float(row["nll_ci_low"]) == pytest.approx(part["ci"]["nll"][0], rel=1e-12)
        assert float(row["nll_ci_high"]) == pytest.approx(part["ci"]["nll"][1], rel=1e-12)
    res = runner.invoke(app, ["calibration", "score", str(test), "--resamples", "0",
                              "--csv", str(table)])  # fmt: skip
    (row,) = csv.DictReader(table.open())
    assert row["group"] == "all" and row["ece_ci_low"] == "" and float(row["ece"]) > 0
    res = runner.invoke(app, ["calibration", "score", str(test), "--csv", str(tmp_path)])
    assert res.exit_code == 2 and "--csv" in res.output and "is a folder" in res.output


def test_half_precision_probabilities_with_the_tolerance_are_divided_not_softmaxed(tmp_path):
    z, y = make_logits(200, 3, seed=8)
    p16 = softmax(z).astype(np.float16)
    assert np.abs(p16.astype(np.float64).sum(axis=1) - 1).max() > 2e-4
    np.savez(tmp_path / "fp16.npz", probs=p16, labels=y)
    out = tmp_path / "vl.json"
    args = ["calibration", "score", str(tmp_path / "fp16.npz"), "--protocol", "mvcbench-vl@paper"]
    res = runner.invoke(app, [*args, "--prob-tolerance", "1e-3", "--json", str(out),
                              "--resamples", "0"])  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert any("each row was divided by its sum" in n for n in data["notes"])
    p = p16.astype(np.float64)
    divided = as_predictions(y, probs=p / p.sum(axis=1, keepdims=True))
    from medibench.calibration import score

    want = score(divided, "mvcbench-vl@paper", n_resamples=0)
    for name in ("ece", "mce", "ace", "brier", "ovr_ece_macro", "toplabel_ece_macro"):
        assert data[name] == pytest.approx(want[name], abs=1e-12), name
    res = runner.invoke(app, [*args, "--resamples", "0"])  # the default tolerance refuses them
    assert res.exit_code != 0 and "tolerance 0.0001" in " ".join(res.output.split())
