"""Judging what users download: ``medibench judge RUN --dataset D --predictions DIR`` and
``medibench score --judge`` on MedEBench's published ``generated_images/`` (issue 37, item 1)."""

import json

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.runs import RunStore
from tests.benchmarks.medebench.conftest import build_medebench
from tests.judges._server import FakeJudgeServer
from tests.judges.test_cli import _judge_config

runner = CliRunner()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    return build_medebench(tmp_path_factory.mktemp("MedEBench"))


def _judge(run, root, cfg, *extra):
    return runner.invoke(
        app,
        ["judge", str(run), "--dataset", f"medebench:{root}",
         "--predictions", str(root / "generated_images"), "--judge", str(cfg), "--no-progress",
         *extra],
    )  # fmt: skip


def test_published_outputs_are_judged_in_a_run_folder_made_from_them(
    published, tmp_path, api_key
):
    run = tmp_path / "judged"
    with FakeJudgeServer() as srv:
        cfg = _judge_config(tmp_path, srv)
        res = _judge(run, published, cfg)
        assert res.exit_code == 0, res.output
        calls = srv.count
        assert calls > 0
        with RunStore.open_existing(run) as store:
            config = store.get_meta("config")
            preds = store.predictions(status="ok")
            scores = store.scores()
        assert config["predictions"] == str((published / "generated_images").resolve())
        assert config["dataset"] == f"medebench:{published}"
        assert sorted((p.model, p.sample_id) for p in preds) == [
            ("modelA", "1"), ("modelA", "2"), ("modelA", "3"), ("modelA", "4"), ("modelA", "5"),
            ("modelB", "1"), ("modelB", "2"),
        ]  # fmt: skip
        # read where they lie: nothing copied into the run folder
        assert all(p.path.startswith(str(published)) for p in preds)
        assert not (run / "outputs").exists()
        judged = [s for s in scores if s.status == "ok" and s.metrics.get("ea") is not None]
        # The scripted answer: editing accuracy 7/10, visual quality 6/10, stored on [0, 1].
        assert judged and {s.metrics["ea"] for s in judged} == {0.7}
        assert {s.metrics["vq"] for s in judged} == {0.6}
        # Again: nothing new to score or to ask.
        res = _judge(run, published, cfg)
        assert res.exit_code == 0, res.output
        assert srv.count == calls
        assert "score medebench@paper: 0 done" in res.output


def test_the_report_of_published_outputs_shows_the_judged_values(published, tmp_path, api_key):
    from medibench.report import build_report

    run = tmp_path / "judged"
    with FakeJudgeServer() as srv:
        assert _judge(run, published, _judge_config(tmp_path, srv)).exit_code == 0
    page = build_report(run, plots=False, progress=False).read_text()
    assert "modelA" in page and "modelB" in page
    # the leaderboards carry the judged means (the scripted 7/10, stored as 0.7)
    assert '<tr><td>modelA</td><td>ea</td><td data-v="0.7">0.700' in page
    assert '<tr><td>modelB</td><td>vq</td><td data-v="0.6">0.600' in page


def test_score_with_a_judge_writes_the_judged_records(published, tmp_path, api_key):
    out = tmp_path / "scores.jsonl"
    with FakeJudgeServer() as srv:
        res = runner.invoke(
            app,
            ["score", "--dataset", f"medebench:{published}",
             "--predictions", str(published / "generated_images"), "--out", str(out),
             "--judge", str(_judge_config(tmp_path, srv)), "--no-progress"],
        )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert (tmp_path / "scores.run" / "run.sqlite").is_file()  # the default --run
    records = [json.loads(line) for line in out.read_text().splitlines()]
    paper = [r for r in records if r["protocol"] == "medebench" and r["status"] == "ok"]
    assert paper and all(r["metrics"]["ea"] == 0.7 for r in paper)


def test_published_outputs_are_refused_where_they_do_not_belong(published, tmp_path, api_key):
    with FakeJudgeServer() as srv:
        cfg = _judge_config(tmp_path, srv)
        res = _judge(tmp_path / "judged", published, cfg)
        assert res.exit_code == 0, res.output
        other = tmp_path / "other"
        (other / "generated_images").mkdir(parents=True)
        res = runner.invoke(
            app,
            ["judge", str(tmp_path / "judged"), "--dataset", f"medebench:{published}",
             "--predictions", str(other / "generated_images"), "--judge", str(cfg)],
        )  # fmt: skip
        assert res.exit_code == 2
        assert "was made from the outputs in" in res.output
        made = tmp_path / "made"
        res = runner.invoke(
            app, ["run", "--dataset", f"medebench:{published}", "--model", "identity", "--out",
                  str(made), "--no-progress"],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        res = _judge(made, published, cfg)
        assert res.exit_code == 2 and "made by `medibench run`" in res.output
        res = runner.invoke(
            app, ["judge", str(tmp_path / "x"), "--predictions", str(published), "--judge",
                  str(cfg)],
        )  # fmt: skip
        assert res.exit_code == 2 and "need both --dataset D and --predictions DIR" in res.output
        assert not (tmp_path / "x").exists()
        res = runner.invoke(
            app, ["score", "--dataset", f"medebench:{published}", "--predictions",
                  str(published / "generated_images"), "--out", str(tmp_path / "s.jsonl"),
                  "--run", str(tmp_path / "r")],
        )  # fmt: skip
        # without --judge, --run keeps the outputs as a run folder, scored and not judged
        assert res.exit_code == 0, res.output
        from medibench.report._browser import read_judgements
        from medibench.runs import RunStore

        with RunStore.open_existing(tmp_path / "r") as store:
            assert store.scores() and store.predictions(status="ok")
            assert read_judgements(store.connection) == {"outputs": {}, "judges": {},
                                                         "answers": {}}  # fmt: skip
