"""A report page per run kind at a laptop's size (1440 x 900, headless Chromium): a demo run, a
judged MedEBench run (the real ``medibench judge`` against the local fake judge), an in-context
run with K = 0, 1, 2, a training run with three evaluated checkpoints, a prompt-tuning grid and a
calibration run before and after a temperature. No element is wider than the window on any of
them, each shows what its question needs, and no table or CSV of theirs holds an interval of
zero width."""

from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.report import build_report
from tests.browser.conftest import NEEDS_CHROMIUM, open_page
from tests.browser.test_report_layout import _OVERFLOW, HEIGHT, WIDTH

WINDOW = (WIDTH, HEIGHT)  # the driver fixture's window (conftest): test_report_layout's

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

#: The procedural suite's tasks the demo-like run uses (medibench demo's models and protocol).
DEMO_TASKS = ("highlight-lesion", "remove-lesion", "denoise-gaussian", "deblur")


@pytest.fixture(scope="module")
def pages(tmp_path_factory, judged_report, icl_run, evaluated_training):
    """``{kind: index.html}`` of the six run kinds."""
    from medibench.runs import RunConfig, run
    from medibench.synth.suite import generate_suite
    from tests.calibration.conftest import temperature_run

    root = tmp_path_factory.mktemp("kinds")
    data = generate_suite(root / "suite", n_per_task=1, size=64, seed=0, tasks=DEMO_TASKS)
    demo = RunConfig(dataset=f"native:{data}", models=("identity", "classical"),
                     out=root / "demo", protocols=("native@1",), seed=0)  # fmt: skip
    run(demo, progress=False).close()
    folder, _ = evaluated_training
    training = CliRunner().invoke(app, ["report", str(folder), "--out", str(root / "training")])
    assert training.exit_code == 0, training.output
    calibration, _ = temperature_run(root / "calibration")
    return {
        "demo": build_report(root / "demo", root / "demo-report", n_resamples=100, workers=1),
        "judged": judged_report,
        "icl": build_report(icl_run, root / "icl-report", n_resamples=100, workers=1),
        "training": root / "training" / "index.html",
        "grid": build_report(_grid(root), root / "grid-report", plots=False),
        "calibration": build_report(calibration, root / "cal-report", plots=False),
    }


def _grid(root: Path) -> Path:
    """A two-cell grid on the tiny CLIP: zero-shot and a linear probe, one loss, seed, template."""
    from tests.prompt_tuning.conftest import _tiny_backbone, write_folder_dataset

    clip = _tiny_backbone("clip")
    data = write_folder_dataset(root / "grid-data", per_class=3, seed=0)
    shifted = write_folder_dataset(root / "grid-shifted", per_class=3, seed=5)
    lines = [
        f"dataset: {data}", "shots: 2", f"evals: {{in-domain: {data}, shifted: {shifted}}}",
        "methods: [zero-shot, linear-probe]", "losses: [ce]", "seeds: [1]",
        'templates: ["a photo of a {}."]', f'backbones: ["clip:{clip}"]', "epochs: 1",
        "batch_size: 3", "bins: 3",
    ]  # fmt: skip
    config = root / "grid.yaml"
    config.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(app, ["calibration", "grid", str(config), "--out", str(root / "g")])
    assert res.exit_code == 0, res.output
    return root / "g"


@pytest.mark.parametrize("kind", ["demo", "judged", "icl", "training", "grid", "calibration"])
def test_no_page_is_wider_than_a_1440_window(driver, pages, kind):
    page = open_page(driver, pages[kind])
    assert page.execute_script("return window.innerWidth") == WIDTH
    assert page.execute_script(_OVERFLOW) == []
    errors = [e for e in page.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []


def test_the_judged_sample_shows_the_judges_rationale(driver, pages):
    page = open_page(driver, pages["judged"])
    page.execute_script("document.querySelector('#sample-list .card[data-id=\"s00\"]').click()")
    time.sleep(0.2)
    why = [r.text for r in page.find_elements("css selector", "#sample-detail .rationale")]
    assert "rationale: Step 1. A faint rim of the lesion is left in EDITED." in why
    assert page.execute_script(_OVERFLOW) == []


def test_the_in_context_page_plots_score_against_k_and_shows_the_demonstrations(
    driver, pages, icl_run
):
    from medibench.runs import RunStore
    from medibench.runs._demos import read_demonstrations

    page = open_page(driver, pages["icl"])
    (figure,) = page.find_elements("css selector", "figure.plot[data-kind=icl]")
    img = figure.find_element("tag name", "img")
    page.execute_script("arguments[0].scrollIntoView()", img)
    _wait_loaded(page, img)
    drawn = json.loads((pages["icl"].parent / "plots/native@1/score_vs_k.json").read_text())
    assert [k for k, _ in drawn["curves"]["ssim"]["mean-of-examples"]] == [0, 1, 2]
    with RunStore.open_existing(icl_run) as store:
        shown = read_demonstrations(store)[("mean-of-examples@icl-2", "a0", 0)]["demo_ids"]
    page.execute_script("document.querySelector('#sample-list .card[data-id=\"a0\"]').click()")
    time.sleep(0.2)
    row = page.find_element("css selector", '.demo-pics[data-model="mean-of-examples@icl-2"]')
    captions = [c.text for c in row.find_elements("css selector", "figcaption")]
    assert captions == [f"demo {i + 1}: {sid}" for i, sid in enumerate(shown)]
    thumbs = [i.get_attribute("src") for i in row.find_elements("css selector", "img")]
    inputs = page.execute_script(
        "var pages = window.medibenchPages, m = {};"
        "Object.keys(pages).forEach(function (p) {"
        "  pages[p].samples.forEach(function (s) { m[s.id] = s.pics.input.thumb; }); });"
        "return arguments[0].map(function (id) { return m[id]; });",
        list(shown),
    )
    assert [t.rsplit("/", 1)[-1] for t in thumbs] == [t.rsplit("/", 1)[-1] for t in inputs]
    assert page.execute_script(_OVERFLOW) == []


def test_the_training_page_starts_at_step_0(driver, pages, evaluated_training):
    from medibench.train._report import learning_curve

    page = open_page(driver, pages["training"])
    figure = page.find_element("css selector", "figure[data-kind=learning-curve]")
    assert figure.get_attribute("data-steps") == "0,1,2,3"
    drawn = json.loads(figure.get_attribute("data-drawn"))
    base = [e for e in learning_curve(evaluated_training[0])["evals"] if e["step"] == 0]
    assert base
    for e in base:
        for metric, (mean, _, _) in e["metrics"].items():
            points = drawn["metrics"][f"{metric} ({e['protocol']})"]
            assert points[0] == [0.0, pytest.approx(mean, rel=1e-12)]
    assert figure.find_elements("css selector", "svg")


def test_the_grid_page_has_a_heat_map_per_metric_with_values(driver, pages):
    page = open_page(driver, pages["grid"])
    heads = [h.text for h in page.find_elements("css selector", "section#prompt-tuning th")]
    assert "evaluation set" in heads and "ECE, mean" in heads
    assert not [h for h in heads if "_" in h]
    maps = page.find_elements("css selector", "figure[data-kind=grid-heatmap]")
    assert [m.get_attribute("data-metric") for m in maps] == ["accuracy", "ece", "mce", "ace"]
    for m in maps:
        drawn = json.loads(m.get_attribute("data-drawn"))
        assert drawn and all(cells for cells in drawn.values())


def test_the_calibration_page_shows_before_and_after_side_by_side(driver, pages):
    page = open_page(driver, pages["calibration"])
    (figure,) = page.find_elements("css selector", "section#calibration figure.side-by-side")
    parts = figure.find_elements("css selector", ".part")
    assert [p.find_element("css selector", ".part-title").text for p in parts] == [
        "test.npz",
        "test_calibrated.npz",
    ]
    tops = {round(p.rect["y"]) for p in parts}
    assert len(tops) == 1  # one row: side by side


_ZERO_WIDTH = re.compile(r"\[\s*(-?\d[\d.e+-]*)\s*,\s*\1\s*\]")


def test_no_table_or_csv_holds_a_zero_width_interval(pages):
    for kind, index in pages.items():
        folder = index.parent
        texts = {index: index.read_text(encoding="utf-8")}
        for path in (*folder.rglob("*.md"), *folder.rglob("*.tex"), *folder.rglob("*.csv")):
            texts[path] = path.read_text(encoding="utf-8")
        for path, text in texts.items():
            assert not _ZERO_WIDTH.search(text), (kind, path, _ZERO_WIDTH.search(text)[0])
        for path in folder.rglob("*.csv"):
            for row in csv.DictReader(path.open(encoding="utf-8")):
                for key, low in row.items():
                    if key and key.endswith("_ci_low") and low not in ("", None):
                        high = row[key[: -len("_ci_low")] + "_ci_high"]
                        assert low != high, (kind, path, key, low)


def _wait_loaded(page, img) -> None:
    deadline = time.time() + 10
    while not page.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img):
        assert time.time() < deadline, "image did not load"
        time.sleep(0.05)
