"""A server that echoes the API key in ordinary 200 answers: no written file holds the key.

Every writer of a stored string is checked on its own: an ``openai-chat`` run's text answers
(``outputs/*.txt``), the ``answers`` table, score notes, the export and the report; an edit
run's ``edit_results.jsonl``, ``run.sqlite`` tables and the edit judge's raw answers; and, as a
sweep, every byte of every file under the run folder.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from tests.judges._server import FakeJudgeServer, Reply, first_text

KEY = "zz-echoed-key-5f1e0c9a7b"  # not key-shaped: only its registration can redact it
runner = CliRunner()


def _files_with_key(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and KEY.encode() in p.read_bytes()
    )


def _echo(body, n):
    """Answers that quote the Authorization header the request carried, as some proxies do."""
    text = first_text(body)
    if "Model answer:" in text:  # the edit judge
        return Reply(content='{"correct": false} (checked with {auth})')
    return Reply(content="B. as the key {auth} says")


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory):
    """An openai-chat run on MedGEN's VQA records, exported and reported."""
    from tests.benchmarks.medgen.answer_data import build_folder

    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", KEY)
    tmp = tmp_path_factory.mktemp("echo")
    folder = build_folder(tmp / "MedGEN_data")
    run_dir = tmp / "run"
    try:
        with FakeJudgeServer(_echo) as server:
            res = runner.invoke(app, [
                "run", "--dataset", f"medgen:{folder / 'vqa.jsonl'}",
                "--model", "openai-chat:gpt-4o", "--model-option", f"base_url={server.base_url}",
                "--out", str(run_dir), "--no-progress",
            ])  # fmt: skip
            assert res.exit_code == 0, res.output
            assert server.count >= 2
        exported = runner.invoke(app, ["export", str(run_dir), "--out",
                                       str(tmp / "x.jsonl")])  # fmt: skip
        assert exported.exit_code == 0, exported.output
        reported = runner.invoke(app, [
            "report", str(run_dir), "--out", str(tmp / "report"), "--no-plots", "--no-progress",
            "--workers", "1",
        ])  # fmt: skip
        assert reported.exit_code == 0, reported.output
        yield tmp
    finally:
        mp.undo()


def test_text_answers_in_outputs_hold_no_key(chat_run):
    texts = list((chat_run / "run" / "outputs").rglob("*.txt"))
    assert len(texts) >= 2
    for path in texts:
        text = path.read_text()
        assert KEY not in text and "[REDACTED]" in text


def test_the_answers_table_holds_no_key(chat_run):
    with sqlite3.connect(chat_run / "run" / "run.sqlite") as db:
        rows = db.execute("SELECT text, calls FROM answers").fetchall()
    assert rows and all(KEY not in (t or "") + (c or "") for t, c in rows)
    assert all("[REDACTED]" in t for t, _ in rows)


def test_score_notes_hold_no_key(chat_run):
    with sqlite3.connect(chat_run / "run" / "run.sqlite") as db:
        rows = db.execute("SELECT notes, error, reasons FROM scores").fetchall()
    assert rows
    assert not [r for r in rows if KEY in json.dumps(r)]
    assert any("[REDACTED]" in (n or "") for n, _, _ in rows)  # the notes quote the answer


def test_exports_hold_no_key(chat_run):
    exported = sorted(chat_run.glob("x*.jsonl"))
    assert exported and not [p.name for p in exported if KEY in p.read_text()]


def test_the_report_holds_no_key(chat_run):
    assert (chat_run / "report" / "index.html").is_file()
    assert _files_with_key(chat_run / "report") == []


def test_no_file_of_the_run_holds_the_key(chat_run):
    assert _files_with_key(chat_run) == []


@pytest.fixture(scope="module")
def edit_run(tmp_path_factory):
    """An edit run of an OpenAI-compatible answerer, judged by a judge that echoes too."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", KEY)
    tmp = tmp_path_factory.mktemp("edit-echo")
    try:
        made = runner.invoke(app, ["edit", "tasks", "--synthetic", "2", "--out", str(tmp / "ts")])
        assert made.exit_code == 0, made.output
        with FakeJudgeServer(_echo) as server:
            judge = tmp / "judge.yaml"
            judge.write_text(f"model: judge-x\nbase_url: {server.base_url}\nmax_attempts: 1\n")
            res = runner.invoke(app, [
                "edit", "run", "--tasks", str(tmp / "ts"), "--model", "openai:vlm-x",
                "--base-url", server.base_url, "--editor", "in-context", "--run",
                str(tmp / "run"), "--judge", str(judge), "--limit", "1",
            ])  # fmt: skip
            assert res.exit_code == 0, res.output
        yield tmp
    finally:
        mp.undo()


def test_edit_results_jsonl_holds_no_key(edit_run):
    text = (edit_run / "run" / "edit_results.jsonl").read_text()
    lines = [json.loads(x) for x in text.splitlines()]
    assert lines and KEY not in text
    assert all("[REDACTED]" in x["pre_answer"] for x in lines)


def test_edit_tables_hold_no_key(edit_run):
    with sqlite3.connect(edit_run / "run" / "run.sqlite") as db:
        for table in ("edit_results", "edit_requests"):
            rows = db.execute(f"SELECT * FROM {table}").fetchall()
            assert rows and not [r for r in rows if KEY in json.dumps(r, default=str)]


def test_edit_judge_raw_answers_hold_no_key(edit_run):
    with sqlite3.connect(edit_run / "run" / "run.sqlite") as db:
        raws = [r[0] for r in db.execute("SELECT raw FROM edit_judgements")]
    assert raws and all(KEY not in r and "[REDACTED]" in r for r in raws)


def test_no_file_of_the_edit_run_holds_the_key(edit_run):
    assert _files_with_key(edit_run) == []
