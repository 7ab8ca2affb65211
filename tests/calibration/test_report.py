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
