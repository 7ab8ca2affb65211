"""The store owns every table: stages declare theirs, merge and export cover them all, per-metric
reasons are a column, and an older run.sqlite opens and gains what it lacks."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from medibench.judges import JudgeConfig, JudgementStore, judge_run
from medibench.runs import RunStore
from medibench.runs._shard import merge
from medibench.runs.export import export_run, export_tables
from medibench.samples import Score
from tests.judges._server import FakeJudgeServer, Reply, first_text
from tests.judges.conftest import build_run

WELL = "Editing Accuracy: [7]/10\nContextual Preservation: [8]/10\nVisual Quality: [6]/10"
JUDGE = "medebench-judge@paper-structure"


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-0123456789")


def _reply(body, n):
    text = first_text(body)
    return Reply("The edit looks fine to me.") if ":\nbad:" in text else Reply(WELL)


def _shards(tmp_path):
    """Two shard runs of one four-sample run: samples s00, s02 and s01, s03."""
    whole = build_run(tmp_path / "whole", ["ok", "bad", "ok", "bad"])
    shards = []
    for i in range(2):
        shard = tmp_path / f"shard-{i}"
        shutil.copytree(whole, shard)
        with RunStore(shard) as st:
            drop = [f"s{j:02d}" for j in range(4) if j % 2 != i]
            marks = ", ".join("?" * len(drop))
            with st.transaction():
                for table in ("samples", "predictions", "scores"):
                    st.connection.execute(f"DELETE FROM {table} WHERE sample_id IN ({marks})", drop)
            for sid in drop:
                for p in (shard / "outputs" / "m1").glob(f"{sid}_*.png"):
                    p.unlink()
        shards.append(shard)
    return shards


def _cfg(srv):
    return JudgeConfig(
        model="judge-x",
        base_url=srv.base_url,
        backoff_s=0.01,
        price_input_per_mtok=2.0,
        price_output_per_mtok=10.0,
    )


def test_merging_judged_shards_keeps_every_judgement(tmp_path, api_key):
    shards = _shards(tmp_path)
    with FakeJudgeServer(_reply) as srv:
        for shard in shards:
            judge_run(shard, [JUDGE], _cfg(srv))
        paid = srv.count
        assert paid == 4
        rep = merge(shards, tmp_path / "merged")
        assert rep.tables == {"judgements": 4, "judge_spend": 4, "judgement_links": 4}
        assert rep.skipped_tables == []
        with RunStore(tmp_path / "merged") as st:
            js = JudgementStore(st)
            linked = {(sid, j.status) for _, sid, _, j in js.linked()}
            assert linked == {("s00", "ok"), ("s01", "unparsable"), ("s02", "ok"),
                              ("s03", "unparsable")}  # fmt: skip
            spent = [JudgementStore(RunStore(s)).spent_usd() for s in shards]
            assert js.spent_usd() == pytest.approx(sum(spent)) and js.spent_usd() > 0
            paper = {s.sample_id: s for s in st.scores() if s.protocol_version == "paper"}
            assert paper["s00"].metrics["ea"] == 0.7 and paper["s02"].metrics["vq"] == 0.6
            assert paper["s01"].metrics["ea"] is None
            assert paper["s01"].reasons["ea"].startswith("unparsable")
        # The merged run holds the cache: judging it again pays for nothing.
        judge_run(tmp_path / "merged", [JUDGE], _cfg(srv))
        assert srv.count == paid
    again = merge(shards, tmp_path / "merged")  # merging again adds no row, no spend
    assert set(again.tables.values()) == {0}


def test_export_covers_every_table_of_the_run(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok", "bad"])
    with FakeJudgeServer(_reply) as srv:
        judge_run(run, [JUDGE], _cfg(srv))
    with RunStore(run) as st:
        names = [t.name for t in st.tables()]
        assert names[:4] == ["meta", "samples", "predictions", "scores"]
        assert {"judgements", "judge_spend", "judgement_links"} <= set(names)
        counts = export_run(st, tmp_path / "out" / "run.jsonl")
        tables = export_tables(st, tmp_path / "tables", format="csv")
    assert counts["records"] == 4 and counts["judgements"] == 2 and counts["judgement_links"] == 2
    text = (tmp_path / "out" / "run.judgements.jsonl").read_text()
    assert {json.loads(x)["status"] for x in text.splitlines()} == {"ok", "unparsable"}
    assert "sk-test-secret" not in text
    assert tables == {k: v for k, v in counts.items() if k != "records"}
    assert (tmp_path / "tables" / "judge_spend.csv").read_text().startswith("key,judge,")


def test_reasons_are_a_column_that_round_trips(tmp_path):
    # A reason holding "; " and ": " (an exception's text): the joined error cannot be split back.
    why = "ValueError: bad mask; values: 0, 7"
    s = Score(
        sample_id="a",
        model="m",
        protocol="native",
        protocol_version="1",
        metrics={"cp": None, "ea": None, "ssim": 0.5},
        reasons={"cp": why, "ea": "not judged"},
    )
    assert s.error == f"cp: {why}; ea: not judged"  # the record's text, schema unchanged
    assert "reasons" not in json.loads(s.to_json())
    with RunStore(tmp_path) as st:
        st.put_score(s)
        (back,) = st.scores()
        assert back == s and back.reasons == {"cp": why, "ea": "not judged"}
        st.put_judged_metrics(
            model="m", sample_id="a", k=0, protocol="native", version="1", values={"ea": 0.25}
        )
        (judged,) = st.scores()
        assert judged.reasons == {"cp": why} and judged.error == f"cp: {why}"
        stored = st.connection.execute("SELECT reasons FROM scores").fetchone()[0]
        assert json.loads(stored) == {"cp": why}


_OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE samples (sample_id TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE predictions (
    model TEXT NOT NULL, sample_id TEXT NOT NULL, k INTEGER NOT NULL,
    seed INTEGER, path TEXT, status TEXT NOT NULL, error TEXT, elapsed_s REAL,
    created_at REAL NOT NULL, PRIMARY KEY (model, sample_id, k));
CREATE TABLE scores (
    model TEXT NOT NULL, sample_id TEXT NOT NULL, k INTEGER NOT NULL,
    protocol TEXT NOT NULL, protocol_version TEXT NOT NULL,
    metrics TEXT NOT NULL, status TEXT NOT NULL, error TEXT, notes TEXT NOT NULL,
    created_at REAL NOT NULL, PRIMARY KEY (model, sample_id, k, protocol, protocol_version));
CREATE TABLE judge_spend (
    key TEXT NOT NULL, judge TEXT NOT NULL, judge_model TEXT NOT NULL, cost_usd REAL NOT NULL,
    at REAL NOT NULL);
INSERT INTO meta VALUES ('schema_version', '"1"');
INSERT INTO scores VALUES ('m', 'a', 0, 'native', '1', '{"cp": null, "ea": null}', 'ok',
    'cp: no ROI mask; ea: not judged', '[]', 0);
INSERT INTO judge_spend VALUES ('k1', 'j', 'judge-x', 0.5, 0);
"""


def test_an_old_run_store_opens_and_gains_the_new_columns(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    db = sqlite3.connect(old / "run.sqlite")
    db.executescript(_OLD_SCHEMA)
    db.close()
    with RunStore.open_existing(old) as st:
        (s,) = st.scores()
        assert s.error == "cp: no ROI mask; ea: not judged"
        assert s.reasons == {"cp": "no ROI mask", "ea": "not judged"}
        st.put_judged_metrics(
            model="m", sample_id="a", k=0, protocol="native", version="1", values={"ea": 0.5}
        )
        assert st.scores()[0].error == "cp: no ROI mask"
        # A table from before declarations: described from its schema (a ledger: no key).
        (spend,) = [t for t in st.tables() if t.name == "judge_spend"]
        assert spend.key == () and not spend.per_output
    rep = merge([old], tmp_path / "merged")
    assert rep.tables == {"judge_spend": 1}
    with RunStore(tmp_path / "merged") as st:
        assert st.scores()[0].reasons == {"cp": "no ROI mask"}


def test_declaring_a_table_adds_missing_columns_and_refuses_what_cannot_be_added(tmp_path):
    with RunStore(tmp_path) as st:
        st.declare_table("probe", "model TEXT, sample_id TEXT, k INTEGER, v REAL", ("model",),
                         stage="analyze")  # fmt: skip
        t = st.declare_table(
            "probe",
            "model TEXT, sample_id TEXT, k INTEGER, v REAL, note TEXT DEFAULT ''",
            ("model",),
            stage="analyze",
        )
        assert t.per_output and st.table_rows("probe") == (
            ["model", "sample_id", "k", "v", "note"],
            [],
        )
        with pytest.raises(ValueError, match="cannot be added"):
            st.declare_table("probe", "model TEXT, w REAL NOT NULL", ("model",), stage="analyze")
        with pytest.raises(ValueError, match="not declared"):
            st.declare_table("other", "a TEXT", ("b",), stage="analyze")


def test_the_export_command_writes_the_judge_tables_beside_the_records(tmp_path, api_key):
    from typer.testing import CliRunner

    from medibench.cli import app

    run = build_run(tmp_path / "run", ["ok", "bad"])
    with FakeJudgeServer(_reply) as srv:
        judge_run(run, [JUDGE], _cfg(srv))
    out = tmp_path / "e" / "scores.jsonl"
    res = CliRunner().invoke(app, ["export", str(run), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(out.read_text().splitlines()) == 4
    judged = (out.parent / "scores.judgements.jsonl").read_text().splitlines()
    assert {json.loads(x)["status"] for x in judged} == {"ok", "unparsable"}
    assert "judgements 2" in res.output
    res = CliRunner().invoke(
        app, ["export", str(run), "--out", str(tmp_path / "only.jsonl"), "--no-tables"]
    )
    assert res.exit_code == 0 and not list(tmp_path.glob("only.*.jsonl"))
