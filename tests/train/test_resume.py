"""A training SIGKILLed in a subprocess after its first checkpoint, then re-run, ends with the
weights, log and model card of an uninterrupted one (full fine-tune: the optimizer state and
the data order come back too). Only the killed training needs a process of its own; the resumed
and the uninterrupted ones run in this one (``medibench train`` through the CLI runner)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("accelerate")
safetensors = pytest.importorskip("safetensors.torch")

from medibench.cli import app  # noqa: E402
from tests.train.conftest import subprocess_env, train_args  # noqa: E402

KILLER = """
import os, signal, sys
import medibench.train._loop as loop
logged = loop._Training._log
def log(self, record):
    logged(self, record)
    if record["step"] == int(os.environ["KILL_AT_STEP"]):
        os.kill(os.getpid(), signal.SIGKILL)
loop._Training._log = log
from medibench.cli import app
app(sys.argv[1:], prog_name="medibench")
"""


def _args(data, weights, out):
    options = {"max_steps": 4, "checkpoint_every": 2, "batch_size": 2, "grad_accum": 2}
    return train_args(data, weights, out, lr=1e-3, **options)


def _killed_at(step, args):
    env = {**subprocess_env(), "KILL_AT_STEP": str(step)}
    cmd = [sys.executable, "-c", KILLER, *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _train(args):
    return CliRunner().invoke(app, args)


def _unet(folder):
    return safetensors.load_file(folder / "unet" / "diffusion_pytorch_model.safetensors")


def test_resume_after_sigkill_ends_with_the_uninterrupted_weights(tiny_ip2p, triplets, tmp_path):
    killed = _killed_at(3, _args(triplets, tiny_ip2p, tmp_path / "b"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert (tmp_path / "b/checkpoint-2").is_dir() and not (tmp_path / "b/checkpoint-4").exists()
    steps = [json.loads(x)["step"] for x in (tmp_path / "b/train.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    resumed = _train(_args(triplets, tiny_ip2p, tmp_path / "b"))
    assert resumed.exit_code == 0, resumed.output[-2000:]
    assert "resumed at step 2, trained to step 4" in " ".join(resumed.output.split())
    whole = _train(_args(triplets, tiny_ip2p, tmp_path / "a"))
    assert whole.exit_code == 0, whole.output[-2000:]
    a, b = _unet(tmp_path / "a/checkpoint-4"), _unet(tmp_path / "b/checkpoint-4")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    def log(folder):
        lines = (folder / "train.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(x).items() if k != "time_per_step_s"} for x in lines]

    assert log(tmp_path / "a") == log(tmp_path / "b") and len(log(tmp_path / "a")) == 4
    card = (tmp_path / "a/checkpoint-4/README.md").read_text().replace(str(tmp_path / "a"), "DIR")
    again = (tmp_path / "b/checkpoint-4/README.md").read_text().replace(str(tmp_path / "b"), "DIR")
    assert card == again
