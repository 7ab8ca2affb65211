"""Issue 10's judge bar: a server that mixes good answers, format quotes, refusals with numbers,
HTML 200s, truncated JSON and 429s; a judge process killed mid-run; a server that echoes the key.
Through the real CLI where the user would meet it."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.judges import JudgeConfig, JudgementStore, judge_run
from medibench.runs import RunStore
from tests._sqlite import count_rows
from tests.judges._server import FakeJudgeServer, Reply, first_text
from tests.judges.conftest import build_run

runner = CliRunner()
WELL = "Editing Accuracy: [{}]/10\nContextual Preservation: [8]/10\nVisual Quality: [6]/10"
GOOD = {  # tag -> (answer, EA it must give)
    "good1": (WELL.format(7), 0.7),
    "good2": (
        "**Editing Accuracy:** 9/10\n**Contextual Preservation:** 8/10\n"
        "**Visual Quality:** **5**/10",
        0.9,
    ),
    "good3": ('{"editing_accuracy": 3, "contextual_preservation": 4, "visual_quality": 2}', 0.3),
}
BAD = {  # tag -> (reply, stored status)
    "quote": (
        Reply("The format is e.g. 'Editing Accuracy: [10]/10'. I cannot see the edited image"),
        "refused",
    ),
    "quote2": (
        Reply(
            "Answer as 'Editing Accuracy: [10]/10', 'Contextual Preservation: [10]/10', "
            "'Visual Quality: [10]/10'."
        ),
        "unparsable",
    ),
    "refusal": (Reply("I'm sorry, I cannot evaluate these images. Editing Accuracy: 0"), "refused"),
    "html": (
        Reply(raw="<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
        "error",
    ),
    "trunc": (Reply(raw='{"id": "c", "object": "chat.completion", "choices": [{"ind'), "error"),
    "limited": (Reply(status=429, headers={"Retry-After": "0"}), "error"),
}
TAGS = [*GOOD, *BAD, "slow429"]  # slow429: one 429, then a good answer


def _tag(body) -> str:
    text = first_text(body)
    return next(t for t in TAGS if f"\n{t}:" in text)


def _mixed():
    seen: Counter = Counter()
    lock = threading.Lock()

    def reply(body, n):
        tag = _tag(body)
        with lock:
            seen[tag] += 1
            first = seen[tag] == 1
        if tag in GOOD:
            return Reply(GOOD[tag][0])
        if tag == "slow429":
            return (
                Reply(status=429, headers={"Retry-After": "0"}) if first else Reply(WELL.format(4))
            )
        return BAD[tag][0]

    return reply, seen


def _config(tmp_path, srv, **kw):
    path = tmp_path / "judge.json"
    cfg = {
        "model": "judge-x",
        "base_url": srv.base_url,
        "backoff_s": 0.01,
        "backoff_max_s": 0.02,
        "max_attempts": 3,
        **kw,
    }
    path.write_text(json.dumps(cfg))
    return str(path)


def _ea(run):
    with RunStore(run) as s:
        rows = [sc for sc in s.scores("medebench")]
        statuses = {sid: j.status for _, sid, _, j in JudgementStore(s).linked()}
    by_sample = {}
    for sc in rows:
        by_sample.setdefault(sc.sample_id, set()).add((sc.metrics["ea"], sc.metrics["vq"]))
    return by_sample, statuses


def test_a_mixed_server_fills_only_good_answers_and_a_rerun_asks_only_for_failures(
    tmp_path, api_key
):
    run = build_run(tmp_path / "run", TAGS)
    sid = {tag: f"s{i:02d}" for i, tag in enumerate(TAGS)}
    responder, seen = _mixed()
    asked: list[str] = []

    def good(body, n):
        asked.append(_tag(body))
        return Reply(WELL.format(5))

    with FakeJudgeServer(responder) as srv:  # one endpoint throughout: it is in the cache key
        cfg = _config(tmp_path, srv)
        res = runner.invoke(app, ["judge", str(run), "--judge", cfg])
        assert res.exit_code == 0, res.output
        # 10 predictions: 8 answered at once, slow429 after one retry, limited three times
        assert srv.count == 13 and seen["limited"] == 3 and seen["slow429"] == 2
        assert "3 call(s) failed" in res.output
        assert "HTTP 200, body not JSON" in res.output and "HTTP 429" in res.output
        values, statuses = _ea(run)
        for tag, (_, ea) in GOOD.items():  # both protocols (paper and 1) filled alike
            (got,) = values[sid[tag]]
            assert got[0] == pytest.approx(ea)
        assert values[sid["slow429"]] == {(0.4, 0.6)}
        for tag, (_, status) in BAD.items():
            assert values[sid[tag]] == {(None, None)}, tag  # never 1.0, never 0
            assert statuses[sid[tag]] == status, tag
        with RunStore(run) as s:
            errors = [j for _, _, _, j in JudgementStore(s).linked() if j.status == "error"]
        (html,) = [j for j in errors if "502 Bad Gateway" in j.problems["editing_accuracy"]]
        assert html.problems["editing_accuracy"].startswith(
            f"error: {srv.base_url}: HTTP 200 with a body that is an HTML page"
        )

        # A plain re-run asks again only for the calls that got no answer.
        srv.responder = good
        res = runner.invoke(app, ["judge", str(run), "--judge", cfg])
        assert res.exit_code == 0, res.output
        assert sorted(asked) == ["html", "limited", "trunc"]
        # --only-failed also asks again for the paid-for failures (refused, unparsable).
        asked.clear()
        res = runner.invoke(app, ["judge", str(run), "--judge", cfg, "--only-failed"])
        assert res.exit_code == 0, res.output
        assert sorted(asked) == ["quote", "quote2", "refusal"]
    values, _ = _ea(run)
    assert all(values[sid[t]] == {(0.5, 0.6)} for t in BAD)
    assert values[sid["good1"]] == {(0.7, 0.6)}  # kept


_CHILD = """
import sys
from medibench.judges import JudgeConfig, judge_run
cfg = JudgeConfig(model="judge-x", base_url=sys.argv[2], concurrency=1, backoff_s=0.01)
judge_run(sys.argv[1], ["medebench-judge@paper-structure"], cfg)
"""


def test_a_killed_judge_run_never_pays_twice_for_a_stored_answer(tmp_path, api_key):
    run = build_run(tmp_path / "run", [f"t{i}" for i in range(5)])

    def hang_third(body, n):
        return Reply(WELL.format(7), delay=60.0 if n >= 3 else 0.0)

    with FakeJudgeServer(hang_third) as srv:  # one endpoint throughout: it is in the cache key
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(run), srv.base_url], env=env)
        try:
            deadline = time.monotonic() + 60
            while srv.count < 3 and time.monotonic() < deadline and child.poll() is None:
                time.sleep(0.05)
            assert srv.count == 3  # two answered, the third in flight
            # The third call does not wait for the second answer's commit (the writer thread's
            # next group commit, milliseconds later): the kill comes once both are committed.
            stored = lambda: count_rows(run / "run.sqlite", "judgements")  # noqa: E731
            while stored() < 2 and time.monotonic() < deadline and child.poll() is None:
                time.sleep(0.01)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        with RunStore(run) as s:
            answered = s.connection.execute("SELECT COUNT(*) FROM judgements").fetchone()[0]
        assert answered == 2  # both answers received were stored before the kill
        srv.responder = lambda b, n: Reply(WELL.format(7))
        cfg = JudgeConfig(model="judge-x", base_url=srv.base_url, backoff_s=0.01)
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], cfg)
        assert srv.count == 3 + 3 and rep.cached == 2  # only the three never answered


def test_an_echoed_key_leaves_no_trace_in_the_run_folder_export_or_log(
    tmp_path, monkeypatch, caplog
):
    key = "zz-judge-key-5be1d07c93aa"  # not key-shaped: redacted because it is the key in use
    monkeypatch.setenv("OPENAI_API_KEY", key)
    run = build_run(tmp_path / "run", ["e400", "e200", "eok"])

    def echo(body, n):
        tag = first_text(body)
        if "\ne400:" in tag:
            return Reply(status=400, message="invalid header Authorization: {auth}")
        if "\ne200:" in tag:
            return Reply("I cannot see the images. Your header was {auth}")
        return Reply(WELL.format(7) + "\n(request authorised with {auth})")

    caplog.set_level(logging.DEBUG)
    with FakeJudgeServer(echo) as srv:
        res = runner.invoke(
            app, ["judge", str(run), "--judge", _config(tmp_path, srv, max_attempts=1)]
        )
        assert res.exit_code == 0, res.output
        assert any(key in (r.get("auth") or "") for r in srv.requests)  # it was sent
    out = tmp_path / "scores.jsonl"
    res2 = runner.invoke(app, ["export", str(run), "--out", str(out)])
    assert res2.exit_code == 0, res2.output
    with RunStore(run) as s:
        raws = {j.status: j.raw for _, _, _, j in JudgementStore(s).linked()}
    assert "[REDACTED]" in raws["ok"] and "[REDACTED]" in raws["refused"]
    files = [p for p in run.rglob("*") if p.is_file()] + [out]
    assert any(p.name == "run.sqlite" for p in files)
    for p in files:
        assert key.encode() not in p.read_bytes(), p
    assert key not in res.output + res2.output and key not in caplog.text
