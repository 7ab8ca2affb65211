"""What a SIGKILLed writer leaves: hidden ``.NAME.XXXX.tmp`` files beside the files it was
writing atomically. The next command that takes the folder's lock (a re-run of ``run``,
``merge``, ``build``, ``edit run``, ``calibration score --run``) removes them; real files stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from tests._kill import folder_state, hidden_temps, kill_mid_write
from tests.runs.conftest import make_native

runner = CliRunner()
LEFT = ("outputs/identity/.s000_0.png.k3j9x2ab.tmp", "exports/.run.jsonl.q8w7e6r5.tmp",
        ".run.sqlite.zz11yy22.tmp", "report/images/.a.png.p0o9i8u7.tmp")  # fmt: skip
KEPT = ("outputs/identity/notes.tmp", "exports/keep.txt")  # not hidden: not a temp file


def _plant(folder: Path) -> None:
    for rel in (*LEFT, *KEPT):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(b"half written")


def _left(folder: Path) -> list[str]:
    return sorted(r for r in LEFT if (folder / r).exists())


def _ok(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res


def test_remove_stale_temps_takes_only_hidden_tmp_files(tmp_path):
    from medibench.io._write import remove_stale_temps

    _plant(tmp_path)
    removed = remove_stale_temps(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in removed) == sorted(LEFT)
    assert all((tmp_path / r).read_bytes() == b"half written" for r in KEPT)


@pytest.fixture
def data(tmp_path) -> Path:
    return make_native(tmp_path / "data", n=3)


def test_a_rerun_removes_the_temps_a_killed_run_left(tmp_path, data):
    run = tmp_path / "run"
    _ok("run", "--dataset", f"native:{data}", "--model", "identity", "--out", run, "--no-progress")
    _plant(run)
    _ok("run", "--dataset", f"native:{data}", "--model", "identity", "--out", run, "--no-progress")
    assert _left(run) == [] and all((run / r).exists() for r in KEPT)


def test_merge_removes_the_temps_in_its_folder(tmp_path, data):
    run = tmp_path / "run"
    _ok("run", "--dataset", f"native:{data}", "--model", "identity", "--out", run, "--no-progress")
    merged = tmp_path / "merged"
    _plant(merged)
    _ok("merge", run, "--out", merged)
    assert _left(merged) == []


def test_a_rebuild_removes_the_temps_a_killed_build_left(tmp_path):
    pytest.importorskip("nilearn")
    from tests.build.conftest import mni_png_source

    source = mni_png_source(tmp_path / "src", patients=2, per_patient=1)
    out = tmp_path / "build"
    _ok("build", "perception", "--source", source, "--out", out, "--export", "native")
    _plant(out)
    _ok("build", "perception", "--source", source, "--out", out, "--export", "native")
    assert _left(out) == []


def test_an_edit_rerun_removes_the_temps(tmp_path):
    _ok("edit", "tasks", "--synthetic", "1", "--out", tmp_path / "ts")
    run = tmp_path / "run"
    args = ("edit", "run", "--tasks", tmp_path / "ts", "--model",
            "tests.knowledge_edit.test_answerers:shout", "--editor", "in-context",
            "--run", run)  # fmt: skip
    _ok(*args)
    _plant(run)
    _ok(*args)
    assert _left(run) == []


def test_calibration_into_a_run_removes_the_temps(tmp_path):
    pred = tmp_path / "p.csv"
    pred.write_text("label,prob_0,prob_1\n0,0.8,0.2\n1,0.3,0.7\n1,0.4,0.6\n")
    run = tmp_path / "run"
    _plant(run)
    _ok("calibration", "score", pred, "--run", run, "--resamples", "0", "--bins", "2")
    assert _left(run) == []


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_leaves_no_temp(tmp_path, data):
    """A real kill: a run killed in its second atomic rename, then resumed, ends with no temp
    file and the outputs of an uninterrupted run."""
    run, ref = tmp_path / "run", tmp_path / "ref" / "run"
    args = ["run", "--dataset", f"native:{data}", "--model", "identity", "--no-progress", "--out"]
    kill_mid_write([*args, run], run, hang_at=1)
    assert hidden_temps(run), "the kill came after the run finished"
    _ok(*args, run)
    _ok(*args, ref)
    assert hidden_temps(run) == [] and folder_state(run) == folder_state(ref)
    assert len([k for k in folder_state(run) if k.startswith("outputs/")]) == 3
