"""The judge issue's bar, end to end through the real CLI: run a model on MedEBench and MieDB
layouts, judge the run against a local OpenAI-compatible server, and see the judged columns in
the leaderboards and the export, with missing judgements counted (never 0)."""

import json

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.samples import Score
from tests.benchmarks.medebench.conftest import build_medebench
from tests.benchmarks.miedb.conftest import build_layout
from tests.judges._server import FakeJudgeServer, Reply

runner = CliRunner()


def _export(run, tmp_path):
    out = tmp_path / "scores.jsonl"
    res = runner.invoke(app, ["export", str(run), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return [Score.from_json(x) for x in out.read_text().splitlines()]


def test_medebench_paper_judged_columns_with_missing_counted(tmp_path, api_key):
    root = build_medebench(tmp_path / "MedEBench")
    run = tmp_path / "run"
    args = [
        "run",
        "--dataset",
        f"medebench:{root}",
        "--model",
        "identity",
        "--out",
        str(run),
        "--no-progress",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output

    def reply(body, n):  # every third answer is a refusal: missing, never 0
        if n % 3 == 0:
            return Reply("I cannot assess these images.")
        return Reply(
            "Editing Accuracy: [7]/10\nContextual Preservation: [8]/10\nVisual Quality: [6]/10"
        )

    with FakeJudgeServer(reply) as srv:
        res = runner.invoke(
            app,
            [
                "judge",
                str(run),
                "--judge-model",
                "judge-x",
                "--base-url",
                srv.base_url,
                "--protocol",
                "medebench@paper",
            ],
        )
        assert res.exit_code == 0, res.output
        calls = srv.count
        assert calls > 0
        again = runner.invoke(
            app,
            [
                "judge",
                str(run),
                "--judge-model",
                "judge-x",
                "--base-url",
                srv.base_url,
                "--protocol",
                "medebench@paper",
            ],
        )
        assert again.exit_code == 0 and srv.count == calls  # cached: no second paid call

    paper = [s for s in _export(run, tmp_path) if s.protocol_version == "paper"]
    judged = [s for s in paper if s.metrics.get("ea") is not None]
    missing = [s for s in paper if s.status == "ok" and s.metrics.get("ea") is None]
    assert judged and missing
    assert {s.metrics["ea"] for s in judged} == {0.7} and {s.metrics["vq"] for s in judged} == {0.6}
    assert all("ea: refused" in s.error for s in missing)

    # re-running skips all work and prints the leaderboards; --json writes what they show
    shown = runner.invoke(app, [*args, "--json", str(tmp_path / "summary.json")])
    assert shown.exit_code == 0, shown.output
    rows = json.loads((tmp_path / "summary.json").read_text())
    (row,) = [
        r for r in rows if (r["protocol_version"], r["by"], r["group"]) == ("paper", "all", "micro")
    ]
    assert row["ea_n"] == len(judged) and row["n"] - row["ea_n"] == len(missing)
    assert row["ea"] == pytest.approx(0.7) and "0.7000" in shown.output


def test_miedb_rubric_fills_modification_samples(tmp_path, api_key):
    layout = build_layout(tmp_path / "MieDB")
    run = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "run",
            "--dataset",
            f"miedb:{layout.root}",
            "--model",
            "identity",
            "--out",
            str(run),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    with FakeJudgeServer(lambda body, n: Reply("Rubric Score: 64/100")) as srv:
        res = runner.invoke(
            app,
            [
                "judge",
                str(run),
                "--judge-model",
                "judge-x",
                "--base-url",
                srv.base_url,
                "--protocol",
                "miedb@paper",
            ],
        )
        assert res.exit_code == 0, res.output
    paper = [s for s in _export(run, tmp_path) if s.protocol_version == "paper"]
    rubric = {s.metrics.get("rubric") for s in paper if "rubric" in s.metrics}
    assert rubric == {64.0}
    # perception and transformation records never carry the modification rubric
    assert any("rubric" not in s.metrics for s in paper)
