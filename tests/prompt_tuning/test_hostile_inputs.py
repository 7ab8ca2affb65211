"""Prompt tuning under faults a hostile or unlucky user brings (issue 41): every one is a
one-line error naming the option, file or folder, a non-zero exit before any training, and an
output folder a corrected command can still use; a second writer on one ``--out`` exits 3; a
kill mid-write resumes to the uninterrupted result."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.prompt_tuning import TrainSettings, train
from medibench.prompt_tuning._grid import load_grid
from tests.prompt_tuning.conftest import write_folder_dataset
from tests.runs.test_lock import _hold

runner = CliRunner()


def cli(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_line(text: str) -> str:
    return " ".join(text.split())


def train_args(data, backbone_spec, out, *more):
    return ["calibration", "train", "--dataset", data, "--backbone", backbone_spec,
            "--method", "coop", "--shots", 2, "--epochs", 1, "--batch-size", 2,
            "--set", "n_ctx=2", "--out", out, *more]  # fmt: skip


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--lr", "nan"], "--lr=nan: must be a finite number"),
        (["--lr", "inf"], "--lr=inf: must be a finite number"),
        (["--loss", "ce:weight=nan"], "--loss 'ce:weight=nan': weight=nan must be a finite"),
        (["--set", "momentum=nan"], "--set momentum=nan: must be a finite number"),
        (["--set", "n_ctx=0"], "--set n_ctx=0: must be a whole number >= 1"),
        (["--set", "n_ctx=-4"], "--set n_ctx=-4: must be a whole number >= 1"),
        (["--loss", "mcm:alpha=abc"], "--loss 'mcm:alpha=abc': alpha='abc' is not a number"),
        (["--set", "weight_decay=-1"], "--set weight_decay=-1: must be >= 0"),
    ],
)
def test_options_training_cannot_use_are_refused_first(
    folder_dataset, tiny_clip, tmp_path, more, message
):
    out = tmp_path / "run"
    result = cli(*train_args(folder_dataset, f"clip:{tiny_clip}", out, *more))
    assert result.exit_code == 2, result.output
    assert message in one_line(result.output) and "Traceback" not in result.output
    assert not (out / "config.json").exists()  # nothing a corrected command reads as "other"


def _copy_without(src, dst, names):
    shutil.copytree(src, dst)
    for name in names:
        (dst / name).unlink()
    return dst


def test_backbones_that_do_not_load_name_their_folder(
    folder_dataset, tiny_clip, tiny_siglip, tmp_path, monkeypatch
):
    cases = [
        (f"clip:{tiny_siglip}", f"{tiny_siglip}/config.json is a siglip model, not clip"),
        (f"siglip:{tiny_clip}", f"{tiny_clip}/config.json is a clip model, not siglip"),
    ]
    notok = _copy_without(tiny_clip, tmp_path / "notok", ["tokenizer.json"])
    cases.append((f"clip:{notok}", f"{notok}: no tokenizer files"))
    torn = _copy_without(tiny_clip, tmp_path / "torn", [])
    weights = torn / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    cases.append((f"clip:{torn}", f"{torn}: its weights (*.safetensors) do not read"))
    (tmp_path / "broken_towers.py").write_text("def make():\n    raise OSError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cases.append(("broken_towers:make", "broken_towers:make() raised OSError: no GPU here"))
    for k, (spec, message) in enumerate(cases):
        out = tmp_path / f"run{k}"
        result = cli(*train_args(folder_dataset, spec, out))
        assert result.exit_code == 2, (spec, result.output)
        assert message in one_line(result.output), (spec, result.output)
        assert not (out / "config.json").exists()


def test_a_class_without_a_folder_is_refused_and_the_fix_trains(tiny_clip, tmp_path):
    data = write_folder_dataset(tmp_path / "skin", per_class=3)
    names = data / "classnames.txt"
    names.write_text(names.read_text() + "nevus melanocytic nevus\n")
    out = tmp_path / "run"
    zero_shot = ["--method", "zero-shot", "--shots", 1, "--out", out]
    base = ["calibration", "train", "--dataset", data, "--backbone", f"clip:{tiny_clip}"]
    refused = cli(*base, *zero_shot)
    assert refused.exit_code == 2
    assert f"{names}: class(es) nevus have no folder in {data}" in one_line(refused.output)
    assert not (out / "config.json").exists()
    names.write_text("".join(ln + "\n" for ln in names.read_text().splitlines()[:3]))
    fixed = cli(*base, *zero_shot)
    assert fixed.exit_code == 0, fixed.output


def test_a_second_writer_on_one_out_exits_3(folder_dataset, tiny_clip, tmp_path):
    out = tmp_path / "run"
    holder = _hold(out)  # another process writing the folder
    try:
        result = cli(*train_args(folder_dataset, f"clip:{tiny_clip}", out))
        grid = tmp_path / "g.yaml"
        grid.write_text(
            f"out: {out}\ndataset: {folder_dataset}\nevals: {{a: {folder_dataset}}}\n"
            f"methods: [zero-shot]\nseeds: [1]\nbackbones: ['clip:{tiny_clip}']\n"
        )
        in_grid = cli("calibration", "grid", grid)
    finally:
        holder.kill()
        holder.wait()
    for r in (result, in_grid):
        assert r.exit_code == 3, r.output
        assert f"run folder {out} is in use by process {holder.pid}" in one_line(r.output)
    assert not (out / "config.json").exists()


def test_a_torn_log_line_and_a_killed_temp_resume_to_the_full_run(
    folder_dataset, tiny_clip, tmp_path, monkeypatch
):
    def settings(out):
        return TrainSettings(dataset=str(folder_dataset), backbone=f"clip:{tiny_clip}",
                             method="coop", out=str(out), shots=2, epochs=3, batch_size=2,
                             options={"n_ctx": 2}, augment=False)  # fmt: skip

    full = tmp_path / "full"
    train(settings(full))
    from medibench.prompt_tuning import _methods, _train

    killed = tmp_path / "killed"
    calls = {"n": 0}
    original = _methods.CoOp.end_epoch

    def die_in_second_epoch(self, epoch, epochs):
        calls["n"] += 1
        if epoch == 1:
            raise KeyboardInterrupt
        original(self, epoch, epochs)

    monkeypatch.setattr(_methods.CoOp, "end_epoch", die_in_second_epoch)
    monkeypatch.setattr(_train, "CHECKPOINT_SECONDS", 0.0)
    with pytest.raises(KeyboardInterrupt):
        train(settings(killed))
    monkeypatch.setattr(_methods.CoOp, "end_epoch", original)
    log = killed / "train.jsonl"
    assert len(log.read_text().splitlines()) == 3  # epoch 1: 6 shots / batch 2
    with open(log, "a") as fh:  # the kill tore the next append mid-line
        fh.write('{"step": 4, "epoch": 2, "lr": 0.00')
    stale = killed / ".config.json.k3j9.tmp"
    stale.write_text("{")
    result = cli(
        "calibration", "train", "--dataset", folder_dataset, "--backbone", f"clip:{tiny_clip}",
        "--method", "coop", "--shots", 2, "--epochs", 3, "--batch-size", 2, "--set", "n_ctx=2",
        "--no-augment", "--out", killed,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"note: {log} line 4 was torn by a kill" in one_line(result.output)
    assert log.read_text() == (full / "train.jsonl").read_text()
    assert not stale.exists()
    got, want = (np.load(f / "predictions.npz")["logits"] for f in (killed, full))
    assert np.array_equal(got, want)


def test_a_torn_line_before_the_last_is_named(folder_dataset, tiny_clip, tmp_path):
    from medibench.prompt_tuning._train import _truncate_log

    log = tmp_path / "train.jsonl"
    log.write_text('{"step": 1}\n{"step": 2, "lo\n{"step": 3}\n')
    with pytest.raises(ValueError, match="train.jsonl line 2: not a JSON line"):
        _truncate_log(log, 3, print)
    log.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    notes: list[str] = []
    _truncate_log(log, 1, notes.append)
    assert log.read_text() == '{"step": 1}\n' and len(notes) == 1


GRID_BASE = "dataset: x\nevals: {a: b}\nmethods: [coop]\nseeds: [1]\nbackbones: [clip:m]\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dataset: x\nevals: {a: b\nmethods: [coop]\n", "line 3 column 8: not valid YAML"),
        (
            "dataset: x\n  - seeds: [1]\n",
            "line 2 column 10: not valid YAML (mapping values are not allowed here)",
        ),
        (GRID_BASE.replace("[coop]", "coop"), "line 3: methods: expected a list, got str 'coop'"),
        (GRID_BASE.replace("[1]", "[a]"), "line 4: seeds: expected a list of whole numbers, got"),
        (GRID_BASE.replace("{a: b}", "[a, b]"), "line 2: evals: expected a mapping, got list"),
        (GRID_BASE + "options: {coop: 3}\n", "line 6: options: coop takes a mapping of KEY:"),
        (GRID_BASE + "shots: many\n", "line 6: shots: expected a whole number, got str"),
        (GRID_BASE + "lr: .nan\n", "line 6: lr: expected a finite number, got nan"),
        (GRID_BASE + "augment: 3\n", "line 6: augment: expected true or false, got int 3"),
        (GRID_BASE + "losses: [[ce, 3]]\n", "line 6: losses: a combination is a list of loss"),
    ],
)
def test_grid_files_of_the_wrong_shape_name_file_line_and_key(tmp_path, text, message):
    path = tmp_path / "g.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        load_grid(path)
    assert str(info.value).startswith(f"{path} ") and message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_grid_lr_written_without_a_dot_is_a_number(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(GRID_BASE + "lr: 2e-3\n")  # PyYAML's YAML 1.1 reads this as text
    assert load_grid(path).train == {"lr": 0.002}


def test_grid_cli_names_a_yaml_error_in_one_line(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("dataset: [x\n")
    result = cli("calibration", "grid", path)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{path} line 2 column 1: not valid YAML" in one_line(result.output)


@pytest.mark.slow  # a child process that imports torch, and the grid three times
def test_a_killed_grid_resumes_to_the_uninterrupted_grid(folder_dataset, tiny_clip, tmp_path,
                                                          monkeypatch):  # fmt: skip
    """SIGKILL inside the second cell of ``calibration grid`` (a temp file of that cell on
    disk), then the same command: the cells and tables are the uninterrupted grid's."""
    import os

    from tests._kill import folder_state, hidden_temps, kill_mid_write
    from tests.prompt_tuning.test_grid import write_config

    config = write_config(tmp_path, folder_dataset, tiny_clip)
    text = config.read_text().replace("methods: [zero-shot, linear-probe, coop]", "methods: [coop]")
    text = text.replace('losses: [ce, "mcm:alpha=0.1,beta=0.01"]', "losses: [ce]")
    config.write_text(text.replace("seeds: [1, 2]", "seeds: [1]"))  # 2 cells: 2 templates
    ref, out = tmp_path / "ref" / "grid", tmp_path / "kill" / "grid"
    renames, real = [], os.replace

    def counted(src, dst, *args, **kwargs):  # where the renames into the folder fall
        if str(dst).startswith(str(ref)):
            renames.append(os.path.relpath(dst, ref))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", counted)
    assert cli("calibration", "grid", config, "--out", ref).exit_code == 0
    monkeypatch.setattr(os, "replace", real)
    first_done = next(i for i, r in enumerate(renames) if r.endswith("done.json"))
    kill_mid_write(["calibration", "grid", config, "--out", out], out, hang_at=first_done + 2)
    assert len(list(out.rglob("done.json"))) == 1 and not (out / "tables").exists()
    assert hidden_temps(out)
    result = cli("calibration", "grid", config, "--out", out)
    assert result.exit_code == 0, result.output
    assert "2 cells (1 trained, 1 done before)" in one_line(result.output)
    assert hidden_temps(out) == [] and len(list(out.rglob("done.json"))) == 2
    assert folder_state(out) == folder_state(ref)
