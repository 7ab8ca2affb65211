"""Qwen-Image-Edit with LoRA (flow matching, reference tokens, the prompt encoded with the input
image) on the tiny random pipeline the conformance tests build: it trains, its LoRA loads in
plain diffusers and as ``qwen-image-edit:BASE lora=...``, and changes the edit."""

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
from tests.conformance._diffusers_models import weights  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_qwen():
    return weights("qwen-image-edit")


@pytest.fixture
def small_area(monkeypatch):
    """The pipeline's fixed ~1 Mpx working area held to 32 x 32 px (seconds on a CPU)."""
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit as edit

    real = edit.calculate_dimensions
    monkeypatch.setattr(edit, "calculate_dimensions", lambda area, ratio: real(32 * 32, ratio))


def _config(weights_folder, data, out, **options):
    return TrainConfig(dataset=f"native:{data}", model=f"qwen-image-edit:{weights_folder}",
                       method="lora", out=out, **options)  # fmt: skip


def test_qwen_lora_trains_and_loads_in_diffusers_and_as_a_spec(
    tiny_qwen, triplets, tmp_path, small_area
):
    cfg = _config(tiny_qwen, triplets, tmp_path / "run", max_steps=3, bins=(32,), rank=4, lr=1e-2)
    result = train(cfg)
    log = [json.loads(x) for x in (tmp_path / "run/train.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3] and all(np.isfinite(r["loss"]) for r in log)
    objective = json.loads((tmp_path / "run/train_config.json").read_text())["objective"]
    assert objective["objective"] == "flow matching (rectified flow)"
    assert objective["timestep_shift"] == "dynamic (the pipeline's calculate_shift)"
    model = parse_model_spec(f"qwen-image-edit:{tiny_qwen}", ["steps=2"]).load()
    model.pipeline.load_lora_weights(result.checkpoint)
    assert any("lora_A" in n for n, _ in model.pipeline.transformer.named_parameters())
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)

    def edit(extra=()):
        model = parse_model_spec(f"qwen-image-edit:{tiny_qwen}", ["steps=2", *extra]).load()
        return model.edit(image, "remove the lesion", seed=1)

    tuned = edit([f"lora={result.checkpoint}"])
    assert np.array_equal(tuned, edit([f"lora={result.checkpoint}"]))
    assert not np.array_equal(tuned, edit())


def test_qwen_sigma_shift_is_the_pipelines_at_the_image_token_count(tiny_qwen, tmp_path):
    """The training sigmas are the pipeline's exponential shift at mu = calculate_shift(16
    tokens) of a 32 px image: with the tiny scheduler (base 256 -> 0.5, max 8192 -> 0.9)
    mu = 0.5 + (16 - 256) * 0.4 / 7936, and sigma' = e^mu / (e^mu + 1/sigma - 1)."""
    from medibench.train._qwen import QwenImageEditFamily

    family = QwenImageEditFamily(tiny_qwen, _config(tiny_qwen, tmp_path, tmp_path / "o"),
                                 torch.device("cpu"), torch.float32)  # fmt: skip
    x0 = torch.zeros(4, 16, 1, 4, 4)
    mu = 0.5 + (16 - 256) * 0.4 / 7936
    gen = torch.Generator().manual_seed(0)
    noisy, noise, timesteps = family.noised(x0, gen, mu)
    again = torch.Generator().manual_seed(0)
    torch.randn(x0.shape, generator=again)  # the noise is drawn first, then the timesteps
    idx = torch.randint(0, 1000, (4,), generator=again)
    sigma = family.scheduler.sigmas[idx].double()
    expected = np.exp(mu) / (np.exp(mu) + (1 / sigma - 1))
    assert torch.allclose(timesteps.double(), expected * 1000, atol=1e-3)
    assert torch.allclose(noisy, expected.float().reshape(4, 1, 1, 1, 1) * noise, atol=1e-6)


def test_qwen_trains_at_multiples_of_16_only(tiny_qwen, triplets, tmp_path):
    with pytest.raises(TrainError, match="resolution 40 is not a multiple of 16"):
        train(_config(tiny_qwen, triplets, tmp_path / "run", bins=(40,)))


def test_qwen_trains_with_lora_only(tiny_qwen, triplets, tmp_path):
    with pytest.raises(TrainError, match="qwen-image-edit trains with lora"):
        TrainConfig(dataset=f"native:{triplets}", model=f"qwen-image-edit:{tiny_qwen}",
                    method="full", out=tmp_path / "run")  # fmt: skip
