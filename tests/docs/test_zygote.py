"""The docs' zygote (tests/docs/_zygote.py): a forked command behaves as the fresh process it
stands for (argv, working folder, environment, streams, exit status), and a command whose
import-time environment differs from the server's runs as a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs._zygote import key

ZYGOTE = Path(__file__).with_name("_zygote.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("z")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "COLUMNS": "80"}
    env["MEDIBENCH_DOCS_ZYGOTE"] = str(folder)
    env.pop("MEDIBENCH_DOCS_FORK", None)
    log = folder / "log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ZYGOTE), "serve", str(folder), "numpy"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
        )  # fmt: skip
    sock = folder / f"{key(env)}.sock"
    for _ in range(600):
        if sock.exists() or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert sock.exists(), log.read_text()
    yield env, log
    proc.terminate()
    proc.wait(timeout=30)


def _client(env, cwd, *args):
    return subprocess.run(
        [sys.executable, "-S", "-E", str(ZYGOTE), "client", *args],
        env=env, cwd=cwd, capture_output=True, text=True, check=False,
    )  # fmt: skip


def _forks(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("fork ")]


def test_a_forked_command_gets_its_argv_folder_streams_and_status(server, tmp_path):
    env, log = server
    (tmp_path / "data").mkdir()
    before = len(_forks(log))
    ok = _client(env, tmp_path, "--version")
    assert (ok.returncode, ok.stdout) == (0, "medibench 0.1.0\n")
    bad = _client(env, tmp_path, "export", "runs/none", "--format", "csv", "--out", "x.csv")
    # the relative path, as typed, and the exit status of medibench's errors
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == "error: runs/none: not a medibench run (no run.sqlite)\n"
    usage = _client(env, tmp_path, "export", "--bogus")
    assert usage.returncode == 2 and "No such option: --bogus" in usage.stderr
    assert [f.split(" ", 2)[2] for f in _forks(log)[before:]] == [
        '["medibench", "--version"]',
        '["medibench", "export", "runs/none", "--format", "csv", "--out", "x.csv"]',
        '["medibench", "export", "--bogus"]',
    ]


def test_python_runs_medibench_modules_in_the_server_and_the_rest_as_is(server, tmp_path):
    env, log = server
    before = len(_forks(log))
    mod = subprocess.run(
        [sys.executable, "-S", "-E", str(ZYGOTE), "python", "-m", "medibench", "--version"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (mod.returncode, mod.stdout) == (0, "medibench 0.1.0\n")
    plain = subprocess.run(
        [sys.executable, "-S", "-E", str(ZYGOTE), "python", "-c", "import sys; sys.exit(7)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert plain.returncode == 7
    assert [f.split(" ", 2)[2] for f in _forks(log)[before:]] == ['["medibench", "--version"]']


def test_another_import_time_environment_runs_fresh(server, tmp_path):
    env, log = server
    before = len(_forks(log))
    other = {**env, "HF_HOME": str(tmp_path / "hf")}
    res = _client(other, tmp_path, "--version")
    assert (res.returncode, res.stdout) == (0, "medibench 0.1.0\n")
    assert _forks(log)[before:] == []  # a fresh ``python -m medibench``, not the server
    # a variable no pre-imported library reads does not matter
    res = _client({**env, "DOCS_WEIGHTS": "/w"}, tmp_path, "--version")
    assert res.returncode == 0 and len(_forks(log)) == before + 1


def test_a_server_whose_session_is_gone_exits(tmp_path):
    # the server's parent (here a shell that exits at once) stands for a killed test session
    script = (f"MEDIBENCH_DOCS_ZYGOTE_PARENT=$$ {sys.executable} {ZYGOTE} serve {tmp_path} "
              "numpy >/dev/null 2>&1 & echo $!")  # fmt: skip
    pid = int(subprocess.run(["sh", "-c", script], capture_output=True, text=True).stdout)
    stat = Path(f"/proc/{pid}/stat")
    for _ in range(300):  # it looks for its parent every 2 s
        try:  # gone, or a zombie its new parent has not reaped yet
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    raise AssertionError("the orphaned docs zygote kept running")


def test_a_thread_a_fork_would_lose_is_named_and_jemallocs_is_not():
    import threading

    from tests.docs._zygote import other_threads

    def named(name: str, ready: threading.Event, stop: threading.Event) -> None:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
            f.write(name)
        ready.set()
        stop.wait()

    before = other_threads()
    stops = []
    for name in ("helper", "jemalloc_bg_thd"):
        ready, stop = threading.Event(), threading.Event()
        t = threading.Thread(target=named, args=(name, ready, stop))
        t.start()
        ready.wait()
        stops.append((t, stop))
    try:
        assert sorted(other_threads()) == sorted([*before, "helper"])
    finally:
        for t, stop in stops:
            stop.set()
            t.join()
    assert other_threads() == before
