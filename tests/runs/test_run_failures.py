"""What a run does when things go wrong: a full disk, a refused edit, no samples, no Ray cluster."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import stat

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.io import atomic_write_bytes, write_image
from medibench.runs import RunStore, output_folder
from tests.models.fake_image_api import FakeImageAPI
from tests.runs.conftest import make_native

runner = CliRunner()


def _run(data, out, *extra, model="identity"):
    argv = ["run", "--dataset", f"native:{data}", "--model", model, "--out", str(out)]
    return runner.invoke(app, [*argv, "--no-progress", *extra])


def _flat(text):
    return " ".join(text.split())


def _rows(run):
    con = sqlite3.connect(run / "run.sqlite")
    try:
        return con.execute(
            "SELECT sample_id, status, created_at FROM predictions ORDER BY sample_id"
        ).fetchall()
    finally:
        con.close()


def test_a_full_disk_names_the_file_exits_1_keeps_what_finished_and_resumes(tmp_path, monkeypatch):
    data = make_native(tmp_path / "data", n=6)
    run = tmp_path / "run"
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) > 3:  # the 4th output finds the disk full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    res = _run(data, run)
    monkeypatch.undo()
    assert res.exit_code == 1, res.output
    path = run / "outputs" / output_folder("identity") / "s003_0.png"
    msg = _flat(res.output)
    assert f"error: no space left on the device to write {path} (No space left on device)" in msg
    assert "run the same command again to resume" in msg and "Traceback" not in res.output
    before = _rows(run)
    assert [(sid, st) for sid, st, _ in before] == [(f"s00{i}", "ok") for i in range(3)]
    assert not list(path.parent.glob(".*.tmp"))  # no half-written file left

    again = _run(data, run)
    assert again.exit_code == 0, again.output
    assert "generate identity: 3 done, 3 already done, 0 failed" in again.output
    after = _rows(run)
    assert len(after) == 6 and set(before) <= set(after)  # finished rows untouched


class _FullAfter:
    """A SQLite connection whose disk fills up after ``n`` prediction rows."""

    def __init__(self, con, n):
        self._con, self._n = con, n

    def execute(self, sql, *args):
        if sql.startswith("INSERT OR REPLACE INTO predictions"):
            self._n -= 1
            if self._n < 0:
                raise sqlite3.OperationalError("database or disk is full")
        return self._con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._con, name)


def test_a_full_disk_under_the_run_store_is_a_clear_error(tmp_path, monkeypatch):
    data = make_native(tmp_path / "data", n=4)
    run = tmp_path / "run"
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **kw: _FullAfter(connect(*a, **kw), 2))
    res = _run(data, run)
    monkeypatch.undo()
    assert res.exit_code == 1, res.output
    msg = _flat(res.output)
    assert (
        f"error: no space left on the device to write {run / 'run.sqlite'} "
        "(database or disk is full)" in msg
    )
    assert "OperationalError" not in res.output
    assert [st for _, st, _ in _rows(run)] == ["ok", "ok"]
    again = _run(data, run)
    assert again.exit_code == 0 and "2 done, 2 already done" in again.output


def test_a_refused_edit_is_stored_and_asked_again_only_on_request(tmp_path, monkeypatch):
    data = make_native(tmp_path / "data", n=3)
    lines = (data / "samples.jsonl").read_text().splitlines()
    refused = json.loads(lines[1])
    refused["instruction"] = "REFUSE this edit"
    lines[1] = json.dumps(refused)
    (data / "samples.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run = tmp_path / "run"
    with FakeImageAPI() as api:
        model = ["--model-option", f"base_url={api.url}/v1", "--model-option", "max_attempts=1"]

        def go(*flags):
            n = len(api.requests)
            res = _run(data, run, *model, *flags, model="openai-image:gpt-image-1")
            assert res.exit_code == 0, res.output
            return res, len(api.requests) - n

        res, asked = go()
        assert asked == 3
        assert "generate gpt-image-1: 2 done, 0 already done, 0 failed, 1 refused" in res.output
        with RunStore.open_existing(run) as st:
            preds = {p.sample_id: p for p in st.predictions()}
            scores = {s.sample_id: s for s in st.scores()}
        assert [preds[s].status for s in ("s000", "s001", "s002")] == ["ok", "refused", "ok"]
        assert "ContentRefusedError" in preds["s001"].error and preds["s001"].path is None
        assert scores["s001"].status == "missing" and "refused" in scores["s001"].error

        res, asked = go()  # a plain re-run does not pay for the refusal again
        assert asked == 0
        assert "1 refused before, not asked again (--retry-refused asks again)" in _flat(res.output)
        assert go("--retry-refused")[1] == 1
        assert go("--only-failed")[1] == 1
        with RunStore.open_existing(run) as st:
            assert {p.sample_id: p.status for p in st.predictions()}["s001"] == "refused"


def test_an_empty_dataset_is_an_error(tmp_path):
    data = tmp_path / "empty"
    data.mkdir()
    (data / "samples.jsonl").write_text("")
    res = _run(data, tmp_path / "run")
    assert res.exit_code == 2 and "no samples" in res.output
    preds = tmp_path / "preds"
    preds.mkdir()
    write_image(preds / "x_0.png", np.zeros((4, 4), np.uint8))
    res = runner.invoke(
        app,
        ["score", "--dataset", f"native:{data}", "--predictions", str(preds), "--out",
         str(tmp_path / "o.jsonl")],
    )  # fmt: skip
    assert res.exit_code == 2 and "no samples" in res.output


def test_ray_address_without_a_cluster_is_one_line_saying_what_to_do(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")

    def no_cluster(*args, **kwargs):  # what ray.init(address="auto") raises with no cluster
        raise ConnectionError("Could not find any running Ray instance. Please specify the one")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", no_cluster)
    data = make_native(tmp_path / "data", n=1)
    res = _run(data, tmp_path / "run", "--executor", "ray", "--ray-address", "auto")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.output.strip() == (
        "error: no Ray cluster found at --ray-address auto: start one with 'ray start --head', "
        "or drop --ray-address to run Ray on this machine"
    )


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002, 0o077])
def test_files_get_the_mode_the_umask_gives(tmp_path, umask):
    old = os.umask(umask)
    try:
        a = atomic_write_bytes(tmp_path / "a.bin", b"x")
        b = write_image(tmp_path / "b.png", np.zeros((2, 2), np.uint8))
    finally:
        os.umask(old)
    for path in (a, b):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
