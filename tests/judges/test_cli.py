import json

import pytest
import typer
from typer.testing import CliRunner

from medibench.cli.judge import judge
from medibench.judges._cli import agreement
from tests.judges._server import FakeJudgeServer, Reply
from tests.judges.conftest import build_run

app = typer.Typer()
app.command()(judge)
app.command()(agreement)
runner = CliRunner()


def _judge_config(tmp_path, srv, **kw):
    path = tmp_path / "judge.json"
    path.write_text(
        json.dumps(
            {
                "model": "judge-x",
                "base_url": srv.base_url,
                "price_input_per_mtok": 1.0,
                "price_output_per_mtok": 10.0,
                "backoff_s": 0.01,
                **kw,
            }
        )
    )
    return path


def test_judge_dry_run_then_judge_then_rerun(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["a", "b", "c"])
    with FakeJudgeServer() as srv:
        cfg = _judge_config(tmp_path, srv)
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--dry-run"])
        assert res.exit_code == 0, res.output
        assert "medebench-judge@paper-structure" in res.output and srv.count == 0
        assert "$" in res.output  # estimated cost
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg)])
        assert res.exit_code == 0, res.output
        assert srv.count == 3 and "$0.0060" in res.output
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--passes", "2"])
        assert res.exit_code == 0 and srv.count == 6 and "spread" in res.output
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--passes", "2"])
        assert res.exit_code == 0 and srv.count == 6


def test_judge_with_model_and_url_and_budget(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["a", "b", "c"])
    with FakeJudgeServer(lambda b, n: Reply("Rubric Score: 50/100")) as srv:
        res = runner.invoke(
            app,
            [
                "judge",
                str(run),
                "--judge-model",
                "m",
                "--base-url",
                srv.base_url,
                "--protocol",
                "medebench@paper",
            ],
        )
        assert res.exit_code == 0, res.output
        assert srv.count == 3 and "missing judged values" in res.output
        cfg = _judge_config(
            tmp_path, srv, concurrency=1, est_image_tokens=300, est_output_tokens=100
        )
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--max-cost", "0.003"])
        assert res.exit_code == 0, res.output
        assert srv.count == 4 and "budget reached" in res.output


def test_judge_errors_exit_2_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = build_run(tmp_path / "run", ["a"])
    res = runner.invoke(
        app, ["judge", str(run), "--judge-model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    )
    assert res.exit_code == 2 and "OPENAI_API_KEY" in res.output
    res = runner.invoke(app, ["judge", str(run)])
    assert res.exit_code == 2 and "--judge" in res.output
    res = runner.invoke(app, ["judge", str(tmp_path / "nope"), "--judge-model", "m"])
    assert res.exit_code == 2 and "no run.sqlite" in res.output
    bad = tmp_path / "j.json"
    bad.write_text(json.dumps({"model": "m", "api_key": "sk-x"}))
    res = runner.invoke(app, ["judge", str(run), "--judge", str(bad)])
    assert res.exit_code == 2 and "does not belong" in res.output


def test_agreement_between_two_judges_and_a_human_csv(tmp_path, api_key):
    tags = [f"t{i}" for i in range(8)]
    run = build_run(tmp_path / "run", tags, models=("m1", "m2", "m3"))
    score = {}

    def by_output(body, n):  # each request gets its own score, stable per request content
        key = json.dumps(body["messages"])[-2000:]
        score.setdefault(key, len(score) % 11)
        return Reply(
            f"Editing Accuracy: {score[key]}/10\nContextual Preservation: 5/10\n"
            f"Visual Quality: {10 - score[key]}/10"
        )

    with FakeJudgeServer(by_output) as srv:
        for model in ("judge-a", "judge-b"):
            res = runner.invoke(
                app, ["judge", str(run), "--judge-model", model, "--base-url", srv.base_url]
            )
            assert res.exit_code == 0, res.output
    res = runner.invoke(
        app,
        [
            "agreement",
            f"{run}#judge-a",
            f"{run}#judge-b",
            "--resamples",
            "100",
            "--csv",
            str(tmp_path / "agr.csv"),
            "--json",
            str(tmp_path / "agr.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "ICC(2,1)" in res.output and "ea" in res.output and (tmp_path / "agr.csv").exists()
    import csv

    by_csv = list(csv.DictReader((tmp_path / "agr.csv").open()))
    by_json = json.loads((tmp_path / "agr.json").read_text())
    assert [r["metric"] for r in by_json] == [r["metric"] for r in by_csv] and by_json
    assert all(f"{j['pearson']:.3f}" in res.output for j in by_json if j["pearson"] is not None)
    assert [float(r["pearson"]) for r in by_csv] == [j["pearson"] for j in by_json]
    human = tmp_path / "human.csv"
    rows = ["sample_id,model,ea"] + [
        f"s{i:02d},m{j},{(i * 3 + j) % 10 / 10}" for i in range(8) for j in (1, 2, 3)
    ]
    human.write_text("\n".join(rows) + "\n")
    res = runner.invoke(
        app,
        [
            "agreement",
            str(run),
            str(human),
            "--protocol",
            "medebench@paper",
            "--metric",
            "ea",
            "--resamples",
            "100",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "│ 24 │" in res.output or " 24 " in res.output, res.output
    res = runner.invoke(app, ["agreement", str(human), str(tmp_path / "none.csv")])
    assert res.exit_code == 2


def test_max_cost_is_a_budget_for_the_run_folder_across_invocations(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["a", "b", "c", "d", "e"])
    with FakeJudgeServer() as srv:  # 1000 in, 100 out at $1 / $10 per Mtok: $0.002 a call
        cfg = _judge_config(
            tmp_path, srv, concurrency=1, est_image_tokens=300, est_output_tokens=100
        )
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--max-cost", "0.005"])
        assert res.exit_code == 0, res.output
        assert srv.count == 2 and "budget: $0.0000 of $0.0050 already spent" in res.output
        assert "$0.0000 before, $0.0040 after, of the $0.0050 budget" in res.output
        # The same budget again: the folder has spent $0.004, so nothing more starts.
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--max-cost", "0.005"])
        assert res.exit_code == 0, res.output
        assert srv.count == 2 and "budget: $0.0040 of $0.0050 already spent" in res.output
        assert "budget reached, 3 call(s) not started" in res.output
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--max-cost", "0.009"])
        assert res.exit_code == 0 and srv.count == 4
        assert "$0.0040 before, $0.0080 after, of the $0.0090 budget" in res.output


def test_nothing_to_judge_names_the_scored_protocols_and_their_judges(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["a"], protocols=(("medebench", "1"),))
    with FakeJudgeServer() as srv:
        cfg = _judge_config(tmp_path, srv)
        res = runner.invoke(
            app, ["judge", str(run), "--judge", str(cfg), "--protocol", "miedb-rubric@1"]
        )
        assert srv.count == 0
    assert res.exit_code == 2 and "nothing to judge" in res.output
    text = " ".join(res.output.split())
    assert "medebench@1 (1 rows) <- medebench-judge@paper-structure, " in text
    assert "miedb-rubric@1 fills miedb@paper, miedb@1" in text
    assert "predictions" not in text


def test_judge_writes_the_run_folders_judge_summary(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["a", "b", "c"])
    # the second call's answer has no score statement: unparsable (missing, never a 0)
    replies = {2: Reply("I would rather not put a number on it.")}
    with FakeJudgeServer(lambda body, n: replies.get(n, Reply())) as srv:
        cfg = _judge_config(tmp_path, srv)
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg)])
        assert res.exit_code == 0, res.output
        path = run / "judge_summary.json"
        assert f"summary -> {path}" in res.output.replace("\n", "")
        (row,) = json.loads(path.read_text())
        assert row == {
            "judge": "medebench-judge@paper-structure",
            "judge_model": "judge-x",
            "items": 3,
            "ok": 2,
            "refused": 0,
            "unparsable": 1,
            "error": 0,
            "cost_usd": row["cost_usd"],
        }
        assert row["cost_usd"] == pytest.approx(3 * 0.002)  # 1000 in, 100 out at $1 / $10
        # a second pass: the folder's totals, not this invocation's
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--passes", "2"])
        assert res.exit_code == 0 and srv.count == 6
        (row,) = json.loads(path.read_text())
        assert (row["items"], row["ok"], row["unparsable"]) == (6, 5, 1)
        assert row["cost_usd"] == pytest.approx(6 * 0.002)
        res = runner.invoke(app, ["judge", str(run), "--judge", str(cfg), "--dry-run"])
        assert res.exit_code == 0 and "summary ->" not in res.output
