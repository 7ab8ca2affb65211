"""Every command's summary tables at 80, 120 and 200 columns and piped (no ``COLUMNS``): no "…",
every model, protocol and metric name whole (issue 40, "tables that never cut")."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.table import Table
from typer.testing import CliRunner

import medibench._console
from medibench.calibration import as_predictions, save_predictions
from medibench.cli import app
from tests.benchmarks.paintbench.conftest import build_paintbench
from tests.calibration.conftest import make_logits
from tests.judges.conftest import build_run
from tests.judges.test_cli import _judge_config

#: A model name longer than a narrow column: rich used to cut it first.
LONG = "instruct-pix2pix-finetuned-on-paintbench-v2"
COMPOSED = "openai-chat:gpt-4o + openai-image:gpt-image-1"
WIDTHS = [None, 80, 120, 200]  # None: piped, COLUMNS unset (120 columns)


@pytest.fixture(params=WIDTHS, ids=lambda w: f"columns-{w or 'unset'}")
def width(request, monkeypatch):
    """``COLUMNS`` as the parameter says, on the consoles the commands print on."""
    if request.param is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(request.param))
    from medibench.judges import _cli as judges_cli

    width = medibench._console.stdout_console().width
    for console in (medibench._console.console, judges_cli.console):
        monkeypatch.setattr(console, "_width", width)
    return width


@pytest.fixture(scope="module")
def paintbench(tmp_path_factory):
    tree = build_paintbench(tmp_path_factory.mktemp("tables"))
    outputs = tree["outputs"]
    (outputs / "modelA").rename(outputs / LONG)
    return tree["bench"], outputs


def _whole(output: str, width: int, *names: str) -> None:
    assert "…" not in output
    for name in names:
        assert name in output, name
    rules = [line for line in output.splitlines() if line[:1] in "┏┃┡│└"]
    assert all(len(line) <= width for line in rules)  # messages and captions may be longer


def test_score_on_a_paintbench_folder(paintbench, width, tmp_path):
    bench, outputs = paintbench
    res = CliRunner().invoke(
        app,
        [
            "score",
            "--dataset",
            f"paintbench:{bench}",
            "--predictions",
            str(outputs),
            "--out",
            str(tmp_path / "r.jsonl"),
        ],
    )
    assert res.exit_code == 0, res.output
    _whole(res.output, width, LONG, "paintbench@1", "preservation_accuracy", "recolor")


def test_judge(width, tmp_path, monkeypatch):
    from tests.judges._server import FakeJudgeServer
    from tests.judges.test_cli import app as judge_app

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-0123456789")
    run = build_run(tmp_path / "run", ["a"], models=(LONG,))
    with FakeJudgeServer() as srv:
        config = _judge_config(tmp_path, srv)
        res = CliRunner().invoke(judge_app, ["judge", str(run), "--judge", str(config)])
    assert res.exit_code == 0, res.output
    _whole(res.output, width, "medebench-judge@paper-structure", "unparsable")


def test_calibration_score(width, tmp_path):
    z, y = make_logits(60, 3, seed=1, temper=0.5)
    groups = {"classwise-domain": np.array(["in-distribution", "shifted-scanner"] * 30)}
    path = save_predictions(as_predictions(y, logits=z, groups=groups), tmp_path / "p.npz")
    res = CliRunner().invoke(
        app, ["calibration", "score", str(path), "--by", "classwise-domain", "--resamples", "5"]
    )
    assert res.exit_code == 0, res.output
    _whole(res.output, width, "calibration@1", "in-distribution", "shifted-scanner", "brier")


def test_a_compositional_models_run(width, tmp_path, monkeypatch):
    from tests.docs.standins.apis import standins
    from tests.runs.conftest import make_native

    data = make_native(tmp_path / "data", n=2)
    env: dict[str, str] = {}
    with standins("run.md", tmp_path, env, tmp_path / "cache"):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        res = CliRunner().invoke(
            app,
            [
                "run",
                "--dataset",
                f"native:{data}",
                "--model",
                COMPOSED,
                "--out",
                str(tmp_path / "run"),
                "--no-progress",
            ],
        )
    assert res.exit_code == 0, res.output
    _whole(res.output, width, "gpt-4o+gpt-image-1")


def test_the_printer_never_cuts_a_long_name_at_40_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    table = Table(title="judging")
    for col in ("judge", "ok", "not judged"):
        table.add_column(col, justify="right" if col == "ok" else "left")
    table.add_row("medebench-judge@paper", "12", "3 no output; 2 refused")
    console = medibench._console.stdout_console()
    console.file = io.StringIO()
    console.print(table)
    text = console.file.getvalue()
    assert "┃ judge" in text  # a table: it fits with the name whole and the reasons wrapped
    _whole(text, 40, "medebench-judge@paper", "refused")


def test_dataset_describe(width, tmp_path):
    from tests.datasets.conftest import CLINIC, write_clinic

    task = "remove-the-diminutive-polyp-and-restore-the-mucosa"
    ids = {sid: (p, task if t == "denoise" else t, *rest) for sid, (p, t, *rest) in CLINIC.items()}
    data = write_clinic(tmp_path / "clinic", ids=ids)
    res = CliRunner().invoke(app, ["dataset", "describe", f"native:{data}"])
    assert res.exit_code == 0, res.output
    _whole(res.output, width, task, "perspective", "without mask", "16x12")
