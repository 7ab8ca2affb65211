"""``medibench train`` on a tiny random InstructPix2Pix: the loss falls, checkpoints load as
model specs (full) and in plain diffusers (LoRA), and every bad input stops before step 1."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
pytest.importorskip("peft")
pytest.importorskip("accelerate")

from medibench.cli import app  # noqa: E402
from medibench.models._spec import parse_model_spec  # noqa: E402
from medibench.train import TrainConfig, train  # noqa: E402
from medibench.train._checkpoint import load_state  # noqa: E402
from medibench.train._data import open_training_data  # noqa: E402
from medibench.train._families import InstructPix2PixFamily  # noqa: E402
from tests.train.conftest import make_triplets, train_args  # noqa: E402

torch.set_num_threads(1)


def config(data, weights, out, **kw):
    base = {"method": "full", "max_steps": 2, "bins": (32,), "checkpoint_every": 1000, "rank": 4}
    return TrainConfig(dataset=f"native:{data}", model=f"ip2p:{weights}", out=out, **{**base, **kw})


def fixed_loss(family, cfg) -> float:
    """The loss over the 8 triplets at fixed noise and timesteps (4 draws each), no dropout."""
    data, _ = open_training_data(cfg.dataset, bins=cfg.bins, multiple=16, mix={}, seed=0)
    losses = []
    with torch.no_grad():
        for i in range(len(data)):
            for s in range(4):
                g = torch.Generator().manual_seed(100 + 10 * i + s)
                prompt = data.items[i].sample.instruction
                losses.append(float(family.loss([data.pixels(i)], [prompt], g)))
    return float(np.mean(losses))


def test_loss_falls_when_overfitting_8_triplets(tiny_ip2p, triplets, tmp_path):
    cfg = config(
        triplets,
        tiny_ip2p,
        tmp_path / "run",
        max_steps=30,
        batch_size=4,
        lr=1e-3,
        conditioning_dropout=0.0,
    )
    result = train(cfg)
    before = fixed_loss(InstructPix2PixFamily(tiny_ip2p, cfg, "cpu", torch.float32), cfg)
    after = fixed_loss(InstructPix2PixFamily(result.checkpoint, cfg, "cpu", torch.float32), cfg)
    # Measured on this recipe: 1.121 -> 0.709 (ratio 0.63); 0.8 leaves room for other CPUs.
    assert after < 0.8 * before
    log = [json.loads(line) for line in (tmp_path / "run/train.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 31))
    assert log[-1]["samples_seen"] == 120 and all(r["lr"] == 1e-3 for r in log)
    assert set(log[0]) == {"step", "loss", "lr", "samples_seen", "time_per_step_s"}


def test_full_checkpoint_is_a_model_spec_differs_from_base_and_reloads_identically(
    tiny_ip2p, triplets, tmp_path
):
    result = train(config(triplets, tiny_ip2p, tmp_path / "run", lr=1e-2))
    image = np.random.default_rng(3).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    opts = ["steps=2", "resolution=null"]

    def edit(spec, extra=()):
        return (
            parse_model_spec(spec, [*opts, *extra]).load().edit(image, "remove the lesion", seed=5)
        )

    trained = edit(f"ip2p:{result.checkpoint}")
    assert np.array_equal(trained, edit(f"ip2p:{result.checkpoint}"))
    assert not np.array_equal(trained, edit(f"ip2p:{tiny_ip2p}"))
    card = (result.checkpoint / "README.md").read_text()
    recorded = json.loads((tmp_path / "run/train_config.json").read_text())
    for text in (
        "base_model:",
        recorded["base_hash"],
        recorded["dataset_hash"],
        "| seed | 0 |",
        "| lr | 0.01 |",
        "| conditioning_dropout | 0.05 |",
        "medibench 0.1.0",
        "| prediction_type | epsilon |",
    ):
        assert text in card
    assert recorded["objective"]["conditioning"].startswith("input image latents concatenated")


def test_lora_checkpoint_loads_in_plain_diffusers_and_as_lora_option(tiny_ip2p, triplets, tmp_path):
    result = train(config(triplets, tiny_ip2p, tmp_path / "run", method="lora", lr=5e-2))
    assert (result.checkpoint / "pytorch_lora_weights.safetensors").is_file()
    image = np.random.default_rng(3).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    from PIL import Image

    def plain(lora):
        pipe = diffusers.StableDiffusionInstructPix2PixPipeline.from_pretrained(
            tiny_ip2p, safety_checker=None, requires_safety_checker=False
        )
        pipe.set_progress_bar_config(disable=True)
        if lora:
            pipe.load_lora_weights(result.checkpoint)
        return pipe(
            prompt="remove the lesion",
            image=Image.fromarray(image),
            num_inference_steps=2,
            generator=torch.Generator().manual_seed(0),
            output_type="np",
        ).images[0]

    assert np.abs(plain(True) - plain(False)).max() > 1e-4
    spec = parse_model_spec(
        f"ip2p:{tiny_ip2p}", ["steps=2", "resolution=null", f"lora={result.checkpoint}"]
    )
    model = spec.load()
    assert model.runtime()["lora"] == str(result.checkpoint)
    a = model.edit(image, "remove the lesion", seed=1)
    assert np.array_equal(a, spec.load().edit(image, "remove the lesion", seed=1))


def test_lora_resume_ends_with_the_uninterrupted_weights(tiny_ip2p, triplets, tmp_path):
    def lora(out, steps):
        options = {"method": "lora", "checkpoint_every": 2, "lr": 1e-2, "grad_accum": 2}
        return train(config(triplets, tiny_ip2p, tmp_path / out, max_steps=steps, **options))

    whole = lora("a", 4)
    lora("b", 2)
    resumed = lora("b", 4)
    assert resumed.start_step == 2
    a, b = load_state(whole.checkpoint)["trainable"], load_state(resumed.checkpoint)["trainable"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    log = (tmp_path / "a/train.jsonl").read_text().splitlines()
    again = (tmp_path / "b/train.jsonl").read_text().splitlines()
    strip = [{k: v for k, v in json.loads(x).items() if k != "time_per_step_s"} for x in log]
    assert strip == [
        {k: v for k, v in json.loads(x).items() if k != "time_per_step_s"} for x in again
    ]


def _cli(*args):
    return CliRunner().invoke(app, ["train", *map(str, args)])


@pytest.fixture(scope="module")
def no_targets(tmp_path_factory):
    return make_triplets(tmp_path_factory.mktemp("data") / "nt", n=2, targets=False)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--method": "fine"}, "--method fine is not supported; ip2p trains with full or lora"),
        ({"--model": "diffusers-inpaint:{w}"}, "diffusers-inpaint trains with lora"),
        ({"--model": "flux-kontext:{w}"}, "--method full is not supported; flux-kontext trains"),
        ({"--model": "qwen-image-edit:{w}"}, "--method full is not supported; qwen-image-edit"),
        ({"--model": "diffusers:{w}"}, "family 'diffusers' cannot be trained"),
        ({"--model": "classical:x"}, "family 'classical' cannot be trained"),
        ({"--resolution": "40"}, "resolution 40 is not a multiple of 16"),
        ({"--method": "lora", "--rank": "0"}, "--rank must be >= 1 for LoRA, got 0"),
        ({"--dataset": "native:{nt}"}, "2 of 2 samples have no target image (first: 't000')"),
        (
            {"--eval-dataset": "native:{d}", "--eval-every": "1"},
            "holds 8 of the training samples (first: 't000'): evaluating on the training split",
        ),
        ({"--mix": "perception=1,surgery=1"}, "no sample has perspective or task 'surgery'"),
        ({"--model": "ip2p:{w}-missing"}, "does not exist"),
    ],
)
def test_bad_inputs_are_clear_errors_before_the_first_step(
    tiny_ip2p, triplets, no_targets, tmp_path, change, message
):
    fill = {"w": tiny_ip2p, "d": triplets, "nt": no_targets}
    args = {
        "--dataset": "native:{d}",
        "--model": "ip2p:{w}",
        "--method": "full",
        "--out": str(tmp_path / "run"),
        "--resolution": "32",
        "--max-steps": "1",
        **change,
    }
    result = _cli(*[x for k, v in args.items() for x in (k, v.format(**fill))])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "run" / "train.jsonl").exists()


def test_a_folder_trained_with_other_settings_is_refused(tiny_ip2p, triplets, tmp_path):
    train(config(triplets, tiny_ip2p, tmp_path / "run", max_steps=1))
    options = {"lr": 0.5, "rank": 4, "checkpoint_every": 1000}
    result = CliRunner().invoke(app, train_args(triplets, tiny_ip2p, tmp_path / "run", **options))
    assert result.exit_code == 2
    assert "was trained with other settings (lr: 0.5 != 0.0001)" in " ".join(result.output.split())


@pytest.mark.skipif(torch.cuda.is_available(), reason="fp16 is refused on CPU-only machines")
def test_fp16_without_a_gpu_is_refused_and_bf16_trains(tiny_ip2p, triplets, tmp_path):
    fp16 = train_args(triplets, tiny_ip2p, tmp_path / "a", max_steps=1, mixed_precision="fp16")
    result = CliRunner().invoke(app, fp16)
    assert result.exit_code == 2 and "fp16 needs a CUDA GPU" in " ".join(result.output.split())
    bf16 = {"max_steps": 1, "mixed_precision": "bf16", "method": "lora", "rank": 4}
    result = CliRunner().invoke(app, train_args(triplets, tiny_ip2p, tmp_path / "b", **bf16))
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "b/train.jsonl").read_text())
    assert np.isfinite(record["loss"]) and record["step"] == 1
