"""SIGKILL in the middle of ``build``, ``edit run``, ``calibration score --run`` and ``merge``,
then the same command again: the folder ends as an uninterrupted run's (same files, same rows)
and holds no hidden temp file. The child is killed in a chosen atomic rename (its temp file on
disk) or once a stored row appears; see :mod:`tests._kill`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.knowledge_edit._store import RESULTS_FILE
from tests._kill import folder_state, hidden_temps, kill_mid_write
from tests._sqlite import count_rows, table_rows
from tests.knowledge_edit.test_answerers import shout
from tests.runs.conftest import make_native

runner = CliRunner()
pytestmark = pytest.mark.slow  # each test starts a child process and runs the command 2-3 times


def _ok(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res


def slow_shout(image, question: str) -> str:
    """:func:`shout`, a little slowly: an edit run to kill between its stored answers."""
    time.sleep(0.02)
    return shout(image, question)


def _resumed(tmp_path: Path, argv, *, killed, hang_at=None, ready=None) -> tuple[Path, Path]:
    """The folder of an uninterrupted run of ``argv`` and that of a run killed, then re-run.

    ``argv`` holds the placeholder ``"OUT"`` for the folder; both folders are named ``out``.
    ``killed(out)`` says whether the killed run's folder is unfinished (the kill came in time).
    """
    ref, out = tmp_path / "ref" / "out", tmp_path / "kill" / "out"
    _ok(*[ref if a == "OUT" else a for a in argv])
    args = [out if a == "OUT" else a for a in argv]
    kill_mid_write(args, out, hang_at=hang_at, ready=ready and (lambda: ready(out)))
    if hang_at is not None:
        assert hidden_temps(out), "the kill left no temp file"
    assert killed(out), "the kill came after the work was done"
    _ok(*args)
    assert hidden_temps(out) == []
    return ref, out


def test_a_killed_build_resumes_to_the_uninterrupted_build(tmp_path):
    pytest.importorskip("nilearn")
    from tests.build.conftest import mni_png_source

    source = mni_png_source(tmp_path / "src", patients=3, per_patient=1)
    argv = ["build", "perception", "--source", source, "--out", "OUT", "--export", "native"]
    ref, out = _resumed(tmp_path, argv, hang_at=4,  # in the second item's images
                        killed=lambda o: not (o / "samples.jsonl").exists())  # fmt: skip
    state = folder_state(out)
    assert len([k for k in state if k.startswith(".build/items/")]) == 3
    assert state == folder_state(ref)


def test_a_killed_edit_run_resumes_to_the_uninterrupted_run(tmp_path):
    _ok("edit", "tasks", "--synthetic", "3", "--out", tmp_path / "ts")
    model = "tests.runs.test_kill_resume:slow_shout"
    argv = ["edit", "run", "--tasks", tmp_path / "ts", "--model", model, "--editor", "in-context",
            "--run", "OUT"]  # fmt: skip
    ref, out = tmp_path / "ref", tmp_path / "out"
    _ok(*[ref if a == "OUT" else a for a in argv])
    args = [out if a == "OUT" else a for a in argv]
    # An edit run stores its rows in one transaction once every answer is in: killed while
    # answering, it has stored nothing; killed in the export, the rows are in, the file is not.
    kill_mid_write(args, out, ready=(out / "run.sqlite").exists)
    assert count_rows(out / "run.sqlite", "edit_results") == 0
    kill_mid_write(args, out, hang_at=0)
    assert [t.split(".")[1] for t in hidden_temps(out)] == ["edit_results"]
    assert count_rows(out / "run.sqlite", "edit_results") and not (out / RESULTS_FILE).exists()
    _ok(*args)
    assert hidden_temps(out) == []
    results = table_rows(out / "run.sqlite", "edit_results")
    assert len(results) > 3 and results == table_rows(ref / "run.sqlite", "edit_results")
    edits = [table_rows(f / "run.sqlite", "edit_requests", drop=("elapsed_s",)) for f in (out, ref)]
    assert len(edits[0]) == 3 and edits[0] == edits[1]
    assert folder_state(out) == folder_state(ref) and RESULTS_FILE in folder_state(out)


def test_a_killed_calibration_resumes_to_the_uninterrupted_one(tmp_path):
    pred = tmp_path / "p.csv"
    pred.write_text("label,site,prob_0,prob_1\n0,x,0.8,0.2\n1,x,0.3,0.7\n1,y,0.4,0.6\n"
                    "0,y,0.6,0.4\n1,y,0.45,0.55\n")  # fmt: skip
    argv = ["calibration", "score", pred, "--by", "site", "--run", "OUT", "--resamples", "0",
            "--bins", "2"]  # fmt: skip
    ref, out = _resumed(tmp_path, argv, hang_at=1,  # in the second of 3 diagrams
                        killed=lambda o: len(list(o.rglob("*.svg"))) == 1)  # fmt: skip
    drop = ("created_at",)
    rows = table_rows(out / "run.sqlite", "calibration_results", drop=drop)
    assert len(rows) == 24 and rows == table_rows(ref / "run.sqlite", "calibration_results",
                                                   drop=drop)  # fmt: skip
    state = folder_state(out)
    assert len([k for k in state if k.endswith(".svg")]) == 3
    assert state == folder_state(ref)


def test_a_killed_merge_resumes_to_the_uninterrupted_merge(tmp_path):
    data = make_native(tmp_path / "data", n=4)
    shards = []
    for i in range(2):
        shards.append(tmp_path / f"shard{i}")
        _ok("run", "--dataset", f"native:{data}", "--model", "identity", "--run", shards[-1],
            "--shard", f"{i}/2", "--no-progress")  # fmt: skip
    ref, out = _resumed(tmp_path, ["merge", *shards, "--out", "OUT"], hang_at=2,
                        killed=lambda o: len(list(o.rglob("*.png"))) == 2)  # fmt: skip
    for table in ("meta", "samples", "predictions", "scores"):
        rows = table_rows(out / "run.sqlite", table, drop=("created_at",))  # the merge's time
        assert rows and rows == table_rows(ref / "run.sqlite", table, drop=("created_at",))
    state = folder_state(out)
    assert len([k for k in state if k.startswith("outputs/")]) == 4
    assert state == folder_state(ref)
