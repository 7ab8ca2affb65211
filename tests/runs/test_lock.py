"""One process per run folder: a second one exits 3 at once; a SIGKILLed holder leaves no lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.runs import RunFolderInUse, run_folder_lock
from tests.runs.conftest import make_native

runner = CliRunner()

_HOLDER = textwrap.dedent("""
    import sys, time
    from medibench.runs import run_folder_lock
    with run_folder_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(120)
""")


def _hold(folder):
    """A process that holds ``folder``'s lock until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def _medibench(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "medibench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_second_process_exits_3_at_once_and_a_killed_holder_leaves_no_lock(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    run = tmp_path / "run"
    holder = _hold(run)
    try:
        args = ["run", "--dataset", f"native:{data}", "--model", "identity", "--out", run]
        t0 = time.monotonic()
        busy = _medibench(*args, "--no-progress")
        assert busy.returncode == 3, busy.stderr
        assert busy.stderr.strip() == f"error: run folder {run} is in use by process {holder.pid}"
        assert time.monotonic() - t0 < 60  # it did not wait for the holder
        assert not (run / "run.sqlite").exists()  # nothing was done
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel dropped the lock with the process: the same command now runs.
    done = _medibench(*args, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "generate identity: 2 done" in done.stderr


def test_every_writing_command_refuses_a_folder_in_use(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    run = tmp_path / "run"
    args = ["run", "--dataset", f"native:{data}", "--model", "identity", "--out", str(run)]
    assert runner.invoke(app, [*args, "--no-progress"]).exit_code == 0
    holder = _hold(run)
    try:
        message = f"error: run folder {run} is in use by process {holder.pid}"
        attempts = {
            "run": [*args, "--no-progress"],
            "report": ["report", str(run), "--no-plots", "--no-progress"],
            "merge": ["merge", str(tmp_path / "other"), "--out", str(run)],
            "judge": ["judge", str(run), "--judge-model", "m", "--base-url", "http://127.0.0.1:9"],
            "demo": ["demo", "--out", str(run), "--no-progress"],
        }
        for command, argv in attempts.items():
            res = runner.invoke(app, argv)
            assert (command, res.exit_code) == (command, 3), res.output
            assert message in " ".join(res.output.split()), (command, res.output)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    res = runner.invoke(app, ["report", str(run), "--no-plots", "--no-progress"])
    assert res.exit_code == 0, res.output


def test_the_lock_is_reentrant_in_one_process_and_exclusive_across_processes(tmp_path):
    run = tmp_path / "run"
    with run_folder_lock(run) as path:
        with run_folder_lock(run):  # the demo's run, then its report
            assert path.read_text().strip() == str(os.getpid())
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys\nfrom medibench.runs import run_folder_lock, RunFolderInUse\n"
                "try:\n    with run_folder_lock(sys.argv[1]): print('got it')\n"
                "except RunFolderInUse as e:\n    print(e.pid)",
                str(run),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert probe.stdout.strip() == str(os.getpid())  # still held after the inner block
    with run_folder_lock(run):  # released: taken again at once
        pass


def test_in_use_error_names_the_folder_and_the_pid(tmp_path):
    holder = _hold(tmp_path)
    try:
        with pytest.raises(RunFolderInUse) as info, run_folder_lock(tmp_path):
            pass
        assert info.value.pid == holder.pid
        assert str(info.value) == f"run folder {tmp_path} is in use by process {holder.pid}"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
