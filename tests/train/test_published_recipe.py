"""The options of diffusers' ``train_instruct_pix2pix.py`` that ``medibench train`` takes as
published: ``--random-flip`` (``--random_flip``), ``--ema`` (``--use_ema``: ``EMAModel`` with its
defaults), ``--lr-scheduler`` and ``--lr-warmup-steps`` (``get_scheduler``'s names), each held
against the example's behaviour restated here, and a training with all four SIGKILLed and
re-run ends with the weights of an uninterrupted one."""

from __future__ import annotations

import json
import math
import signal

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("accelerate")
safetensors = pytest.importorskip("safetensors.torch")

from medibench.cli import app  # noqa: E402
from medibench.train import TrainConfig, TrainError  # noqa: E402
from medibench.train._config import LR_SCHEDULERS  # noqa: E402
from medibench.train._data import flipped  # noqa: E402
from tests.train.conftest import train_args  # noqa: E402
from tests.train.test_resume import _killed_at  # noqa: E402

PUBLISHED = {"random_flip": "", "ema": "", "lr_scheduler": "cosine", "lr_warmup_steps": 10}


def _args(data, weights, out, **more):
    options = {"max_steps": 4, "checkpoint_every": 2, "batch_size": 2, "lr": 1e-3, **more}
    args = train_args(data, weights, out, **options)
    return [a for a in args if a != ""]  # a flag's empty value


def _unet(folder):
    return safetensors.load_file(folder / "unet" / "diffusion_pytorch_model.safetensors")


def _state(folder):
    return torch.load(folder / "training_state.pt", map_location="cpu", weights_only=False)


def _log(folder):
    lines = (folder / "train.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k != "time_per_step_s"} for x in lines]


def test_the_published_options_resume_after_sigkill_to_the_same_weights(
    tiny_ip2p, triplets, tmp_path
):
    killed = _killed_at(3, _args(triplets, tiny_ip2p, tmp_path / "b", **PUBLISHED))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resumed = CliRunner().invoke(app, _args(triplets, tiny_ip2p, tmp_path / "b", **PUBLISHED))
    assert resumed.exit_code == 0, resumed.output[-2000:]
    assert "resumed at step 2, trained to step 4" in " ".join(resumed.output.split())
    whole = CliRunner().invoke(app, _args(triplets, tiny_ip2p, tmp_path / "a", **PUBLISHED))
    assert whole.exit_code == 0, whole.output[-2000:]
    a, b = tmp_path / "a/checkpoint-4", tmp_path / "b/checkpoint-4"
    ua, ub = _unet(a), _unet(b)
    assert ua.keys() == ub.keys() and all(torch.equal(ua[k], ub[k]) for k in ua)
    sa, sb = _state(a), _state(b)
    assert all(torch.equal(sa["trainable"][k], sb["trainable"][k]) for k in sa["trainable"])
    assert sa["ema"]["optimization_step"] == sb["ema"]["optimization_step"] == 4
    assert _log(tmp_path / "a") == _log(tmp_path / "b")
    # cosine with 10 warm-up steps: step s (from 0) trains at lr * s / 10
    assert [r["lr"] for r in _log(tmp_path / "a")] == pytest.approx([0, 1e-4, 2e-4, 3e-4])
    record = json.loads((tmp_path / "a/train_config.json").read_text())
    assert {k: record[k] for k in PUBLISHED} == {
        "random_flip": True, "ema": True, "lr_scheduler": "cosine", "lr_warmup_steps": 10
    }  # fmt: skip


def test_the_checkpoint_holds_diffusers_ema_of_the_raw_weights(tiny_ip2p, triplets, tmp_path):
    # EMAModel's defaults: decay 0 at its first update, decay (1 + 1) / (10 + 1) at the
    # second: ema_2 = 2/11 w_1 + 9/11 w_2 (w_n: the raw weights after step n)
    args = _args(triplets, tiny_ip2p, tmp_path / "e", ema="", max_steps=2, checkpoint_every=1)
    assert CliRunner().invoke(app, args).exit_code == 0
    w1 = _state(tmp_path / "e/checkpoint-1")["trainable"]
    w2 = _state(tmp_path / "e/checkpoint-2")["trainable"]
    saved, first = _unet(tmp_path / "e/checkpoint-2"), _unet(tmp_path / "e/checkpoint-1")
    for name in w1:
        # the first update takes the weights: s - 1 * (s - w1)
        torch.testing.assert_close(first[name], w1[name], rtol=0, atol=1e-6)
        want = 2 / 11 * w1[name] + 9 / 11 * w2[name]
        torch.testing.assert_close(saved[name], want, rtol=0, atol=1e-6)
    assert any(not torch.equal(saved[n], w2[n]) for n in w2)


def test_random_flip_flips_input_target_and_mask_together():
    rng = np.random.default_rng(0)
    pixels = [
        (rng.integers(0, 255, (4, 6, 3), np.uint8), rng.integers(0, 255, (4, 6, 3), np.uint8),
         rng.random((4, 6)) < 0.5)
        for _ in range(64)
    ]  # fmt: skip
    out = flipped(pixels, 0, 3, 1)
    flips = [not np.array_equal(o[0], p[0]) for o, p in zip(out, pixels, strict=True)]
    assert 20 < sum(flips) < 44  # about half
    for (x, y, m), (x0, y0, m0), f in zip(out, pixels, flips, strict=True):
        for a, a0 in ((x, x0), (y, y0), (m, m0)):
            assert np.array_equal(a, a0[:, ::-1] if f else a0)
    again = flipped(pixels, 0, 3, 1)  # the same coins for the same (seed, step, micro-batch)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(again, out, strict=True))


def test_the_schedules_are_diffusers_and_warm_up_needs_one(tmp_path):
    from diffusers.optimization import SchedulerType

    assert set(LR_SCHEDULERS) <= {s.value for s in SchedulerType}
    base = {"dataset": "native:x", "model": "ip2p:w", "method": "full", "out": tmp_path / "o"}
    with pytest.raises(TrainError, match="--lr-scheduler 'cosin' is not one of diffusers'"):
        TrainConfig(**base, lr_scheduler="cosin")
    with pytest.raises(TrainError, match="constant schedule has no warm-up"):
        TrainConfig(**base, lr_warmup_steps=5)
    with pytest.raises(TrainError, match="--lr-warmup-steps must be >= 0, got -1"):
        TrainConfig(**base, lr_scheduler="linear", lr_warmup_steps=-1)


def test_a_schedule_over_max_steps_refuses_to_resume_further(tmp_path):
    base = {"dataset": "native:x", "model": "ip2p:w", "method": "full", "out": tmp_path / "o"}
    cosine = TrainConfig(**base, lr_scheduler="cosine", max_steps=10)
    assert cosine.differences(TrainConfig(**base, lr_scheduler="cosine", max_steps=20)) == [
        "max_steps: 10 != 20"
    ]
    flat = TrainConfig(**base, lr_scheduler="constant_with_warmup", max_steps=10)
    assert flat.differences(TrainConfig(**base, lr_scheduler="constant_with_warmup")) == []


def test_the_cosine_schedule_is_the_published_formula():
    # get_cosine_schedule_with_warmup: s / w during warm-up, then 0.5 (1 + cos(pi p)), p the
    # progress after it
    from medibench.train._loop import _lr_scheduler

    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([param], lr=1.0)
    cfg = TrainConfig(dataset="native:x", model="ip2p:w", method="full", out="o",
                      lr_scheduler="cosine", lr_warmup_steps=3, max_steps=9)  # fmt: skip
    sched, got = _lr_scheduler(cfg, opt), []
    for _ in range(9):
        got.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    want = [s / 3 for s in range(3)] + [0.5 * (1 + math.cos(math.pi * (s - 3) / 6)) for s in
                                        range(3, 9)]  # fmt: skip
    assert got == pytest.approx(want, abs=1e-12)


def test_a_lora_with_ema_resumed_ends_as_an_uninterrupted_one(tiny_ip2p, triplets, tmp_path):
    # constant schedule: a re-run with more steps resumes (the raw adapter and the EMA both)
    def run(out, steps):
        args = _args(triplets, tiny_ip2p, out, method="lora", rank=2, ema="", random_flip="",
                     max_steps=steps, checkpoint_every=1)  # fmt: skip
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output[-2000:]

    run(tmp_path / "a", 2)
    run(tmp_path / "b", 1)
    run(tmp_path / "b", 2)
    a, b = tmp_path / "a/checkpoint-2", tmp_path / "b/checkpoint-2"
    la = safetensors.load_file(a / "pytorch_lora_weights.safetensors")
    lb = safetensors.load_file(b / "pytorch_lora_weights.safetensors")
    assert la.keys() == lb.keys() and all(torch.equal(la[k], lb[k]) for k in la)
    sa, sb = _state(a), _state(b)
    assert all(torch.equal(sa["trainable"][k], sb["trainable"][k]) for k in sa["trainable"])
    shadows = zip(sa["ema"]["shadow_params"], sb["ema"]["shadow_params"], strict=True)
    assert all(torch.equal(x, y) for x, y in shadows)
