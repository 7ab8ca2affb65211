"""``medibench analyze attention`` on the tiny InstructPix2Pix: rows, PNGs, the report."""

from __future__ import annotations

import csv
import json
import sqlite3

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from medibench.analysis import grounding_iou  # noqa: E402
from medibench.cli import app  # noqa: E402
from medibench.io import read_image, read_mask  # noqa: E402
from tests.report.helpers import browser_data  # noqa: E402
from tests.runs.conftest import make_native  # noqa: E402

OPTS = ["--model-option", "steps=2", "--model-option", "resolution=null"]


def _rows(run):
    con = sqlite3.connect(run / "run.sqlite")
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("SELECT * FROM attention ORDER BY sample_id, k")]
    con.close()
    return rows


@pytest.fixture(scope="module")
def analysed(tiny_ip2p, tmp_path_factory):
    root = tmp_path_factory.mktemp("attn")
    data = make_native(root / "data", n=3)
    run = root / "run"
    runner = CliRunner()
    base = ["--dataset", f"native:{data}", "--model", f"ip2p:{tiny_ip2p}", "--k", "2"]
    res = runner.invoke(app, ["run", *base, "--out", str(run), "--no-progress", *OPTS])
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app, ["analyze", "attention", *base, "--out", str(run), "--no-progress", *OPTS]
    )
    assert res.exit_code == 0, res.output
    return data, run, res.output, base


def test_rows_per_sample_and_k_with_iou_and_pictures(analysed):
    data, run, output, _ = analysed
    rows = _rows(run)
    assert [(r["sample_id"], r["k"]) for r in rows] == [
        (f"s00{i}", k) for i in range(3) for k in range(2)
    ]
    for r in rows:
        assert r["status"] == "ok" and r["word"] == "lesion" and r["alpha"] == 1.3
        details = json.loads(r["details"])
        assert details["how"] == "longest" and details["tokens"] == ["lesion</w>"]
        assert details["chunk"] == 0 and details["n_chunks"] == 3 and details["steps"] == 2
        assert details["options"]["steps"] == "mean" and details["size"] == [32, 32]
        assert details["model_spec"]["model"] == "ip2p"
        assert details["model_spec"]["options"]["steps"] == 2
        # the edit captured is the run's own output, pixel for pixel
        assert r["matches_prediction"] == 1
        heat = read_image(run / r["heatmap"], mode="gray")
        overlay = read_image(run / r["overlay"])
        mask = read_mask(data / "img" / f"{r['sample_id']}_m.png")
        assert heat.shape == mask.shape and overlay.shape == (*mask.shape, 3)
        # the IoU is that of the stored map (to the PNG's 8-bit rounding of the threshold)
        assert r["iou"] == pytest.approx(grounding_iou(heat / 255.0, mask), abs=0.1)
        assert 0.0 <= r["iou"] <= 1.0
    assert "attention-grounding IoU" in output and "overall" in output
    assert "no judged editing accuracy" in output


def test_the_run_folder_gets_the_attention_summary(analysed):
    _, run, output, _ = analysed
    path = run / "attention_summary.json"
    assert f"summary -> {path}" in output.replace("\n", "")
    ious = [r["iou"] for r in _rows(run)]
    rows = json.loads(path.read_text())
    assert [(r["model"], r["region"]) for r in rows] == [("ip2p", "(none)"), ("ip2p", "overall")]
    for r in rows:
        assert (r["n"], r["nan"], r["zero"]) == (6, 0, sum(v == 0 for v in ious))
        assert r["iou"] == pytest.approx(np.mean(ious), abs=1e-12)
        assert (r["grounded"], r["conservative_edit"], r["mislocalised"]) == (None, None, None)


def test_a_rerun_skips_what_is_done(analysed, tiny_ip2p):
    data, run, _, base = analysed
    before = _rows(run)
    res = CliRunner().invoke(
        app, ["analyze", "attention", *base, "--out", str(run), "--no-progress", *OPTS]
    )
    assert res.exit_code == 0, res.output
    assert "0 written, 6 already done" in res.output
    assert [r["created"] for r in _rows(run)] == [r["created"] for r in before]


def test_the_report_shows_the_overlays(analysed):
    _, run, _, _ = analysed
    res = CliRunner().invoke(
        app, ["report", str(run), "--out", str(run / "report"), "--no-progress"]
    )
    assert res.exit_code == 0, res.output
    blob = browser_data(run / "report" / "index.html")
    att = {s["id"]: s.get("attention") for s in blob["samples"]}
    assert set(att) == {"s000", "s001", "s002"}
    for entries in att.values():
        assert [(e["model"], e["k"], e["word"]) for e in entries] == [
            ("ip2p", 0, "lesion"),
            ("ip2p", 1, "lesion"),
        ]
        for e in entries:
            assert (run / "report" / e["overlay"]["thumb"]).is_file()


def test_a_word_absent_from_an_instruction_is_a_recorded_failure(tiny_ip2p, tmp_path):
    data = make_native(tmp_path / "data", n=2)
    args = ["analyze", "attention", "--dataset", f"native:{data}", "--model", f"ip2p:{tiny_ip2p}"]
    args += ["--out", str(tmp_path / "run"), "--word", "tumor", "--no-progress", *OPTS]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = _rows(tmp_path / "run")
    assert {r["status"] for r in rows} == {"error"}
    assert rows[0]["error"] == (
        "s000: word 'tumor' is not in the instruction 'Remove the lesion.'; "
        "its words: Remove, the, lesion"
    )
    assert "2 failed" in res.output


def test_a_model_without_a_pipeline_is_refused(tmp_path):
    data = make_native(tmp_path / "data", n=1)
    args = ["analyze", "attention", "--dataset", f"native:{data}", "--model", "identity"]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run"), "--no-progress"])
    assert res.exit_code == 2
    assert "not a diffusers pipeline model" in res.output


def test_a_run_of_another_dataset_is_refused_before_anything_is_written(tmp_path):
    first, other = make_native(tmp_path / "a", n=1), make_native(tmp_path / "b", n=1)
    run = tmp_path / "run"
    res = CliRunner().invoke(
        app, ["run", "--dataset", f"native:{first}", "--model", "identity", "--out", str(run),
              "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    args = ["analyze", "attention", "--dataset", f"native:{other}", "--model", "identity"]
    res = CliRunner().invoke(app, [*args, "--out", str(run), "--no-progress"])
    assert res.exit_code == 2
    assert f"{run} was made with dataset='native:{first}', not 'native:{other}'" in res.output
    con = sqlite3.connect(run / "run.sqlite")
    assert "attention" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    con.close()


def test_an_attention_run_records_its_dataset_for_the_stages_after_it(tmp_path):
    first, other = make_native(tmp_path / "a", n=1), make_native(tmp_path / "b", n=1)
    run = tmp_path / "run"
    args = ["analyze", "attention", "--dataset", f"native:{first}", "--model", "identity"]
    res = CliRunner().invoke(app, [*args, "--out", str(run), "--no-progress"])
    assert res.exit_code == 2 and "not a diffusers pipeline model" in res.output
    res = CliRunner().invoke(
        app, ["run", "--dataset", f"native:{other}", "--model", "identity", "--out", str(run),
              "--no-progress"],
    )  # fmt: skip
    assert res.exit_code != 0
    assert f"was made with dataset='native:{first}'" in res.output


def test_overlay_marks_the_roi_and_the_binarised_map():
    from medibench.analysis._run import overlay

    image = np.full((16, 24, 3), 100, np.uint8)
    heat = np.zeros((16, 24))
    heat[2:6, 2:6] = 1.0
    mask = np.zeros((16, 24), bool)
    mask[8:14, 10:20] = True
    out = overlay(image, heat, mask, 0.5)
    assert out.shape == (16, 24, 3)
    assert tuple(out[8, 15]) == (0, 255, 0)  # ROI border
    assert tuple(out[2, 3]) == (255, 255, 255)  # binarised-map border


@pytest.mark.slow
def test_the_sample_detail_shows_the_overlays_in_chromium(analysed):
    from pathlib import Path

    if not (Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists()):
        pytest.skip("needs Debian's chromium and chromium-driver")
    import time

    from tests.browser.conftest import start_chromium, stop_chromium

    _, run, _, _ = analysed
    index = run / "report" / "index.html"
    if not index.exists():
        res = CliRunner().invoke(app, ["report", str(run), "--no-progress"])
        assert res.exit_code == 0, res.output
    page, profile = start_chromium(1400, 1000)
    try:
        from selenium.webdriver.common.by import By

        page.get(index.resolve().as_uri() + "#sample=s001")
        deadline = time.time() + 10
        while page.execute_script("return document.documentElement.dataset.ready") != "1":
            assert time.time() < deadline, "the page never became ready"
            time.sleep(0.05)
        time.sleep(0.3)
        detail = page.find_element(By.ID, "sample-detail")
        assert "attention grounding" in detail.text
        figs = [
            f for f in detail.find_elements(By.CSS_SELECTOR, "figure") if "'lesion' IoU" in f.text
        ]
        assert [f.text.split(" IoU")[0] for f in figs] == ["ip2p k0 'lesion'", "ip2p k1 'lesion'"]
        for f in figs:
            img = f.find_element(By.TAG_NAME, "img")
            assert page.execute_script("return arguments[0].naturalWidth", img) == 32
        errors = [e for e in page.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == []
    finally:
        stop_chromium(page, profile)


def test_export_writes_the_attention_table(analysed, tmp_path):
    _, run, _, _ = analysed
    res = CliRunner().invoke(
        app, ["export", str(run), "--format", "csv", "--out", str(tmp_path / "s.csv")]
    )
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(open(tmp_path / "s.attention.csv")))
    assert len(rows) == 6 and {r["word"] for r in rows} == {"lesion"}
