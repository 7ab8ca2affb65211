"""Killing a medibench command with SIGKILL at a chosen moment, and what its folder holds after.

A test starts the command in a child process (this checkout's ``src`` first on the path, tests
importable), kills it once :func:`kill_mid_write`'s trigger fires, re-runs it, and compares
:func:`folder_state` (and the store's tables) with an uninterrupted run's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The child: its atomic renames into FOLDER run until the HANG-th one (0-based), which touches
# MARKER and then sleeps, so the kill lands with that file's hidden temp on disk.
_CHILD = """
import os, sys, time
folder, hang, marker = os.path.realpath(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
real, seen = os.replace, [0]
def replace(src, dst, *args, **kwargs):
    if os.path.realpath(os.fspath(dst)).startswith(folder + os.sep):
        seen[0] += 1
        if seen[0] == hang + 1:
            open(marker, "w").close()
            time.sleep(600)
    return real(src, dst, *args, **kwargs)
os.replace = replace
from medibench.cli import app
app(sys.argv[4:], prog_name="medibench")
"""


def hidden_temps(folder: str | os.PathLike) -> list[str]:
    """The hidden temp files (``.NAME.XXXX.tmp``) under ``folder``, relative, sorted."""
    folder = Path(folder)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob(".*.tmp"))


def kill_mid_write(
    argv: Sequence[object],
    folder: str | os.PathLike,
    *,
    hang_at: int | None = None,
    ready: Callable[[], bool] | None = None,
    timeout: float = 120.0,
) -> None:
    """Run ``medibench *argv`` in a child and SIGKILL it at one moment: in its ``hang_at``-th
    (0-based) atomic rename into ``folder`` (the temp file written, not yet renamed), or once
    ``ready()`` is true. Fails if the child ends by itself first, or after ``timeout`` seconds."""
    if (hang_at is None) == (ready is None):
        raise ValueError("give exactly one of hang_at and ready")
    folder = Path(folder)
    marker = folder.with_name(folder.name + ".hung")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    cmd = [sys.executable, "-c", _CHILD, str(folder), str(-1 if hang_at is None else hang_at),
           str(marker), *map(str, argv)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    fired = ready or marker.exists
    deadline = time.monotonic() + timeout
    try:
        while not fired():
            if proc.poll() is not None:
                raise AssertionError(f"the command ended before the kill:\n{proc.stderr.read()}")
            assert time.monotonic() < deadline, "the kill's moment never came"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()


_ELAPSED = re.compile(rb'"elapsed_s": [-+0-9.eE]+')


def folder_state(folder: str | os.PathLike, *, skip: Sequence[str] = ()) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, but the lock, SQLite files (compare their
    tables) and ``skip`` (relative paths): the bytes, with the folder's own path and measured
    durations (``"elapsed_s": ...``) blanked in text files. Two runs into folders of one name
    (under different parents) that did the same work have equal states."""
    folder = Path(folder)
    state = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel == ".lock" or ".sqlite" in path.name or rel in skip:
            continue
        data = path.read_bytes()
        if path.suffix in (".json", ".jsonl", ".md", ".svg", ".txt", ".csv"):
            data = _ELAPSED.sub(b'"elapsed_s": _', data.replace(str(folder).encode(), b"<OUT>"))
        state[rel] = data
    return state
