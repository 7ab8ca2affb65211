"""The pieces of the redesigned page, without a browser: n=1 in place of a zero-width CI, short
failure lines, reference answers, metric families, heat maps split at 25 tasks with their
geometry, legends outside the axes, and the reliability diagram's two gap sides."""

from __future__ import annotations

import json

import numpy as np
import pytest

from medibench.report import _plots
from medibench.report._browser import _page_answer, reference_text, short_error
from medibench.report._html import _cell
from medibench.report._plot_set import metric_families
from medibench.samples import Sample


def test_a_group_of_one_shows_n_instead_of_a_zero_width_interval():
    one = {"ssim": 0.5, "ssim_n": 1, "ssim_ci_low": 0.5, "ssim_ci_high": 0.5}
    assert _cell(one, "ssim", ("ssim_ci_low", "ssim_ci_high"))["ci"] == "n=1"
    many = {"ssim": 0.5, "ssim_n": 4, "ssim_ci_low": 0.25, "ssim_ci_high": 0.75}
    assert _cell(many, "ssim", ("ssim_ci_low", "ssim_ci_high"))["ci"] == "[0.250, 0.750]"
    # A real zero-width interval over many equal values stays as it is.
    same = {"cp": 1.0, "cp_n": 9, "cp_ci_low": 1.0, "cp_ci_high": 1.0}
    assert _cell(same, "cp", ("cp_ci_low", "cp_ci_high"))["ci"] == "[1.000, 1.000]"


@pytest.mark.parametrize(
    ("text", "short"),
    [
        (
            'UnsupportedInstructionError: unsupported instruction "Add a cyst": supported are '
            "'remove|erase' - highlight: 'the A, B and C in red' ...",
            'UnsupportedInstructionError: unsupported instruction "Add a cyst"',
        ),
        ("ValueError: image is 3x4; expected 8x8 (sample s1)", "ValueError: image is 3x4"),
        ("no prediction (not generated)", "no prediction"),
        ("native@1: cp: the sample has no ROI mask", "native@1"),
        (None, None),
    ],
)
def test_a_failure_is_its_class_and_first_clause(text, short):
    assert short_error(text) == short


def test_a_long_first_clause_is_cut_with_an_ellipsis():
    out = short_error("RuntimeError: " + "x" * 300)
    assert len(out) == 90 and out.endswith("\u2026") and out.startswith("RuntimeError: xxx")


def _sample(**metadata):
    return Sample(
        sample_id="s", benchmark="b", input="i.png", instruction="Q?", perspective="perception",
        metadata=metadata,
    )  # fmt: skip


def test_reference_answers_as_the_page_shows_them():
    assert reference_text(_sample()) is None
    assert reference_text(_sample(answer="B. Pneumonia", choice=["A. x", "B. Pneumonia"])) == (
        'B. Pneumonia\n(choices: ["A. x", "B. Pneumonia"])'
    )
    report = {"findings": "clear lungs", "impression": "normal"}
    assert reference_text(_sample(answer=report)) == "findings: clear lungs\nimpression: normal"
    expected = {"text": "The nodule grows.", "sections": None, "images": []}
    assert reference_text(_sample(expected=expected)) == "The nodule grows."
    assert reference_text(_sample(answer=4)) == "4"


@pytest.mark.parametrize(
    "rationale, answer, held",
    [
        # A slice of the answer is held as its UTF-16 offsets: the emoji counts two.
        ("gone", "\U0001f600 gone\nRubric Score: 5/100", [3, 7]),
        ("I'm sorry.", "I'm sorry.", [0, 10]),
        # Free texts joined from a JSON answer are not a slice: held as they are.
        ("note: x\nreason: y", '{"note": "x", "reason": "y", "rubric": 5}', "note: x\nreason: y"),
        ("", "Rubric Score: 5/100", ""),  # nothing but scores
        (None, None, None),  # no answer came
    ],
)
def test_a_rationale_that_is_a_slice_of_the_answer_is_held_once(rationale, answer, held):
    got = _page_answer({"status": "ok", "rationale": rationale, "answer": answer})
    assert got == {"status": "ok", "rationale": held, "answer": answer}


def test_many_metrics_are_drawn_by_family():
    metrics = ["psnr", "ssim", "bleu", "entity_f1", "entity_recall", "overall", "ssim_pass_rate",
               "bleu_pass_rate", "lpips"]  # fmt: skip
    fams = metric_families(metrics, judged=["overall"], pass_rates=["ssim_pass_rate"])
    assert fams == {
        "entity": ["entity_f1", "entity_recall"],
        "pass rates": ["ssim_pass_rate", "bleu_pass_rate"],
        "metrics": ["psnr", "ssim", "bleu", "overall", "lpips"],
    }
    assert metric_families(["a_x", "b"], [], []) == {"metrics": ["a_x", "b"]}
    assert metric_families(["only"], [], []) == {"only": ["only"]}


def _rows(n_groups: int):
    return [
        {"model": m, "by": "task", "group": f"task-{g:02d}", "ssim": 0.1 + 0.02 * g}
        for m in ("identity", "classical")
        for g in range(n_groups)
    ]


def test_a_heat_map_writes_its_cells_geometry(tmp_path):
    png, svg = _plots.heatmap(_rows(25), "ssim", "task", tmp_path / "heat")
    geo = json.loads((tmp_path / "heat.json").read_text())
    assert geo["rows"] == 2 and geo["cols"] == 25
    x0, y0, x1, y1 = geo["axes"]
    from PIL import Image

    w, h = Image.open(png).size
    # At the image's own size every cell is at least the promised width and 0.6 of it tall.
    assert w * (x1 - x0) / 25 >= _plots.HEAT_CELL_PX * 0.9
    assert h * (y1 - y0) / 2 >= 0.6 * _plots.HEAT_CELL_PX * 0.9
    assert "0.58" in svg.read_text()  # values are printed in the cells (task-24: 0.1 + 0.48)


def test_legends_sit_outside_the_axes(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    seen = []
    real_save = _plots._save

    def keep(fig, stem, **kw):
        ax = fig.axes[0]
        fig.canvas.draw()
        legend = ax.get_legend().get_window_extent()
        seen.append(legend.x0 >= ax.get_window_extent().x1)
        return real_save(fig, stem, **kw)

    monkeypatch.setattr(_plots, "_save", keep)
    rows = [{**r, "by": "region"} for r in _rows(3)]
    _plots.group_bars(rows, "ssim", "region", tmp_path / "bars")
    _plots.distributions({"a": [0.1, 0.2], "b": [0.3]}, "ssim", tmp_path / "dist")
    line = {"x": [0, 1], "y": [0, 1], "low": [-1, 0], "high": [1, 2]}
    legend = ["the line", "its band", "R^2 = 1"]
    _plots.fit_scatter({"m": (0, 0), "n": (1, 1)}, line, "a", "b", "b vs a", legend, tmp_path / "f")
    plt.close("all")
    assert seen == [True, True, True]


def test_small_multiples_draw_one_panel_per_metric(tmp_path):
    import re

    rows = [{**r, "dice": 1 - r["ssim"], "psnr": 20 + r["ssim"]} for r in _rows(4)]
    metrics = ["ssim", "dice", "psnr", "lpips"]
    for r in rows:
        r["lpips"] = 1 - r["ssim"] / 2
    png, svg = _plots.small_multiples(rows, metrics, "task", "four", tmp_path / "fam")
    assert png.is_file()
    text = svg.read_text()
    # a 3-column grid of 2 rows: four panels drawn, the two empty cells hidden (not drawn)
    assert len(re.findall(r'<g id="axes_\d+"', text)) == 4
    for metric in metrics:  # each panel titled with its metric
        assert re.search(rf">\s*{metric}\s*<", text), metric


def test_the_reliability_diagram_labels_both_gap_sides(tmp_path):
    from medibench.calibration import as_predictions
    from medibench.calibration.diagrams import reliability_diagram

    rng = np.random.default_rng(0)
    n = 800
    z = rng.normal(size=(n, 3)) * 2
    y = rng.integers(0, 3, n)
    z[np.arange(400), y[:400]] += 1.5
    svg = reliability_diagram(as_predictions(y, logits=z), tmp_path / "r.svg", n_bins=10)
    text = svg.read_text()
    assert "gap, over-confident (confidence &gt; accuracy)" in text
    assert "gap, under-confident (accuracy &gt; confidence)" in text


def test_heat_maps_cover_only_tasks_with_values_on_one_scale_per_metric(tmp_path):
    """Issue 40: the demo drew a heat map with no value in it and parts on their own scales."""
    from medibench.protocols import Aggregation
    from medibench.report._build import ProtocolSection
    from medibench.report._plot_set import plan

    rows = [{"model": m, "k_mode": "@1", "by": "task", "group": f"task-{g:02d}",
             "ssim": 0.1 + 0.02 * g, "dice": 0.5 + 0.1 * g if g < 3 else None}
            for m in ("identity", "classical") for g in range(30)]  # fmt: skip
    sec = ProtocolSection("p", "1", "", Aggregation(k_modes=(("@1", "first"),)),
                          ["ssim", "dice"], [], [], rows=rows,
                          shown_metrics=["ssim", "dice"])  # fmt: skip
    heat = [t for t in plan(sec, tmp_path) if t[0] == "heatmap"]
    by_metric = {}
    for _, title, _, (part, metric, _, _stem, scale) in heat:
        by_metric.setdefault(metric, []).append((title, {r["group"] for r in part}, scale))
    ssim, dice = by_metric["ssim"], by_metric["dice"]
    assert [len(groups) for _, groups, _ in ssim] == [25, 5]
    assert {scale for _, _, scale in ssim} == {(0.1, 0.1 + 0.02 * 29)}  # one scale, both parts
    assert len(dice) == 1 and dice[0][1] == {"task-00", "task-01", "task-02"}
    assert dice[0][2] == (0.5, 0.5 + 0.1 * 2)
    assert "no value for task task-03, task-04" in dice[0][0] and "task-29" in dice[0][0]
    assert "no value" not in ssim[0][0]
