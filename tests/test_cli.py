import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.io import write_image
from medibench.samples import Score
from tests.runs.conftest import make_native

runner = CliRunner()


def test_score_writes_one_record_per_sample_and_k(tmp_path):
    data = make_native(tmp_path / "data", n=4)
    preds = tmp_path / "preds"
    preds.mkdir()
    from medibench.io import read_image

    target0 = read_image(data / "img" / "s000_t.png")
    write_image(preds / "s000_0.png", target0)  # perfect
    write_image(preds / "s000_1.png", read_image(data / "img" / "s000.png"))  # identity
    write_image(preds / "s001_0.png", np.zeros((64, 64, 3), np.uint8))  # other size: resized
    (preds / "s002_0.png").write_text("not an image")  # unreadable
    # s003 has no prediction at all
    out = tmp_path / "scores.jsonl"
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            f"native:{data}",
            "--predictions",
            str(preds),
            "--out",
            str(out),
            "--model",
            "m",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "5 score records (3 ok, 1 missing, 1 error) for 1 model(s)" in res.output
    recs = {(r.sample_id, r.k): r for r in map(Score.from_json, out.read_text().splitlines())}
    assert set(recs) == {("s000", 0), ("s000", 1), ("s001", 0), ("s002", 0), ("s003", 0)}
    perfect = recs[("s000", 0)]
    assert (perfect.protocol, perfect.protocol_version, perfect.model) == ("native", "1", "m")
    assert perfect.metrics["psnr"] == float("inf") and perfect.metrics["ssim"] == 1.0
    assert recs[("s000", 1)].metrics["cp_psnr"] == float("inf")
    assert recs[("s001", 0)].notes == ("prediction resized from 64x64 to 32x32 (bilinear)",)
    bad = recs[("s002", 0)]
    assert bad.status == "error" and "ImageReadError" in bad.error
    assert all(v is None for v in bad.metrics.values())
    missing = recs[("s003", 0)]
    assert missing.status == "missing" and "no output for k=0" in missing.error
    assert set(json.loads(out.read_text().splitlines()[0])) >= {
        "sample_id",
        "model",
        "k",
        "protocol",
        "protocol_version",
        "metrics",
        "status",
        "error",
    }


def test_score_with_expected_k_reports_each_missing_draw(tmp_path):
    data = make_native(tmp_path / "data", n=1)
    preds = tmp_path / "preds"
    preds.mkdir()
    write_image(preds / "s000_0.png", np.zeros((32, 32, 3), np.uint8))
    out = tmp_path / "s.jsonl"
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            f"native:{data}",
            "--predictions",
            str(preds),
            "--out",
            str(out),
            "--k",
            "3",
        ],
    )
    assert res.exit_code == 0, res.output
    statuses = [Score.from_json(x).status for x in out.read_text().splitlines()]
    assert statuses == ["ok", "missing", "missing"]


def test_bad_dataset_spec_is_a_clear_error(tmp_path):
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            "nativ:/x",
            "--predictions",
            str(tmp_path),
            "--out",
            str(tmp_path / "o.jsonl"),
        ],
    )
    assert res.exit_code == 2 and "Did you mean: native" in res.output


def test_demo_prints_leaderboards_and_export_round_trips(tmp_path, monkeypatch):
    import functools

    import medibench.report

    # The report's figures (25 of them, PNG and SVG: two thirds of this test's time) are the
    # report tests' business (tests/report/test_progress.py draws them); the demo writes the rest.
    real = medibench.report.build_report
    monkeypatch.setattr(medibench.report, "build_report", functools.partial(real, plots=False))
    out = tmp_path / "demo"
    mini = ["--suite", "medibench-suite@1-mini"]  # `make demo` runs the full medibench-suite@1
    res = runner.invoke(app, ["demo", "--out", str(out), "--no-progress", *mini])
    assert res.exit_code == 0, res.output
    for title in ("perception (native@1)", "modification (native@1)", "transformation (native@1)"):
        assert title in res.output
    rows = [r for r in csv.DictReader(open(out / "results.csv")) if r["by"] == "perspective"]
    assert {(r["group"], r["model"]) for r in rows} == {
        (p, m)
        for p in ("perception", "modification", "transformation")
        for m in ("identity", "classical")
    }
    n = {"perception": 16, "modification": 18, "transformation": 32}  # medibench-suite@1-mini
    by = {(r["group"], r["model"]): r for r in rows}
    for p, count in n.items():
        ident, classical = by[(p, "identity")], by[(p, "classical")]
        assert (int(ident["n"]), int(ident["n_missing"])) == (count, 0)
        # classical refuses instructions it cannot carry out: recorded, shown as missing
        assert int(classical["n"]) + int(classical["n_missing"]) == count
    assert {r["protocol"] + "@" + r["protocol_version"] for r in rows} == {"native@1"}
    # the brief's bar: classical beats identity on at least one perspective
    assert float(by[("perception", "classical")]["dice"]) > 0.2
    assert float(by[("perception", "identity")]["dice"]) == 0.0
    assert (out / "report" / "index.html").is_file()
    assert f"HTML report: {out / 'report' / 'index.html'}" in res.output

    res = runner.invoke(
        app, ["export", str(out), "--format", "jsonl", "--out", str(tmp_path / "e.jsonl")]
    )
    assert res.exit_code == 0, res.output
    recs = [Score.from_json(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert len(recs) == 2 * 66 and {r.protocol_version for r in recs} == {"1"}
    failed = [r for r in recs if r.status == "missing"]
    assert failed and all("UnsupportedInstructionError" in r.error for r in failed)

    again = runner.invoke(app, ["demo", "--out", str(out), "--no-progress", "--no-report", *mini])
    assert again.exit_code == 0
    assert "generate identity: 0 done, 66 already done" in again.output  # resumed


def test_registry_listings():
    for cmd, name in (("models", "classical"), ("datasets", "native"), ("protocols", "native@1")):
        res = runner.invoke(app, [cmd])
        assert res.exit_code == 0 and name in res.output
    listed = runner.invoke(app, ["protocols"]).output
    assert "calibration@1" in listed and "mvcbench@paper" in listed


def test_score_several_models_in_sub_folders_and_unknown_ids(tmp_path):
    from medibench.io import read_image

    data = make_native(tmp_path / "data", n=3)
    preds = tmp_path / "outputs"
    for m in ("good", "blank"):
        (preds / m).mkdir(parents=True)
    for i in range(3):
        target = read_image(data / "img" / f"s{i:03d}_t.png")
        write_image(preds / "good" / f"s{i:03d}_0.png", target)
        write_image(preds / "blank" / f"s{i:03d}_0.png", np.zeros((32, 32, 3), np.uint8))
    write_image(preds / "good" / "zzz_0.png", np.zeros((32, 32, 3), np.uint8))
    out = tmp_path / "s.jsonl"
    summary = tmp_path / "summary.csv"
    args = ["score", "--predictions", str(preds), "--out", str(out), "--no-progress"]
    res = runner.invoke(app, [*args, "--dataset", str(data), "--csv", str(summary)])
    assert res.exit_code == 0, res.output
    assert "ignored 1 output(s) for ids not in the benchmark: zzz_0.png" in res.output
    recs = [Score.from_json(x) for x in out.read_text().splitlines()]
    assert sorted({r.model for r in recs}) == ["blank", "good"] and len(recs) == 6
    rows = {(r["model"], r["by"], r["group"]): r for r in csv.DictReader(open(summary))}
    assert rows[("good", "all", "micro")]["psnr"] == "100.0"  # inf, capped in the means
    assert float(rows[("blank", "all", "micro")]["psnr"]) < 20
    only = runner.invoke(app, [*args, "--dataset", f"native:{data}", "--model", "good"])
    assert only.exit_code == 0 and "for 1 model(s)" in only.output
    bad = runner.invoke(app, [*args, "--dataset", f"native:{data}", "--model", "nope"])
    assert bad.exit_code == 2 and "no folder for model(s) nope" in bad.output


def test_plain_folder_without_a_known_layout(tmp_path):
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            str(tmp_path),
            "--predictions",
            str(tmp_path),
            "--out",
            str(tmp_path / "o.jsonl"),
        ],
    )
    assert res.exit_code == 2 and "no known dataset layout" in res.output


def test_score_with_workers_gives_the_same_records(tmp_path):
    from medibench.io import read_image

    data = make_native(tmp_path / "data", n=40)
    preds = tmp_path / "outputs" / "m"
    preds.mkdir(parents=True)
    for i in range(40):
        img = read_image(data / "img" / f"s{i:03d}.png")
        write_image(preds / f"s{i:03d}_0.png", np.roll(img, i % 3, axis=1))
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}.jsonl"
        res = runner.invoke(
            app,
            [
                "score",
                "--dataset",
                f"native:{data}",
                "--predictions",
                str(preds.parent),
                "--out",
                str(out),
                "--workers",
                workers,
                "--no-progress",
            ],
        )
        assert res.exit_code == 0, res.output
        outs.append(out.read_text())
    assert outs[0] == outs[1] and len(outs[0].splitlines()) == 40


def test_suite_generate_writes_a_dataset_that_score_accepts(tmp_path):
    import shutil

    data = tmp_path / "suite"
    res = runner.invoke(
        app,
        [
            "suite",
            "generate",
            "--out",
            str(data),
            "--n-per-task",
            "1",
            "--size",
            "64",
            "--tasks",
            "remove-lesion",
            "--tasks",
            "highlight-structure",
            "--tasks",
            "denoise-gaussian",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = (data / "samples.jsonl").read_text().splitlines()
    assert lines
    preds = tmp_path / "outputs" / "copy"
    preds.mkdir(parents=True)
    for line in lines:
        rec = json.loads(line)
        shutil.copy(data / rec["input"], preds / f"{rec['sample_id']}_0.png")
    out = tmp_path / "s.jsonl"
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            str(data),
            "--predictions",
            str(preds.parent),
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    recs = [Score.from_json(x) for x in out.read_text().splitlines()]
    assert len(recs) == len(lines) and {r.status for r in recs} == {"ok"}
    # the inputs themselves: context preserved perfectly wherever there is an ROI
    assert all(r.metrics["cp"] == pytest.approx(1.0) for r in recs if r.metrics["cp"] is not None)
