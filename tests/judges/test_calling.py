"""Keeping requests in flight: bodies made ahead of need, answers committed in groups."""

from __future__ import annotations

import errno
import time

import pytest

from medibench.io._write import DiskFullError
from medibench.judges import JudgeConfig, JudgementStore, judge_run
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
    assert srv.count == 10 and again.cached == 10 and linked == [10]
    with RunStore(run) as s:
        links = s.connection.execute("SELECT COUNT(*) FROM judgement_links").fetchone()[0]
    assert links == 10
