"""The calibration panel of the HTML report: stored results and the diagrams drawn with them."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from medibench.calibration import as_predictions, load_predictions, save_predictions
from medibench.calibration import score as score_predictions
from medibench.calibration._report import diagram_folder
from medibench.cli import app
from medibench.report import build_report
from tests.calibration.conftest import make_logits

runner = CliRunner()


@pytest.fixture
def run(tmp_path):
    z, y = make_logits(600, 3, seed=4, temper=0.5)
    groups = {"domain": ["in", "shifted"] * 300}
    pred = save_predictions(as_predictions(y, logits=z, groups=groups), tmp_path / "test.npz")
    folder = tmp_path / "run"
    args = ["calibration", "score", str(pred), "--by", "domain", "--resamples", "0"]
    res = runner.invoke(app, [*args, "--out", str(folder)])
    assert res.exit_code == 0, res.output
    assert "3 reliability diagrams" in " ".join(res.output.split())
    return folder, pred


def test_the_report_shows_the_stored_values_and_the_diagrams(run):
    folder, pred = run
    expected = score_predictions(load_predictions(pred), "calibration@1", by=["domain"])
    svgs = sorted(p.name for p in diagram_folder(folder, str(pred)).glob("*.svg"))
    assert svgs == ["reliability.svg", "reliability_in.svg", "reliability_shifted.svg"]
    page = build_report(folder, plots=False, progress=False).read_text()
    section = page[page.index('<section id="calibration">') :]
    section = section[: section.index("</section>")]
    assert "test.npz · calibration@1" in section
    cells = re.findall(r"<td>([^<]*)</td>", section)
    assert cells[:2] == ["all", "600"]
    assert cells[2] == f"{expected['accuracy']:.4f}" and cells[3] == f"{expected['ece']:.4f}"
    assert ["in", "300", f"{expected['groups']['in']['accuracy']:.4f}"] == cells[8:11]
    assert section.count("<svg") == 3 and "<?xml" not in section


def test_a_run_without_calibration_has_no_panel(tmp_path):
    from tests.runs.conftest import make_native

    data = make_native(tmp_path / "data", n=2)
    res = runner.invoke(
        app, ["run", "--dataset", f"native:{data}", "--model", "identity", "--out",
              str(tmp_path / "r"), "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    page = build_report(tmp_path / "r", plots=False, progress=False).read_text()
    assert 'id="calibration"' not in page and 'id="model-editing"' not in page


def test_before_and_after_a_temperature_are_side_by_side(tmp_path):
    from medibench.calibration._report import calibration_panel
    from medibench.runs import RunStore
    from tests.calibration.conftest import temperature_run

    folder, temperature = temperature_run(tmp_path)
    assert temperature > 1  # the over-confident model's logits are softened
    with RunStore.open_existing(folder) as store:
        panel = calibration_panel(store, folder)
    (figure,) = panel["figures"]  # one diagram each, no groups
    assert figure["title"] == "reliability: test.npz | test_calibrated.npz (side by side)"
    assert [p["title"] for p in figure["parts"]] == ["test.npz", "test_calibrated.npz"]
    before = load_predictions(tmp_path / "test.npz")
    after = load_predictions(tmp_path / "test_calibrated.npz")
    for part, pred in zip(figure["parts"], (before, after), strict=True):
        ece = score_predictions(pred, "calibration@1", n_resamples=0)["ece"]
        assert f"ECE {100 * ece:.2f}%" in part["svg"]
    page = build_report(folder, plots=False, progress=False).read_text()
    assert page.count('class="part"') == 2 and page.count("<svg") == 2


def test_every_legend_entry_has_its_bars_colour_even_with_no_such_bar():
    import numpy as np
    from matplotlib.colors import to_rgba

    from medibench.calibration.diagrams import _figure
    from medibench.calibration.metrics import reliability_bins

    # Confidence below accuracy in every bin: no over-confident bar is drawn.
    probs = np.array([[0.6, 0.4]] * 10)
    labels = np.zeros(10, dtype=int)
    bins = reliability_bins(probs, labels, n_bins=5)
    fig = _figure(bins, 5, 0.4, 10, "under-confident")
    (legend,) = [a.get_legend() for a in fig.axes if a.get_legend()]
    texts = [t.get_text() for t in legend.get_texts()]
    colours = {t: h.get_facecolor() for t, h in zip(texts, legend.legend_handles, strict=True)}
    assert colours["accuracy"] == to_rgba("#3b6ea8")
    assert colours["gap, over-confident (confidence > accuracy)"] == to_rgba("#e8a0a0", 0.7)
    assert colours["gap, under-confident (accuracy > confidence)"] == to_rgba("#a8c8ec", 0.7)
    hatches = [h.get_hatch() for h in legend.legend_handles]
    assert hatches == [None, "//", "//"]
