"""Model editing on hostile and unlucky inputs: a task set checked whole before anything runs
(every problem named at once), one bad reply costing only its own question, and the CLI
answering every bad input with one line and exit 2, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.knowledge_edit import (
    CallableAnswerer,
    TaskError,
    load_editor,
    read_taskset,
    run_edits,
    synthetic_taskset,
)
from medibench.knowledge_edit._answerers import AnswererError, OpenAIAnswerer
from tests.judges._server import FakeJudgeServer, Reply, first_text

runner = CliRunner()
SHOUT = "tests.knowledge_edit.test_answerers:shout"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ts") / "ts"
    synthetic_taskset(root, 3, seed=0)
    return root


@pytest.fixture
def ts(pristine, tmp_path) -> Path:
    root = tmp_path / "ts"
    shutil.copytree(pristine, root)
    return root


def _lines(ts: Path) -> list[dict]:
    return [json.loads(x) for x in (ts / "tasks.jsonl").read_text().splitlines()]


def _write(ts: Path, lines: list) -> None:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    (ts / "tasks.jsonl").write_text(text)


def _break(ts: Path, how: str) -> str:
    """Break the task set one way; the words its error must contain."""
    lines = _lines(ts)
    first, second = lines[0], lines[1]
    if how == "duplicate edit_id":
        second["edit_id"] = first["edit_id"]
        words = "edit_id(s) used more than once"
    elif how == "shared probe_id":
        second["probes"][0]["probe_id"] = first["probes"][0]["probe_id"]
        words = f"probe_id '{first['probes'][0]['probe_id']}' is used by probes of edits"
    elif how == "json string line":
        lines[1] = '"just a string"'
        words = "line 2: expected a JSON object (an edit request), got str"
    elif how == "not json":
        lines[1] = '{"edit_id": "x", '
        words = "line 2: not JSON"
    elif how == "numeric question":
        first["question"] = 42
        words = "line 1: 'question' must be a string, got int 42"
    elif how == "numeric probe answer":
        first["probes"][0]["answer"] = 3.5
        words = "probes[0]: 'answer' must be a string, got float 3.5"
    elif how == "probes not a list":
        first["probes"] = "none"
        words = "'probes' must be a list, got str"
    elif how == "order not an integer":
        first["order"] = "0"
        words = "'order' must be an integer"
    elif how == "unknown kind":
        first["probes"][0]["kind"] = "vibes"
        words = "unknown kind 'vibes'"
    elif how == "empty target":
        first["target"] = "  "
        words = "empty gold answer (the edit target)"
    elif how == "missing image":
        (ts / first["image"]).unlink()
        words = f"image {first['image']} is missing"
    elif how == "undecodable image":
        (ts / first["image"]).write_bytes(b"\x89PNG\r\n\x1a\n not really")
        words = f"image {first['image']} does not decode"
    elif how == "image outside":
        first["image"] = "../../../../etc/hostname"
        words = "image path '../../../../etc/hostname' escapes the dataset folder"
    elif how == "absolute image":
        first["probes"][0]["image"] = "/etc/hostname"
        words = "image path '/etc/hostname' is absolute"
    elif how == "corrupt taskset.json":
        (ts / "taskset.json").write_text('{"format": "medibench-edit-tasks", ')
        words = "taskset.json: not a readable JSON manifest"
    else:  # pragma: no cover
        raise AssertionError(how)
    if how not in ("missing image", "undecodable image", "corrupt taskset.json"):
        _write(ts, lines)
    return words


BREAKS = [
    "duplicate edit_id", "shared probe_id", "json string line", "not json", "numeric question",
    "numeric probe answer", "probes not a list", "order not an integer", "unknown kind",
    "empty target", "missing image", "undecodable image", "image outside", "absolute image",
    "corrupt taskset.json",
]  # fmt: skip


@pytest.mark.parametrize("how", BREAKS)
def test_a_broken_task_set_is_refused_naming_the_problem(ts, how):
    words = _break(ts, how)
    with pytest.raises(TaskError) as info:
        read_taskset(ts)
    assert words in str(info.value)


@pytest.mark.parametrize("how", BREAKS)
def test_edit_run_on_a_broken_task_set_exits_2_before_running(ts, tmp_path, how):
    words = _break(ts, how)
    res = runner.invoke(app, ["edit", "run", "--tasks", str(ts), "--model", SHOUT, "--editor",
                              "in-context", "--run", str(tmp_path / "run")])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and " ".join(words.split()) in " ".join(res.output.split())
    assert not (tmp_path / "run").exists()  # nothing ran, nothing was written


def test_every_problem_is_named_at_once(ts):
    lines = _lines(ts)
    lines[2]["edit_id"] = lines[1]["edit_id"]
    lines[0]["question"] = 7
    lines[2]["probes"][0]["kind"] = "vibes"
    _write(ts, [*lines, '"a string"'])
    with pytest.raises(TaskError) as info:
        read_taskset(ts)
    message = str(info.value)
    assert "5 problem(s)" in message  # the kind changed was its only reliability probe's
    for words in ("'question' must be a string", "unknown kind 'vibes'", "no reliability probe",
                  "expected a JSON object", "used more than once"):  # fmt: skip
        assert words in message


def test_two_edits_sharing_a_probe_id_never_get_each_others_answers(ts):
    """Built in code (no reader in between), the run itself refuses the shared id."""
    good = read_taskset(ts)
    a, b = good.requests[0], good.requests[1]
    clash = b.__class__(**{**b.__dict__, "probes": (a.probes[0], *b.probes[1:])})
    bad = good.__class__(good.root, (a, clash, *good.requests[2:]), good.manifest)
    with pytest.raises(TaskError, match="is used by probes of edits"):
        run_edits(bad, CallableAnswerer(lambda im, q: "x", name="x"), load_editor("in-context"))


def _flaky(bad_question: str):
    def answer(image, question):
        if bad_question in question:
            raise AnswererError("HTTP 500 from the endpoint")
        return "no idea"

    return answer


def test_one_failed_question_is_its_own_failure_and_the_run_goes_on(ts):
    tasks = read_taskset(ts)
    bad = tasks.requests[0].probes[0].question
    model = CallableAnswerer(_flaky(bad), name="flaky")
    report = run_edits(tasks, model, load_editor("in-context"))
    assert len(report.edits) == 3 and not [e for e in report.edits if e.error]
    failed = [x for x in report.lines if bad in x.extra["question"]]
    assert failed and all(x.pre_correct is None and x.post_correct is None for x in failed)
    assert all("HTTP 500" in x.extra["pre_error"] and x.extra["pre_answer"] is None
               for x in failed)  # fmt: skip
    others = [x for x in report.lines if bad not in x.extra["question"]]
    assert others and all(x.pre_correct is not None for x in others)
    assert all("pre_error" not in x.extra for x in others)


def test_an_http_500_for_one_question_is_stored_for_that_question(ts, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    tasks = read_taskset(ts)
    bad = tasks.requests[1].probes[0].question

    def responder(body, n):
        return Reply(status=500) if bad in first_text(body) else Reply(content="no idea")

    with FakeJudgeServer(responder) as server:
        model = OpenAIAnswerer("vlm-x", base_url=server.base_url)
        model.config = model.config.model_copy(update={"max_attempts": 1})
        report = run_edits(tasks, model, load_editor("in-context"))
    failed = [x for x in report.lines if x.extra["question"] == bad]
    assert failed and all("HTTP 500" in x.extra["pre_error"] for x in failed)
    assert all(x.pre_correct is None for x in failed)
    assert {x.edit_id for x in report.lines} == {r.edit_id for r in tasks.requests}


def test_an_endpoint_failing_one_question_is_not_waited_out_call_after_call(ts, monkeypatch):
    """Issue 41: a server answering HTTP 500 to one question took 495 s for 6 edits, every
    failing call waiting out its 5 attempts one after another. Now once a call has used up its
    retries every later call of the answerer is tried once (the waits are recorded by the
    retry layer's clock, never slept)."""
    from medibench.calls import _retry

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    waits: list[float] = []

    async def clock(seconds):
        waits.append(seconds)

    monkeypatch.setattr(_retry.asyncio, "sleep", clock)
    tasks = read_taskset(ts)
    bad = tasks.requests[1].probes[0].question

    def responder(body, n):
        return Reply(status=500) if bad in first_text(body) else Reply(content="no idea")

    with FakeJudgeServer(responder) as server:
        # 5 attempts per call; 4 in flight (the fake server's listen backlog is 5)
        model = OpenAIAnswerer("vlm-x", base_url=server.base_url, concurrency=4)
        report = run_edits(tasks, model, load_editor("in-context"))
        asked = [b for b in server.requests if bad in first_text(b)]
    failed = [x for x in report.lines if x.extra["question"] == bad]
    errors = [x.extra[k] for x in failed for k in ("pre_error", "post_error") if k in x.extra]
    assert errors and all("HTTP 500" in e for e in errors)
    # Before: 176 calls and 140 waits. Now only the first batch's 6 calls of the question wait
    # (4 times at most each); every later ask is one call, in its batch and then alone.
    assert len(waits) <= 6 * 4 and max(waits) <= 8
    assert len(asked) <= 6 * 5 + 2 * len(errors)
    once = "(tried once: an earlier call used up its retries on "  # the failure it met
    assert all(once in e or "HTTP 500 (after 5 attempt(s))" in e for e in errors)
    assert sum(once in e for e in errors) >= len(errors) - 4


@pytest.fixture
def no_waits(monkeypatch):
    """The call layer's retries without their backoff sleeps."""
    import asyncio

    from medibench.calls import _retry

    async def instant(_s):
        await asyncio.sleep(0)

    monkeypatch.setattr(_retry.asyncio, "sleep", instant)


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--model", "openai:vlm-x", "--base-url", "http://127.0.0.1:9"],
         {"OPENAI_API_KEY": "k" * 12}, "no question could be answered before any edit"),
        (["--model", "openai:vlm-x", "--base-url", "http://127.0.0.1:9"], {},
         "OPENAI_API_KEY"),
        (["--model", SHOUT, "--judge", "nope.yaml"], {}, "judge config nope.yaml does not exist"),
        (["--model", SHOUT, "--limit", "-1"], {}, "--limit must be at least 1, got -1"),
        (["--model", SHOUT, "--limit", "0"], {}, "--limit must be at least 1, got 0"),
        (["--model", SHOUT, "--sequential", "-2"], {}, "--sequential must be at least 0, got -2"),
        (["--model", SHOUT, "--batch-size", "0"], {}, "--batch-size must be at least 1"),
        (["--model", "no.such.module:fn"], {}, "No module named"),
        (["--model", SHOUT, "--editor", "nope"], {}, "unknown editor 'nope'"),
    ],
)  # fmt: skip
def test_edit_run_bad_inputs_are_one_line_and_exit_2(ts, tmp_path, monkeypatch, no_waits, args,
                                                     env, words):  # fmt: skip
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["edit", "run", "--tasks", str(ts), "--run", str(tmp_path / "run"),
                              "--editor", "in-context", *args])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert words in " ".join(res.output.split())


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("bad.yaml", "lr: [1, 2\n", "not readable YAML"),
        ("bad.json", '{"lr": ', "not readable JSON"),
        ("list.yaml", "- 1\n- 2\n", "expected a mapping of options"),
        ("unknown.yaml", "colour: red\n", "editor config"),
    ],
)
def test_an_invalid_config_is_one_line(ts, tmp_path, name, text, words):
    config = tmp_path / name
    config.write_text(text)
    res = runner.invoke(app, ["edit", "run", "--tasks", str(ts), "--run", str(tmp_path / "run"),
                              "--model", SHOUT, "--editor", "in-context", "--config",
                              str(config)])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert words in res.output


@pytest.mark.parametrize(
    ("option", "value"),
    [("--limit", "0"), ("--limit", "-3"), ("--per-type", "0"), ("--synthetic", "-1")],
)
def test_edit_tasks_option_values_are_checked(tmp_path, option, value):
    res = runner.invoke(app, ["edit", "tasks", "--synthetic", "2", "--out", str(tmp_path / "o"),
                              option, value])  # fmt: skip
    assert res.exit_code == 2 and "must be at least" in res.output


def test_the_limit_keeps_exactly_that_many_edits(ts):
    report = run_edits(read_taskset(ts), CallableAnswerer(lambda im, q: "x", name="x"),
                       load_editor("in-context"), limit=2)  # fmt: skip
    assert [e.edit_id for e in report.edits] == [r.edit_id for r in read_taskset(ts).requests[:2]]
    with pytest.raises(ValueError, match="limit must be at least 1, got -1"):
        run_edits(read_taskset(ts), CallableAnswerer(lambda im, q: "x", name="x"),
                  load_editor("in-context"), limit=-1)  # fmt: skip
    with pytest.raises(ValueError, match="sequential must be 0"):
        run_edits(read_taskset(ts), CallableAnswerer(lambda im, q: "x", name="x"),
                  load_editor("in-context"), sequential=-2)  # fmt: skip
    assert np.isfinite(report.total_s)


def test_edit_run_refuses_results_of_another_config_unless_overwritten(ts, tmp_path):
    from medibench.runs import RunStore

    run, configs = tmp_path / "run", []
    for i, fact in enumerate(("Fact: {question} -> {target}.", "Known: {target} ({question}).")):
        configs.append(tmp_path / f"c{i}.yaml")
        configs[-1].write_text(f'template: "{fact}"\n')
    args = ["edit", "run", "--tasks", str(ts), "--out", str(run), "--model", SHOUT,
            "--editor", "in-context"]  # fmt: skip
    assert runner.invoke(app, [*args, "--config", str(configs[0])]).exit_code == 0
    results = (run / "edit_results.jsonl").read_text()
    with RunStore(run) as store:
        spec = store.get_meta(f"knowledge_edit/{SHOUT}/in-context/single")
    assert spec["config"] == {"template": "Fact: {question} -> {target}."}
    assert spec["config_file"] == str(configs[0])
    res = runner.invoke(app, [*args, "--config", str(configs[1])])
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert "made with another config" in said and str(configs[0]) in said and "--overwrite" in said
    assert (run / "edit_results.jsonl").read_text() == results  # the earlier results stay
    assert runner.invoke(app, [*args, "--config", str(configs[0])]).exit_code == 0  # same: rerun
    res = runner.invoke(app, [*args, "--config", str(configs[1]), "--overwrite"])
    assert res.exit_code == 0, res.output
    with RunStore(run) as store:
        spec = store.get_meta(f"knowledge_edit/{SHOUT}/in-context/single")
    assert spec["config"] == {"template": "Known: {target} ({question})."}
    other = runner.invoke(app, [*args, "--sequential", "2"])  # another setting sits beside it
    assert other.exit_code == 0, other.output


def test_edit_tasks_refuses_a_folder_that_holds_files_unless_overwritten(tmp_path):
    out = tmp_path / "tasks"
    args = ["edit", "tasks", "--out", str(out)]
    assert runner.invoke(app, [*args, "--synthetic", "2"]).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    res = runner.invoke(app, [*args, "--synthetic", "3", "--seed", "1"])
    assert res.exit_code == 2 and "already holds a task set" in res.output
    assert "--overwrite" in res.output
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # untouched
    res = runner.invoke(app, [*args, "--synthetic", "3", "--seed", "1", "--overwrite"])
    assert res.exit_code == 0, res.output
    assert len(read_taskset(out)) == 3 and read_taskset(out).manifest["seed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks"]  # no scratch folder left
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("not a task set")
    res = runner.invoke(app, ["edit", "tasks", "--out", str(tmp_path / "notes"), "--synthetic",
                              "2", "--overwrite"])  # fmt: skip
    assert res.exit_code == 2 and "no task set" in " ".join(res.output.split())
    assert (tmp_path / "notes" / "mine.txt").read_text() == "not a task set"
    res = runner.invoke(app, [*args, "--synthetic", "2", "--force"])  # issue 37's name: an alias
    assert res.exit_code == 0, res.output
    assert len(read_taskset(out)) == 2 and "--overwrite" in res.output
