"""``--limit N``: only the dataset's first N samples, in ``medibench run`` (with a shard, its share
of them; a later run without it resumes and adds the rest) and ``medibench score``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.io import read_image, write_image
from medibench.protocols import load_protocol
from medibench.runs import RunConfig, RunStore, plan_run, score_predictions
from medibench.samples import Score
from tests.runs.conftest import make_native

runner = CliRunner()


def test_the_plan_takes_the_first_n_samples_then_the_shards_share(tmp_path):
    data = make_native(tmp_path / "data", n=5)
    plan = plan_run(RunConfig(dataset=f"native:{data}", models="identity", out="r", limit=2))
    assert [s.sample_id for s in plan.samples] == ["s000", "s001"]
    shard = {}
    for i in range(2):
        config = RunConfig(
            dataset=f"native:{data}", models="identity", out="r", limit=3, shard=f"{i}/2"
        )
        shard[i] = [s.sample_id for s in plan_run(config).samples]
    assert shard == {0: ["s000", "s002"], 1: ["s001"]}  # of s000, s001, s002
    whole = RunConfig(dataset=f"native:{data}", models="identity", out="r", limit=50)
    assert len(plan_run(whole).samples) == 5
    with pytest.raises(ValueError, match="limit must be >= 1, got 0"):
        RunConfig(dataset=f"native:{data}", models="identity", out="r", limit=0)


def test_run_limit_then_a_full_run_resumes(tmp_path):
    data = make_native(tmp_path / "data", n=5)
    out = tmp_path / "run"
    args = ["run", "--dataset", f"native:{data}", "--model", "identity", "--out", str(out)]
    res = runner.invoke(app, [*args, "--limit", "2", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "generate identity: 2 done, 0 already done, 0 failed" in res.output
    with RunStore.open_existing(out) as store:
        assert [s.sample_id for s in store.samples()] == ["s000", "s001"]
        assert sorted(p.sample_id for p in store.predictions()) == ["s000", "s001"]
        assert len(store.scores()) == 2
        assert store.get_meta("config")["limit"] == 2
    res = runner.invoke(app, [*args, "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "generate identity: 3 done, 2 already done, 0 failed" in res.output
    with RunStore.open_existing(out) as store:
        assert len(store.predictions()) == 5 and len(store.scores()) == 5
        assert store.get_meta("config")["limit"] is None
    res = runner.invoke(app, [*args, "--limit", "0"])
    assert res.exit_code == 2 and "--limit" in res.output


def test_score_limit_scores_the_first_n_samples(tmp_path):
    data = make_native(tmp_path / "data", n=4)
    preds = tmp_path / "preds" / "m"
    for i in range(4):
        write_image(preds / f"s{i:03d}_0.png", read_image(data / "img" / f"s{i:03d}_t.png"))
    out, summary = tmp_path / "scores.jsonl", tmp_path / "summary.json"
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            f"native:{data}",
            "--predictions",
            str(tmp_path / "preds"),
            "--out",
            str(out),
            "--limit",
            "3",
            "--json",
            str(summary),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "3 score records (3 ok, 0 missing, 0 error) for 1 model(s)" in res.output
    records = [Score.from_json(line) for line in out.read_text().splitlines()]
    assert [r.sample_id for r in records] == ["s000", "s001", "s002"]
    rows = json.loads(summary.read_text())
    assert [r["n"] for r in rows if r["by"] == "all"] == [3]


def test_score_predictions_limit(tmp_path):
    data = make_native(tmp_path / "data", n=3)
    for i in range(3):
        write_image(
            tmp_path / "preds" / "m" / f"s{i:03d}_0.png", read_image(data / "img" / f"s{i:03d}.png")
        )
    ds = load_dataset(f"native:{data}")
    index = ds.find_predictions(tmp_path / "preds")
    proto = load_protocol("native@1")
    records = score_predictions(ds, index, [proto], k=1, limit=1, progress=False)
    assert [(r.model, r.sample_id, r.status) for r in records] == [("m", "s000", "ok")]
    assert len(score_predictions(ds, index, [proto], k=1, progress=False)) == 3
    with pytest.raises(ValueError, match="limit must be >= 1, got 0"):
        score_predictions(ds, index, [proto], limit=0, progress=False)


def test_generate_only_names_the_outputs_instead_of_empty_score_tables(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    out = tmp_path / ("a-run-folder-name-longer-than-a-terminal-line-" * 2)  # never broken
    args = ["run", "--dataset", f"native:{data}", "--model", "identity", "--out", str(out)]
    res = runner.invoke(app, [*args, "--stage", "generate", "--no-progress"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert f"outputs in {out / 'outputs'}; score them with the same command and --stage score" in (
        text
    )
    assert "native@1" not in text  # no leaderboard of a protocol that scored nothing
    res = runner.invoke(app, [*args, "--stage", "generate", "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 2 and "--stage generate scores nothing" in res.output
    res = runner.invoke(app, [*args, "--stage", "score", "--no-progress"])
    assert res.exit_code == 0 and "native@1" in res.output  # the scores, once scored
