"""Keeping requests in flight: bodies made ahead of need, answers committed in groups."""

from __future__ import annotations

import errno
import json
import time

import pytest

from medibench.io._write import DiskFullError
from medibench.judges import JudgeConfig, JudgementStore, MissingApiKeyError, _judging, judge_run
from medibench.runs import RunStore
from tests.judges._server import FakeJudgeServer, Reply
from tests.judges.conftest import build_run

WELL = "Editing Accuracy: [7]/10\nContextual Preservation: [8]/10\nVisual Quality: [6]/10"


def test_a_full_disk_while_committing_answers_stops_the_run(tmp_path, api_key, monkeypatch):
    run = build_run(tmp_path / "run", [f"t{i}" for i in range(6)])

    def full(self, items):
        raise DiskFullError(errno.ENOSPC, "No space left on device", str(run / "run.sqlite"))

    monkeypatch.setattr(JudgementStore, "put_many", full)
    with FakeJudgeServer(lambda b, n: Reply(WELL, delay=0.05)) as srv:
        cfg = JudgeConfig(model="judge-x", base_url=srv.base_url, concurrency=1)
        with pytest.raises(DiskFullError, match="no space left on the device to write"):
            judge_run(run, ["medebench-judge@paper-structure"], cfg)
    assert 1 <= srv.count <= 2  # the failed commit stopped the next call (or the one after)


def test_answers_and_fills_of_many_calls_share_commits(tmp_path, api_key, monkeypatch):
    run = build_run(tmp_path / "run", [f"t{i}" for i in range(24)])
    batches: list[int] = []
    put_many = JudgementStore.put_many

    def counted(self, items):
        batches.append(len(items))
        time.sleep(0.02)  # a slow disk: answers arrive while it commits
        put_many(self, items)

    monkeypatch.setattr(JudgementStore, "put_many", counted)
    with FakeJudgeServer(lambda b, n: Reply(WELL)) as srv:
        cfg = JudgeConfig(model="judge-x", base_url=srv.base_url, concurrency=8)
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], cfg)
    assert rep.counts == {"ok": 24} and sum(batches) == 24  # each answer stored once
    assert len(batches) < 24  # answers that arrived during a commit went into the next one
    with RunStore(run) as s:
        filled = [sc.metrics for sc in s.scores()]
        stored = s.connection.execute("SELECT COUNT(*), MIN(status) FROM judgements").fetchone()
    assert stored == (24, "ok")
    assert len(filled) == 48 and all(m["ea"] == 0.7 and m["vq"] == 0.6 for m in filled)


def test_a_rerun_links_every_cached_judgement_in_one_transaction(tmp_path, api_key, monkeypatch):
    run = build_run(tmp_path / "run", [f"t{i}" for i in range(5)], models=("m1", "m2"))
    with FakeJudgeServer(lambda b, n: Reply(WELL)) as srv:
        cfg = JudgeConfig(model="judge-x", base_url=srv.base_url, concurrency=4)
        judge_run(run, ["medebench-judge@paper-structure"], cfg)
        with RunStore(run) as s:
            s.connection.execute("DELETE FROM judgement_links")
        linked = []
        link_many = JudgementStore.link_many

        def counted(self, items):
            linked.append(len(items))
            link_many(self, items)

        monkeypatch.setattr(JudgementStore, "link_many", counted)
        (again,) = judge_run(run, ["medebench-judge@paper-structure"], cfg)
    assert srv.count == 10 and again.cached == 10 and [n for n in linked if n] == [10]
    with RunStore(run) as s:
        links = s.connection.execute("SELECT COUNT(*) FROM judgement_links").fetchone()[0]
    assert links == 10


def test_a_key_met_again_in_a_later_chunk_links_and_fills_both(tmp_path, api_key, monkeypatch):
    # One prediction per chunk: m2's byte-identical outputs are planned after m1's calls went
    # out (and were answered, or reused on the second run).
    monkeypatch.setattr(_judging, "PLAN_CHUNK", 1)
    monkeypatch.setattr(_judging, "MAX_PLAN_CHUNK", 1)
    run = build_run(tmp_path / "run", [f"t{i}" for i in range(3)], models=("m1", "m2"))
    for i in range(3):
        src = run / "outputs" / "m1" / f"s{i:02d}_0.png"
        (run / "outputs" / "m2" / f"s{i:02d}_0.png").write_bytes(src.read_bytes())
    with FakeJudgeServer(lambda b, n: Reply(WELL)) as srv:
        cfg = JudgeConfig(model="judge-x", base_url=srv.base_url, concurrency=2)
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], cfg)
        assert srv.count == 3 and rep.planned == 3 and rep.counts == {"ok": 3}
        with RunStore(run) as s:
            s.connection.execute("DELETE FROM judgement_links")
        (again,) = judge_run(run, ["medebench-judge@paper-structure"], cfg)
        assert srv.count == 3 and again.cached == 3
    with RunStore(run) as s:
        links = JudgementStore(s).linked(judge_model="judge-x")
        filled = {(sc.model, sc.sample_id): sc.metrics["ea"] for sc in s.scores()}
    assert sorted((m, sid) for m, sid, _, _ in links) == [
        (m, f"s{i:02d}") for m in ("m1", "m2") for i in range(3)
    ]
    assert set(filled.values()) == {0.7} and len(filled) == 6


def test_progress_comes_after_the_plan_total_and_once_per_call(tmp_path, api_key, monkeypatch):
    monkeypatch.setattr(_judging, "PLAN_CHUNK", 1)
    monkeypatch.setattr(_judging, "MAX_PLAN_CHUNK", 1)
    run = build_run(tmp_path / "run", [f"t{i}" for i in range(5)])
    events: list = []
    with FakeJudgeServer(lambda b, n: Reply(WELL)) as srv:
        cfg = JudgeConfig(model="judge-x", base_url=srv.base_url, concurrency=4)
        judge_run(
            run,
            ["medebench-judge@paper-structure"],
            cfg,
            on_plan=lambda n: events.append(("plan", n)),
            on_progress=lambda: events.append("done"),
        )
    assert events == [("plan", 5)] + ["done"] * 5


def test_a_missing_key_stops_before_any_call_or_fill(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = build_run(tmp_path / "run", ["t0", "t1"])
    with FakeJudgeServer(lambda b, n: Reply(WELL)) as srv:
        cfg = JudgeConfig(model="judge-x", base_url=srv.base_url)
        with pytest.raises(MissingApiKeyError, match="OPENAI_API_KEY"):
            judge_run(run, ["medebench-judge@paper-structure"], cfg)
    assert srv.count == 0
    with RunStore(run) as s:
        assert all(sc.metrics["ea"] is None for sc in s.scores())


def test_two_judges_filling_the_same_rows_leave_the_last_ones_values(tmp_path, api_key):
    # B's answers fill ea = 0.5; then a run of A (0.7) and B (cached 0.5) must end with 0.5:
    # B compares with the rows as A left them, not as they were when the run started.
    run = build_run(tmp_path / "run", ["t0", "t1"])
    a, b = "medebench-judge@paper-structure", "medebench-judge@paper-structure-instruction"

    def by_judge(body, n):
        text = json.dumps(body)
        return Reply(WELL.replace("[7]", "[5]") if "Editing instruction given" in text else WELL)

    with FakeJudgeServer(by_judge) as srv:
        cfg = JudgeConfig(model="judge-x", base_url=srv.base_url)
        judge_run(run, [b], cfg)
        with RunStore(run) as s:
            assert {sc.metrics["ea"] for sc in s.scores()} == {0.5}
        judge_run(run, [a, b], cfg)
        assert srv.count == 4
    with RunStore(run) as s:
        assert {sc.metrics["ea"] for sc in s.scores()} == {0.5}
