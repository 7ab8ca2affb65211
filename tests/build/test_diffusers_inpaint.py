"""``diffusers-inpaint:PATH`` on a tiny random SD-inpainting pipeline saved locally, with and
without a LoRA; a modification build through it."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from medibench.build import BuildError, build, load_inpainter  # noqa: E402
from tests.models.test_diffusers import word_level_clip_tokenizer  # noqa: E402

torch.set_num_threads(1)


def build_tiny_sd_inpaint(folder):
    """A randomly initialised StableDiffusionInpaintPipeline (a UNet of 9 input channels:
    noisy latents, the mask and the masked image's latents), saved to ``folder``."""
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(
        block_out_channels=(16, 32), layers_per_block=1, sample_size=8, in_channels=9,
        out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=16,
        attention_head_dim=4, norm_num_groups=8,
    )  # fmt: skip
    vae = diffusers.AutoencoderKL(
        block_out_channels=(8, 8, 8, 8), down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4, latent_channels=4, norm_num_groups=4,
        layers_per_block=1,
    )  # fmt: skip
    tokenizer = word_level_clip_tokenizer()
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    text_encoder = transformers.CLIPTextModel(transformers.CLIPTextConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=16, projection_dim=16,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|startoftext|>"), eos_token_id=eos,
        pad_token_id=eos,
    ))  # fmt: skip
    pipe = diffusers.StableDiffusionInpaintPipeline(
        vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
        scheduler=diffusers.DDIMScheduler(), safety_checker=None, feature_extractor=None,
        requires_safety_checker=False,
    )  # fmt: skip
    pipe.save_pretrained(folder)
    return pipe


def save_tiny_lora(pipe, folder):
    """A rank-2 LoRA on the UNet's attention projections, random (non-zero) weights."""
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    torch.manual_seed(1)
    config = LoraConfig(r=2, lora_alpha=2, init_lora_weights=False,
                        target_modules=["to_q", "to_k", "to_v", "to_out.0"])  # fmt: skip
    pipe.unet.add_adapter(config)
    layers = get_peft_model_state_dict(pipe.unet)
    diffusers.StableDiffusionInpaintPipeline.save_lora_weights(folder, unet_lora_layers=layers)
    return folder


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    root = tmp_path_factory.mktemp("weights")
    pipe = build_tiny_sd_inpaint(root / "tiny-sd-inpaint")
    save_tiny_lora(pipe, root / "lora")
    return root / "tiny-sd-inpaint", root / "lora"


def _inputs():
    image = np.random.default_rng(0).integers(0, 256, (40, 56, 3), dtype=np.uint8)
    mask = np.zeros((40, 56), bool)
    mask[10:30, 16:40] = True
    return image, mask


def test_a_tiny_inpainting_pipeline_fills_at_the_input_size_seeded(weights):
    path, _ = weights
    inpainter = load_inpainter(f"diffusers-inpaint:{path}", options={"steps": 2, "device": "cpu"})
    assert inpainter.spec()["pipeline"] == "StableDiffusionInpaintPipeline"
    image, mask = _inputs()
    a = inpainter.inpaint(image, mask, prompt="healthy brain tissue", seed=3)
    b = inpainter.inpaint(image, mask, prompt="healthy brain tissue", seed=3)
    c = inpainter.inpaint(image, mask, prompt="healthy brain tissue", seed=4)
    assert a.shape == image.shape and a.dtype == np.uint8  # 40x56 is a multiple of 8: no resize
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_a_lora_changes_the_fill(weights):
    path, lora = weights
    plain = load_inpainter(f"diffusers-inpaint:{path}", options={"steps": 2, "device": "cpu"})
    tuned = load_inpainter(f"diffusers-inpaint:{path}",
                           options={"steps": 2, "device": "cpu", "lora": str(lora)})  # fmt: skip
    assert tuned.spec()["lora"] == str(lora)
    image, mask = _inputs()
    a = plain.inpaint(image, mask, prompt="healthy", seed=0)
    b = tuned.inpaint(image, mask, prompt="healthy", seed=0)
    assert not np.array_equal(a, b)


def test_weights_without_a_mask_input_are_refused(tiny_ip2p):
    with pytest.raises(BuildError, match="takes no mask_image: not an inpainting pipeline"):
        load_inpainter(f"diffusers-inpaint:{tiny_ip2p}", options={"device": "cpu"})


@pytest.mark.slow
def test_a_modification_build_through_the_diffusers_inpainter(tmp_path, weights, demo_sources):
    path, lora = weights
    out = tmp_path / "mod"
    # random weights paint noise: the statistics verifier rejects every fill, and says so
    with pytest.raises(BuildError, match=r"no sample survived the filters \(filtered: rejected "
                       r"\d+.*every attempt is in .*attempts.jsonl"):  # fmt: skip
        build("modification", demo_sources["mni152"], out, exports=(),
              inpainter=f"diffusers-inpaint:{path}",
              inpainter_options={"steps": 2, "device": "cpu", "lora": str(lora)},
              options={"max_attempts": 1})  # fmt: skip
    attempts = [json.loads(x) for x in (out / "attempts.jsonl").read_text().splitlines()]
    assert attempts and all(a["inpainter"] == f"diffusers-inpaint:{path}" for a in attempts)
    rejected = [a for a in attempts if not a["accepted"]]
    assert len(rejected) == len(attempts)
    assert {a["reason"].split(":")[0] for a in rejected} <= {"intensity", "texture"}


@pytest.mark.slow
def test_a_flagged_fill_is_recorded_as_refused_with_the_checker_named(
    tmp_path, demo_sources
):
    from tests.conformance._diffusers_models import weights as conformance_weights

    folder = conformance_weights("sd-inpaint-flagging")  # flags every image
    out = tmp_path / "mod"
    with pytest.raises(BuildError, match=r"no sample survived the filters"):
        build("modification", demo_sources["mni152"], out, exports=(),
              inpainter=f"diffusers-inpaint:{folder}",
              inpainter_options={"steps": 1, "device": "cpu", "safety_checker": True},
              options={"max_attempts": 1})  # fmt: skip
    attempts = [json.loads(x) for x in (out / "attempts.jsonl").read_text().splitlines()]
    assert attempts and not any(a["accepted"] for a in attempts)
    assert {a["reason"] for a in attempts} == {
        "refused: the pipeline's safety checker (StableDiffusionSafetyChecker) flagged the fill"
    }
