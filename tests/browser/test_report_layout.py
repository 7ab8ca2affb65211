"""The report at a laptop's size (1440 x 900, headless Chromium): nothing wider than the window,
heat maps with readable cells, every metric column named with its protocol, a MedGEN sample's
text answer beside its reference, and a calibration-only run that opens on its own panel."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from medibench.report import build_report
from medibench.runs import RunConfig, run
from medibench.samples import Score
from tests.browser.conftest import NEEDS_CHROMIUM, open_page
from tests.report.helpers import JUDGE_ANSWERS, JUDGES, make_dataset

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

WIDTH, HEIGHT = 1440, 900
WINDOW = (WIDTH, HEIGHT)  # the driver fixture's window (conftest)
N_TASKS = 30  # more than one heat-map image holds (25)

# Elements inside a horizontally scrolling box are clipped by it, not by the window.
_OVERFLOW = """
var W = document.documentElement.clientWidth, bad = [];
var page = document.documentElement.scrollWidth;
if (page > W) bad.push("page " + page);
document.querySelectorAll("body *").forEach(function (e) {
  var box = e.parentElement && e.parentElement.closest(".scroll");
  if (box) return;
  var r = e.getBoundingClientRect();
  if (r.width > 0 && r.right > W + 1)
    bad.push(e.tagName + "." + e.className + " " + Math.round(r.right));
});
return bad.slice(0, 10);
"""


@pytest.fixture(scope="module")
def editing_report(tmp_path_factory):
    """30 tasks, two models, scored by native@1 and again, two of its metrics, under an
    unregistered native@0 (two are enough for its labels; each metric adds four figures)."""
    root = tmp_path_factory.mktemp("layout")
    data = make_dataset(root / "data", n=N_TASKS)
    lines = (data / "samples.jsonl").read_text().splitlines()
    recs = [json.loads(line) for line in lines]
    for i, rec in enumerate(recs):
        rec["task"] = f"{rec['task']}-variant-{i:02d}"
        if i % 5 == 4:  # an instruction the classical baseline does not know: a failure
            rec.update(instruction="Add a cyst to the liver.", perspective="modification")
            rec.pop("overlay_color", None)
    (data / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    config = RunConfig(
        dataset=f"native:{data}",
        models=("identity", "classical"),
        out=root / "run",
        protocols=("native@1",),
    )
    with run(config, progress=False) as store:
        for s in store.scores():
            metrics = {
                k: (None if v is None else 0.25)
                for k, v in s.metrics.items()
                if k in ("ssim", "psnr")
            }
            store.put_score(
                Score(**{**s.model_dump(), "protocol_version": "0", "metrics": metrics})
            )
    return build_report(root / "run", root / "report", n_resamples=50)


@pytest.fixture(scope="module")
def medgen_report(tmp_path_factory):
    from tests.benchmarks.medgen.answer_data import build_folder

    root = tmp_path_factory.mktemp("medgen")
    folder = build_folder(root / "data")
    config = RunConfig(
        dataset=f"medgen:{folder / 'vqa.jsonl'}",
        models=("tests.benchmarks.medgen.test_answers:make_fixed",),
        model_options=("text=B. Pneumonia, seen as a right lower lobe opacity",),
        out=root / "run",
    )
    run(config, progress=False).close()
    return build_report(root / "run", root / "report", n_resamples=50)


@pytest.fixture(scope="module")
def calibration_report(tmp_path_factory):
    from medibench.calibration import as_predictions, save_predictions
    from medibench.cli import app
    from tests.calibration.conftest import make_logits

    root = tmp_path_factory.mktemp("calibration")
    z, y = make_logits(300, 3, seed=4, temper=0.5)
    pred = save_predictions(as_predictions(y, logits=z), root / "test.npz")
    args = ["calibration", "score", str(pred), "--resamples", "0", "--out", str(root / "run")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return build_report(root / "run", root / "report", plots=False)


def _open_first_sample(page) -> None:
    page.execute_script("document.querySelector('#sample-list .card').click()")
    time.sleep(0.2)


def test_nothing_is_wider_than_a_1440_window(driver, editing_report):
    page = open_page(driver, editing_report)
    assert page.execute_script("return window.innerWidth") == WIDTH
    assert page.execute_script(_OVERFLOW) == []
    _open_first_sample(page)  # the sample view's score tables too
    assert page.execute_script(_OVERFLOW) == []
    # The leaderboard scrolls inside its box, its model column stays in view.
    lb = page.find_element("css selector", "table.leaderboard")
    box = page.execute_script("return arguments[0].parentElement.getBoundingClientRect().right", lb)
    assert box <= WIDTH
    first = page.execute_script(
        "return getComputedStyle(arguments[0].querySelector('td')).position", lb
    )
    assert first == "sticky"


def test_heat_map_cells_are_at_least_12_px(driver, editing_report):
    page = open_page(driver, editing_report)
    figures = page.find_elements("css selector", "figure.plot[data-kind=heatmap]")
    assert figures, "no heat maps drawn"
    cols = {int(f.get_attribute("data-cols")) for f in figures}
    # a metric with values on every task is paged 25 + 5; others cover only their tasks
    assert {25, N_TASKS - 25} <= cols and max(cols) == 25
    for fig in figures:
        img = fig.find_element("tag name", "img")
        page.execute_script("arguments[0].scrollIntoView()", img)
        deadline = time.time() + 10
        while not page.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", img
        ):
            assert time.time() < deadline, "heat map did not load"
            time.sleep(0.05)
        x0, y0, x1, y1 = (float(v) for v in fig.get_attribute("data-axes").split(","))
        w = page.execute_script("return arguments[0].clientWidth", img)
        h = page.execute_script("return arguments[0].clientHeight", img)
        cell_w = w * (x1 - x0) / int(fig.get_attribute("data-cols"))
        cell_h = h * (y1 - y0) / int(fig.get_attribute("data-rows"))
        assert cell_w >= 12 and cell_h >= 12, (fig.get_attribute("data-cols"), cell_w, cell_h)


def test_every_metric_column_names_its_protocol(driver, editing_report):
    page = open_page(driver, editing_report)
    _open_first_sample(page)
    tables = page.find_elements("css selector", "#sample-detail table.scores[data-protocol]")
    protocols = [t.get_attribute("data-protocol") for t in tables]
    assert set(protocols) == {"native@0", "native@1"}
    for t in tables:
        heads = t.find_elements("css selector", "th")[2:]  # after model and k
        labels = [h.find_element("css selector", ".protocol-label").text for h in heads]
        assert labels and set(labels) == {t.get_attribute("data-protocol")}
        names = [h.text.split("\n")[0] for h in heads]
        assert len(names) == len(set(names))  # no metric twice in one table


def test_scored_samples_come_before_failures(driver, editing_report):
    page = open_page(driver, editing_report)
    failed = page.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#sample-list .card'),"
        " function (c) { return c.querySelector('.tag.bad') !== null; })"
    )
    assert failed.count(True) == N_TASKS // 5  # classical fails the "add a cyst" samples
    assert failed == sorted(failed)  # every scored card before every failed one
    # A failure is one short line on the card, the whole text on hover.
    box = page.find_element("css selector", "#sample-list .missing")
    assert len(box.text) <= 90 and len(box.get_attribute("title")) >= len(box.text)


def test_a_medgen_sample_shows_the_text_answer_and_the_reference(driver, medgen_report):
    page = open_page(driver, medgen_report)
    page.execute_script(
        "document.querySelector('#sample-list .card[data-id=\"medgen-VQA-multiple-choice-1\"]')"
        ".click()"
    )
    time.sleep(0.2)
    answers = page.find_elements("css selector", "#sample-detail .answer pre")
    texts = [a.text for a in answers]
    assert "B. Pneumonia, seen as a right lower lobe opacity" in texts
    reference = page.find_element("css selector", "#sample-detail .answer.reference pre").text
    assert reference.strip() and reference != texts[-1]
    assert page.execute_script(_OVERFLOW) == []


def test_a_calibration_only_report_opens_on_its_panel(driver, calibration_report):
    page = open_page(driver, calibration_report)
    html = page.page_source
    assert 'id="no-scores"' not in html and "no scores yet" not in html.lower()
    assert 'id="leaderboards"' not in html and 'id="samples"' not in html
    header = page.find_element("css selector", "header.top .sub").text
    assert "Calibration: 1 prediction file(s)" in header and "0 samples" not in header
    assert "?" not in header
    assert page.find_elements("css selector", "section#calibration svg")
    assert page.execute_script(_OVERFLOW) == []


def _open_sample(page, sid: str) -> None:
    page.execute_script(f"document.querySelector('#sample-list .card[data-id=\"{sid}\"]').click()")
    time.sleep(0.2)


def test_a_judged_sample_shows_the_judges_answers(driver, judged_report):
    page = open_page(driver, judged_report)
    _open_sample(page, "s00")
    blocks = page.find_elements("css selector", "#sample-detail .judge")
    assert [b.get_attribute("data-judge") for b in blocks] == sorted(JUDGES)
    medebench, medgen, rubric = blocks
    text = medebench.text
    assert "m1 (k0): medebench-judge@paper-structure, judge model judge-x" in text
    assert "prompt medebench_paper_structure.md version paper-structure.1" in text
    assert "2 passes, each shown; a metric holds the mean of the ok passes' scores" in text
    rows = [
        [td.text for td in tr.find_elements("css selector", "td")]
        for tr in medebench.find_elements("css selector", "table.judge-scores tr")[1:]
    ]
    assert rows == [
        ["Editing Accuracy", "ea 0.600 (medebench@paper, score / 10)", "7/10", "5/10"],
        ["Contextual Preservation", "-", "8/10", "8/10"],
        ["Visual Quality", "vq 0.600 (medebench@paper, score / 10)", "6/10", "6/10"],
    ]
    rationales = [r.text for r in medebench.find_elements("css selector", ".rationale")]
    assert rationales == [
        "rationale: Step 1. ORIGINAL's bright lesion is gone in EDITED; REFERENCE agrees.",
        "rationale: Step 1. A faint rim of the lesion is left in EDITED.",
    ]
    whole = medebench.find_elements("css selector", "details pre")
    assert [p.get_attribute("textContent") for p in whole] == [
        JUDGE_ANSWERS[("medebench", "a", 0)],
        JUDGE_ANSWERS[("medebench", "a", 1)],
    ]
    assert medgen.text.count("no rationale: the answer holds only scores") == 2
    # An answer's markup is text: no element made of it.
    assert "Half of the lesion is left </script><b>bold</b>" in rubric.text
    assert page.find_elements("css selector", "#sample-detail .judge b") == []
    # A refusal and a 3,000-letter word, every whole answer open: nothing wider than the window.
    _open_sample(page, "s01")
    page.execute_script("document.querySelectorAll('#sample-detail details').forEach("
                        "function (d) { d.open = true; })")  # fmt: skip
    heads = page.find_elements("css selector", "#sample-detail .judge-pass strong")
    assert [h.text for h in heads[:2]] == ["pass 1: refused", "pass 2: refused"]
    why = page.find_element("css selector", "#sample-detail .judge-problems").text
    assert why == "refused: the judge declined to score (any number in the answer is not used)"
    assert page.execute_script(_OVERFLOW) == []
