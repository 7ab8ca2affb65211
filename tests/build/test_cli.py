"""``medibench build`` end to end: the three builds give datasets that ``run`` and ``score``
accept, the MieDB export scores Dice 1 with its own targets, builds resume after a kill."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medibench.build import build
from medibench.cli import app
from tests._ray_lock import RAY_GROUP, only_ray_instance
from tests.build.conftest import mni_png_source

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def _ok(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("perspective", ["perception", "transformation", "modification"])
def test_each_build_is_a_dataset_that_run_and_score_accept(tmp_path, demo_sources, perspective):
    out = tmp_path / perspective
    printed = _ok("build", perspective, "--source", demo_sources["mni152"], "--out", out)
    assert f"{perspective} samples in {out}" in printed
    n = len((out / "samples.jsonl").read_text().splitlines())
    _ok("run", "--dataset", f"native:{out}", "--model", "identity", "--out", tmp_path / "run")
    _ok("score", "--dataset", f"native:{out}", "--predictions", tmp_path / "run" / "outputs",
        "--out", tmp_path / "scores.jsonl")  # fmt: skip
    records = [json.loads(x) for x in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert len({r["sample_id"] for r in records}) == n
    assert all(r["status"] == "ok" for r in records)
    omnigen = [json.loads(x) for x in (out / "exports" / "omnigen2.jsonl").read_text().splitlines()]
    assert len(omnigen) == n and all(Path(r["output_image"]).is_file() for r in omnigen)
    assert all(Path(p).is_file() for r in omnigen for p in r["input_images"])


def test_the_miedb_export_scores_dice_1_with_its_own_targets(tmp_path, demo_sources):
    out = tmp_path / "perception"
    _ok("build", "perception", "--source", demo_sources["mni152"], "--out", out,
        "--export", "miedb", "--export", "hf-parquet")  # fmt: skip
    bench = out / "exports" / "miedb" / "dataBenchmark"
    records = json.loads((bench / "metadata.json").read_text())
    assert records and {r["category"] for r in records} == {"Perception"}
    assert any(r["note"] == "Multiclasses" for r in records)
    predictions = tmp_path / "pred" / "targets"
    predictions.mkdir(parents=True)
    for r in records:
        stem = Path(r["output_image"]).stem
        shutil.copyfile(bench / r["output_image"], predictions / f"{stem}_0.png")
    _ok("score", "--dataset", f"miedb:{out / 'exports' / 'miedb'}", "--predictions",
        tmp_path / "pred", "--out", tmp_path / "miedb.jsonl")  # fmt: skip
    scores = [json.loads(x) for x in (tmp_path / "miedb.jsonl").read_text().splitlines()]
    first = [s for s in scores if s["k"] == 0]
    assert len(first) == 2 * len(records)  # miedb@paper and miedb@1
    assert all(s["metrics"]["dice"] == 1.0 for s in first), [s for s in first if s["metrics"]
                                                             ["dice"] != 1.0][:2]  # fmt: skip
    from medibench.datasets import load_dataset

    parquet = load_dataset(f"native:{out / 'exports' / 'hf-parquet'}")
    assert sorted(parquet.sample_ids()) == sorted(r["idx"] for r in records)


def test_report_command_and_the_grayscale_dice_target(tmp_path, demo_sources):
    out = tmp_path / "p"
    build("perception", demo_sources["liver"], out, exports=())
    printed = _ok("build", "report", out)
    assert "overlay-to-mask Dice (grayscale): 1.0000" in printed
    quality = json.loads((out / "report" / "quality.json").read_text())
    assert quality["overlay_dice"]["grayscale_mean"] >= 0.999
    assert {p.name for p in (out / "report").iterdir()} >= {"quality.md", "quality.json",
                                                            "counts.png", "dice.png"}  # fmt: skip


def test_another_build_in_the_same_folder_is_refused(tmp_path, png_source):
    out = tmp_path / "out"
    _ok("build", "perception", "--source", png_source, "--out", out)
    result = runner.invoke(app, ["build", "perception", "--source", str(png_source), "--out",
                                 str(out), "--seed", "1"])  # fmt: skip
    assert result.exit_code == 2
    assert "holds another build (seed: 0 then, 1 now)" in " ".join(result.output.split())
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["build", "perception", "--source", str(png_source), "--out",
                                 str(foreign)])  # fmt: skip
    assert result.exit_code == 2 and "is not empty and holds no build" in result.output


def test_a_failing_item_is_reported_and_the_others_are_kept(tmp_path):
    source = mni_png_source(tmp_path / "src", patients=3, per_patient=1)
    (tmp_path / "src" / "lab" / "p1_0.png").write_bytes(b"not a png")
    result = runner.invoke(app, ["build", "perception", "--source", str(source), "--out",
                                 str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "item 'p1_0':" in text and "p1_0.png: not an image" in text
    assert "1 item(s) failed, 2 built" in text
    assert sorted(p.stem for p in (tmp_path / "out" / ".build" / "items").glob("*.json")) == [
        "p0_0", "p2_0"]  # fmt: skip


def slow_inpainter(image, mask, *, prompt, seed):
    """A classical fill that takes a while: a build to kill in the middle."""
    from medibench.build import ClassicalInpainter

    time.sleep(0.25)
    return ClassicalInpainter().inpaint(image, mask, prompt=prompt, seed=seed)


def test_a_killed_build_rerun_finishes_without_redoing_finished_items(tmp_path):
    source = mni_png_source(tmp_path / "src", patients=6, per_patient=1,
                            extra="lesions: [white matter]\n")  # fmt: skip
    out = tmp_path / "out"
    command = [sys.executable, "-m", "medibench", "build", "modification", "--source",
               str(source), "--out", str(out), "--inpainter",
               "tests.build.test_cli:slow_inpainter"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    items = out / ".build" / "items"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(items.glob("*.json"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = {p.stem: p.read_bytes() for p in items.glob("*.json")}
    assert 2 <= len(finished) < 6 and not (out / "samples.jsonl").exists()
    built = []
    result = build("modification", source, out, inpainter="tests.build.test_cli:slow_inpainter",
                   on_item=lambda item, record: built.append(item))  # fmt: skip
    assert sorted(result.skipped) == sorted(finished)
    assert sorted(built) == sorted({f"p{i}_0" for i in range(6)} - set(finished))
    assert {p.stem: p.read_bytes() for p in items.glob("*.json") if p.stem in finished} == finished
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert {s["metadata"]["item"] for s in samples} == {f"p{i}_0" for i in range(6)}


@pytest.mark.slow
@RAY_GROUP
def test_ray_tasks_build_what_the_local_executor_builds(tmp_path):
    ray = pytest.importorskip("ray")
    source = mni_png_source(tmp_path / "src", patients=3, per_patient=2)
    build("perception", source, tmp_path / "local", exports=())
    with only_ray_instance():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        result = build("perception", source, tmp_path / "ray", executor="ray", exports=())
    assert len(result.built) == 6 and not result.failures
    local = (tmp_path / "local" / "samples.jsonl").read_text().splitlines()
    remote = (tmp_path / "ray" / "samples.jsonl").read_text().splitlines()
    assert [json.loads(x)["sample_id"] for x in local] == [
        json.loads(x)["sample_id"] for x in remote
    ]
    for line in local:
        s = json.loads(line)
        for role in ("input", "target", "mask"):
            a = (tmp_path / "local" / s[role]).read_bytes()
            assert a == (tmp_path / "ray" / s[role]).read_bytes()


def test_a_moved_build_folder_resumes(tmp_path, png_source):
    build("perception", png_source, tmp_path / "a", exports=())
    (tmp_path / "a").rename(tmp_path / "b")
    result = build("perception", png_source, tmp_path / "b", exports=())
    assert result.built == [] and len(result.skipped) == 8 and result.samples > 0
