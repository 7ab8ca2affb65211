"""FLUX.1 Kontext with LoRA (flow matching, reference tokens) on a tiny random pipeline built
from the real config classes (bench/gpu_generate.py's tiny configs): it trains, its LoRA loads in
plain diffusers and as ``flux-kontext:BASE lora=...``, and changes the edit."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
pytest.importorskip("peft")
pytest.importorskip("accelerate")

from medibench.models._spec import parse_model_spec  # noqa: E402
from medibench.train import TrainConfig, TrainError, train  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_kontext(tmp_path_factory):
    from bench.gpu_generate import build

    folder = tmp_path_factory.mktemp("weights") / "tiny-kontext"
    build("flux-kontext", tiny=True, device="cpu", dtype=torch.float32).save_pretrained(folder)
    return folder


def test_kontext_lora_trains_and_loads_in_diffusers_and_as_a_spec(tiny_kontext, triplets, tmp_path):
    cfg = TrainConfig(
        dataset=f"native:{triplets}",
        model=f"flux-kontext:{tiny_kontext}",
        method="lora",
        out=tmp_path / "run",
        max_steps=3,
        bins=(32,),
        rank=4,
        lr=1e-2,
    )
    result = train(cfg)
    log = [json.loads(x) for x in (tmp_path / "run/train.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3] and all(np.isfinite(r["loss"]) for r in log)
    recorded = json.loads((tmp_path / "run/train_config.json").read_text())
    assert recorded["objective"]["objective"] == "flow matching (rectified flow)"
    pipe = diffusers.FluxKontextPipeline.from_pretrained(tiny_kontext)
    pipe.load_lora_weights(result.checkpoint)
    assert any("lora_A" in n for n, _ in pipe.transformer.named_parameters())
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    opts = ["steps=2", "max_area=1024"]

    def edit(extra=()):
        model = parse_model_spec(f"flux-kontext:{tiny_kontext}", [*opts, *extra]).load()
        return model.edit(image, "remove the lesion", seed=1)

    tuned = edit([f"lora={result.checkpoint}"])
    assert np.array_equal(tuned, edit([f"lora={result.checkpoint}"]))
    assert not np.array_equal(tuned, edit())


def test_kontext_trains_at_multiples_of_16_only(tiny_kontext, triplets, tmp_path):
    cfg = TrainConfig(
        dataset=f"native:{triplets}",
        model=f"flux-kontext:{tiny_kontext}",
        method="lora",
        out=tmp_path / "run",
        bins=(40,),
    )
    with pytest.raises(TrainError, match="resolution 40 is not a multiple of 16"):
        train(cfg)
