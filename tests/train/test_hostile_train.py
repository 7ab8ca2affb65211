"""``medibench train`` on hostile input: a bad image, a nonsense setting, a damaged or changed
training folder, a kill or a full disk. Each ends in one line naming the file, option or sample,
exit 2 (1 for a full disk), nothing in the folder corrupted."""

from __future__ import annotations

import errno
import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("accelerate")

from medibench.cli import app  # noqa: E402
from medibench.train._checkpoint import load_state  # noqa: E402
from tests._cli import error_line as _error  # noqa: E402
from tests._cli import invoke as _invoke  # noqa: E402
from tests.train.conftest import make_triplets, train_args  # noqa: E402

torch.set_num_threads(1)


def _spoil(path, how):
    if how == "zero-byte":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(bytes(range(7, 250)) * 3)
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:120])
    elif how == "16-bit":
        Image.fromarray(np.full((32, 32), 40000, np.uint16)).save(path)


@pytest.mark.parametrize("role", ["input", "target"])
@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("zero-byte", "empty file (0 bytes)"),
        ("garbage", "not an image"),
        ("truncated", "truncated PNG"),
        ("16-bit", "16-bit or float"),
    ],
)
def test_a_bad_image_names_the_sample_and_file(tiny_ip2p, tmp_path, role, how, words):
    data = make_triplets(tmp_path / "d", n=2)
    name = "t001.png" if role == "input" else "t001_t.png"
    _spoil(data / "img" / name, how)
    out = tmp_path / "out"
    res = _invoke(train_args(data, tiny_ip2p, out, max_steps=1, batch_size=2))
    assert res.exit_code == 2
    line = _error(res)
    assert "sample 't001'" in line and f"{role} " in line
    assert str(data / "img" / name) in line and words in line
    assert not list(out.glob("checkpoint-*"))


def test_a_decompression_bomb_is_named_not_a_pillow_traceback(tiny_ip2p, tmp_path, monkeypatch):
    data = make_triplets(tmp_path / "d", n=2)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 32x32 = 1024 > 2 * 100: a bomb
    res = _invoke(train_args(data, tiny_ip2p, tmp_path / "out", max_steps=1))
    assert res.exit_code == 2
    line = _error(res)
    assert "sample 't000'" in line and str(data / "img" / "t000.png") in line
    assert "decompression bomb" in line


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"lr": "inf"}, "--lr must be a finite number > 0, got inf"),
        ({"lr": "nan"}, "--lr must be a finite number > 0, got nan"),
        ({"lr": "0"}, "--lr must be a finite number > 0, got 0.0"),
        ({"snr_gamma": "-1"}, "--snr-gamma must be a finite number > 0, got -1.0"),
        ({"snr_gamma": "0"}, "--snr-gamma must be a finite number > 0, got 0.0"),
        ({"snr_gamma": "nan"}, "--snr-gamma must be a finite number > 0, got nan"),
        ({"mix": "perception=nan"}, "--mix weights must be finite numbers"),
        ({"mix": "perception=inf,modification=1"}, "--mix weights must be finite numbers"),
        ({"seed": "-1"}, "--seed must be >= 0, got -1"),
    ],
)
def test_a_nonsense_setting_is_refused_before_training(
    tiny_ip2p, triplets, tmp_path, options, words
):
    out = tmp_path / "out"
    res = _invoke(train_args(triplets, tiny_ip2p, out, max_steps=1, **options))
    assert res.exit_code == 2
    assert words in _error(res)
    assert not out.exists()


def test_a_truncated_base_unet_is_named(tiny_ip2p, triplets, tmp_path):
    base = tmp_path / "base"
    shutil.copytree(tiny_ip2p, base)
    unet = base / "unet" / "diffusion_pytorch_model.safetensors"
    unet.write_bytes(unet.read_bytes()[:1000])
    res = _invoke(train_args(triplets, base, tmp_path / "out", max_steps=1))
    assert res.exit_code == 2
    assert f"--model 'ip2p:{base}': {unet} is damaged (" in _error(res)


def test_out_an_existing_file_is_refused(tiny_ip2p, triplets, tmp_path):
    out = tmp_path / "out"
    out.write_text("keep me")
    res = _invoke(train_args(triplets, tiny_ip2p, out, max_steps=1))
    assert res.exit_code == 2
    assert f"--out {out} is a file" in _error(res)
    assert out.read_text() == "keep me"


def test_every_instruction_blank_is_refused(tiny_ip2p, tmp_path):
    data = make_triplets(tmp_path / "d", n=2)
    lines = (data / "samples.jsonl").read_text().replace("remove the lesion", "  ")
    (data / "samples.jsonl").write_text(lines)
    res = _invoke(train_args(data, tiny_ip2p, tmp_path / "out", max_steps=1))
    assert res.exit_code == 2
    assert "every instruction is blank (first sample: 't000')" in _error(res)


def test_a_target_of_another_aspect_ratio_is_refused(tiny_ip2p, tmp_path):
    data = make_triplets(tmp_path / "d", n=2)
    target = data / "img" / "t001_t.png"
    Image.fromarray(np.zeros((32, 16, 3), np.uint8)).save(target)
    res = _invoke(train_args(data, tiny_ip2p, tmp_path / "out", max_steps=1))
    assert res.exit_code == 2
    line = _error(res)
    assert f"sample 't001': the target {target} is 16x32 but the input" in line
    assert "another aspect ratio" in line


def test_a_byte_identical_copy_as_eval_dataset_is_refused(tiny_ip2p, triplets, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(triplets, copy)
    args = train_args(triplets, tiny_ip2p, tmp_path / "out", max_steps=1, eval_every=1)
    res = _invoke([*args, "--eval-dataset", f"native:{copy}"])
    assert res.exit_code == 2
    line = _error(res)
    assert "holds 8 of the training samples (first: 't000')" in line
    assert "(the same files or byte-identical copies)" in line


# -- a damaged or changed training folder --------------------------------------------------------
def _unet(folder):
    from safetensors.torch import load_file

    return load_file(folder / "unet" / "diffusion_pytorch_model.safetensors")


def _steps(out):
    return [json.loads(x)["step"] for x in (out / "train.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("text", ["{}", '{"dataset": "native:x", "model": "ip2p'])
def test_a_damaged_train_config_names_the_file(tiny_ip2p, triplets, tmp_path, text):
    out = tmp_path / "out"
    out.mkdir()
    (out / "train_config.json").write_text(text)
    res = _invoke(train_args(triplets, tiny_ip2p, out, max_steps=1))
    assert res.exit_code == 2
    line = _error(res)
    assert f"{out / 'train_config.json'} is damaged (" in line
    assert "give --overwrite to start afresh, or another --out" in line
    assert (out / "train_config.json").read_text() == text and not list(out.glob("checkpoint-*"))


def test_a_deleted_train_config_with_checkpoints_is_refused(tiny_ip2p, triplets, tmp_path):
    out = tmp_path / "out"
    assert _invoke(train_args(triplets, tiny_ip2p, out, max_steps=1)).exit_code == 0
    (out / "train_config.json").unlink()
    res = _invoke(train_args(triplets, tiny_ip2p, out, max_steps=2, lr=2e-4))
    assert res.exit_code == 2
    assert f"{out / 'train_config.json'} is missing but {out} holds checkpoints" in _error(res)
    assert _steps(out) == [1] and not (out / "checkpoint-2").exists()


def test_changed_base_weights_are_refused_and_overwrite_starts_afresh(
    tiny_ip2p, triplets, tmp_path
):
    from safetensors.torch import save_file

    base = tmp_path / "base"
    shutil.copytree(tiny_ip2p, base)
    out = tmp_path / "out"
    args = train_args(triplets, base, out, method="lora", rank=2, max_steps=1)
    assert _invoke(args).exit_code == 0
    unet = _unet(base)
    first = sorted(unet)[0]
    unet[first] = unet[first] + 1
    save_file(unet, base / "unet" / "diffusion_pytorch_model.safetensors")
    res = _invoke([*args[:-2], "--max-steps", "2"])
    assert res.exit_code == 2
    line = _error(res)
    assert f"the base weights {base} changed since {out} was trained on it" in line
    assert "resume with the same files, or give --overwrite" in line
    assert not (out / "checkpoint-2").exists()
    again = _invoke([*args, "--overwrite"])
    assert again.exit_code == 0, again.output[-2000:]
    assert "trained to step 1" in " ".join(again.output.split())
    assert _steps(out) == [1]


def test_a_changed_dataset_at_the_same_path_is_refused(tiny_ip2p, tmp_path):
    data = make_triplets(tmp_path / "d", n=2)
    out = tmp_path / "out"
    assert _invoke(train_args(data, tiny_ip2p, out, max_steps=1)).exit_code == 0
    target = data / "img" / "t001_t.png"
    Image.fromarray(np.full((32, 32, 3), 7, np.uint8)).save(target)
    res = _invoke(train_args(data, tiny_ip2p, out, max_steps=2))
    assert res.exit_code == 2
    assert f"the dataset native:{data} changed since {out} was trained on it" in _error(res)


# -- kills, damaged checkpoints, a full disk, a second process ----------------------------------
class _Killed(BaseException):
    """Stands in for SIGKILL: nothing after the raise runs (no checkpoint, no cleanup)."""


@pytest.mark.parametrize("method", ["full", "lora"])
@pytest.mark.parametrize("kill_at", [1, 2])
def test_a_kill_before_the_first_checkpoint_leaves_no_repeated_steps(
    tiny_ip2p, triplets, tmp_path, monkeypatch, method, kill_at
):
    import medibench.train._loop as loop

    options = {"method": method, "rank": 2, "max_steps": 3, "lr": 1e-3}
    args = train_args(triplets, tiny_ip2p, tmp_path / "b", **options)
    logged = loop._Training._log

    def log(self, record):
        logged(self, record)
        if record["step"] == kill_at:
            raise _Killed

    with monkeypatch.context() as patch:
        patch.setattr(loop._Training, "_log", log)
        with pytest.raises(_Killed):
            CliRunner().invoke(app, args)
    assert _steps(tmp_path / "b") == list(range(1, kill_at + 1))
    assert not list((tmp_path / "b").glob("checkpoint-*"))
    resumed = _invoke(args)
    assert resumed.exit_code == 0, resumed.output[-2000:]
    assert _steps(tmp_path / "b") == [1, 2, 3]
    whole = _invoke(train_args(triplets, tiny_ip2p, tmp_path / "a", **options))
    assert whole.exit_code == 0
    a, b = load_state(tmp_path / "a/checkpoint-3"), load_state(tmp_path / "b/checkpoint-3")
    assert a["samples_seen"] == b["samples_seen"] == 3
    key = "trainable" if method == "lora" else "optimizer"
    assert repr(a[key]) == repr(b[key])


def test_a_folder_whose_only_checkpoint_is_damaged_trains_from_step_0(
    tiny_ip2p, triplets, tmp_path
):
    out = tmp_path / "out"
    args = train_args(triplets, tiny_ip2p, out, max_steps=1)
    assert _invoke(args).exit_code == 0
    (out / "checkpoint-1" / "training_state.pt").write_bytes(b"")
    res = _invoke(args)
    assert res.exit_code == 0, res.output[-2000:]
    text = " ".join(res.output.split())
    assert f"note: {out / 'checkpoint-1' / 'training_state.pt'} is damaged (" in text
    assert "no checkpoint reads back whole: training from step 0" in text
    assert "trained to step 1" in text and _steps(out) == [1]
    assert load_state(out / "checkpoint-1")["step"] == 1


def _cut(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    ("method", "damage", "file"),
    [
        ("full", _cut, "training_state.pt"),
        ("full", lambda p: p.write_bytes(b""), "training_state.pt"),
        ("full", _cut, "unet/diffusion_pytorch_model.safetensors"),
        ("lora", _cut, "training_state.pt"),
        ("lora", _cut, "pytorch_lora_weights.safetensors"),
    ],
)
def test_a_damaged_latest_checkpoint_resumes_from_the_one_before(
    tiny_ip2p, triplets, tmp_path, method, damage, file
):
    out = tmp_path / "out"
    args = train_args(triplets, tiny_ip2p, out, method=method, rank=2, max_steps=2)
    assert _invoke([*args, "--checkpoint-every", "1"]).exit_code == 0
    before = load_state(out / "checkpoint-2")
    damage(out / "checkpoint-2" / file)
    res = _invoke([*args, "--checkpoint-every", "1"])
    assert res.exit_code == 0, res.output[-2000:]
    text = " ".join(res.output.split())
    assert f"note: {out / 'checkpoint-2' / file} is damaged (" in text
    assert "resumed at step 1, trained to step 2" in text
    after = load_state(out / "checkpoint-2")
    assert after["samples_seen"] == before["samples_seen"] and _steps(out) == [1, 2]
    key = "trainable" if method == "lora" else "optimizer"
    assert repr(after[key]) == repr(before[key])


@pytest.mark.parametrize(
    "fault",
    [
        RuntimeError("[enforce fail at inline_container.cc:783] . unexpected pos 576 vs 470"),
        OSError(errno.ENOSPC, "No space left on device"),
    ],
)
def test_a_full_disk_during_a_checkpoint_keeps_the_last_one(
    tiny_ip2p, triplets, tmp_path, monkeypatch, fault
):
    out = tmp_path / "out"
    args = train_args(triplets, tiny_ip2p, out, max_steps=2, checkpoint_every=1)
    real = torch.save

    def save(obj, path, *a, **k):
        if "checkpoint-2" in str(path):
            raise fault
        return real(obj, path, *a, **k)

    with monkeypatch.context() as patch:
        patch.setattr(torch, "save", save)
        res = _invoke(args)
    assert res.exit_code == 1
    line = _error(res)
    assert f"no space left on the device to write {out / 'checkpoint-2.tmp'}" in line
    assert f"{out / 'checkpoint-1'} is the last complete checkpoint" in line
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]
    assert load_state(out / "checkpoint-1")["step"] == 1 and _unet(out / "checkpoint-1")
    again = _invoke(args)
    assert again.exit_code == 0 and _steps(out) == [1, 2]
    assert "resumed at step 1, trained to step 2" in " ".join(again.output.split())


def test_a_second_process_on_the_folder_exits_3(tiny_ip2p, triplets, tmp_path):
    from medibench.runs._lock import LOCK_FILENAME, _acquire

    out = tmp_path / "out"
    out.mkdir()
    fd = _acquire(out, out / LOCK_FILENAME)  # another process's lock (its own descriptor)
    try:
        res = _invoke(train_args(triplets, tiny_ip2p, out, max_steps=1))
    finally:
        os.close(fd)
    assert res.exit_code == 3
    assert f"run folder {out} is in use" in _error(res)
    assert not list(out.glob("checkpoint-*"))
