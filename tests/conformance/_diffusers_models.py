"""Tiny random-weight diffusers pipelines of every editing and inpainting family, saved with
``save_pretrained`` in the Hub's layout (``model_index.json`` plus one folder per component,
real tokenizer classes), for the editing conformance matrix.

Each builder makes the pipeline from the family's real config classes with a few layers and
small widths (seconds on one CPU thread), saves it to a folder and lets it go: the tests load the
folder through medibench alone. :func:`weights` builds each family once per test session.

Families (the ``FAMILIES`` keys): ``ip2p`` (StableDiffusionInstructPix2PixPipeline),
``sdxl-ip2p`` (StableDiffusionXLInstructPix2PixPipeline), ``flux-kontext``
(FluxKontextPipeline), ``qwen-image-edit`` (QwenImageEditPipeline), ``omnigen``
(OmniGenPipeline), ``sd-inpaint`` (StableDiffusionInpaintPipeline), ``sdxl-inpaint``
(StableDiffusionXLInpaintPipeline), ``flux-fill`` (FluxFillPipeline); for MedEBench's editors
``icedit-lora`` (ICEdit's LoRA for ``flux-fill``), ``sd`` (StableDiffusionPipeline, for Imagic),
``paint-by-inpaint`` (an InstructPix2Pix folder, as PaintByInpaint publishes) and
``instruct-diffusion`` (an LDM ``.ckpt``, as InstructDiffusion publishes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

diffusers = pytest.importorskip("diffusers")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.build.test_diffusers_inpaint import build_tiny_sd_inpaint  # noqa: E402
from tests.models.test_diffusers import (  # noqa: E402
    WORDS,
    build_tiny_ip2p,
    word_level_clip_tokenizer,
)

__all__ = ["FAMILIES", "weights"]

#: What shapes a saved folder besides its builder's module (some builders live in test modules).
_SOURCES = (
    "tests.conformance._diffusers_models",
    "tests.build.test_diffusers_inpaint",
    "tests.models.test_diffusers",
)


def weights(family: str) -> Path:
    """The saved folder of ``family``, built once per builder source (tests/_cache.py), shared
    by workers and sessions: read-only, copy it to change it."""
    from tests._cache import cached

    return cached(f"diffusers-{family}", FAMILIES[family], sources=_SOURCES)


# -- text encoders and tokenizers -------------------------------------------------------------
def _clip(tokenizer, *, projection: bool = False, hidden: int = 16):
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = transformers.CLIPTextConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=16,
        projection_dim=hidden, bos_token_id=tokenizer.convert_tokens_to_ids("<|startoftext|>"),
        eos_token_id=eos, pad_token_id=eos,
    )  # fmt: skip
    cls = transformers.CLIPTextModelWithProjection if projection else transformers.CLIPTextModel
    return cls(config)


def _t5_tokenizer():
    """A T5 (Unigram) tokenizer over the test words, as FLUX ships (``tokenizer_2``)."""
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces += [(f"\u2581{w}", -1.0) for w in dict.fromkeys(WORDS)]
    pieces += [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz\u2581"]
    return transformers.T5TokenizerFast(vocab=pieces, extra_ids=0, model_max_length=16)


def _t5(tokenizer):
    return transformers.T5EncoderModel(transformers.T5Config(
        vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
        feed_forward_proj="gated-gelu", pad_token_id=0, eos_token_id=1,
    ))  # fmt: skip


def _bpe_vocab(specials: list[str], *, space: str) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A BPE vocabulary whose merges spell the test words after ``space`` (``"\u0120"``: the
    byte-level alphabet of GPT-2 and Qwen; ``"\u2581"``: Llama's, with byte-fallback tokens)."""
    if space == "\u0120":
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        alphabet = list(bytes_to_unicode().values())
    else:
        alphabet = [space, *"abcdefghijklmnopqrstuvwxyz", *(f"<0x{b:02X}>" for b in range(256))]
    vocab = {token: i for i, token in enumerate(specials)}
    for c in alphabet:
        vocab.setdefault(c, len(vocab))
    merges: list[tuple[str, str]] = []
    for word in dict.fromkeys(WORDS):
        pieces = [space, *word]
        while len(pieces) > 1:
            if (pieces[0], pieces[1]) not in merges:
                merges.append((pieces[0], pieces[1]))
            pieces = [pieces[0] + pieces[1], *pieces[2:]]
            vocab.setdefault(pieces[0], len(vocab))
    return vocab, merges


# -- the Stable Diffusion XL parts --------------------------------------------------------------
def _sdxl_parts(in_channels: int) -> dict[str, Any]:
    """UNet (text_time conditioning), VAE, two CLIP encoders of SDXL, tiny."""
    torch.manual_seed(0)
    tokenizer, tokenizer_2 = word_level_clip_tokenizer(), word_level_clip_tokenizer()
    text_encoder = _clip(tokenizer)
    text_encoder_2 = _clip(tokenizer_2, projection=True)
    unet = diffusers.UNet2DConditionModel(
        block_out_channels=(16, 32), layers_per_block=1, sample_size=8, in_channels=in_channels,
        out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(2, 4),
        use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=8,
        transformer_layers_per_block=(1, 1), norm_num_groups=8,
        projection_class_embeddings_input_dim=6 * 8 + 16,  # six size ids + pooled text
        cross_attention_dim=16 + 16,  # the two encoders' hidden states side by side
    )  # fmt: skip
    return {
        "vae": _vae(4), "text_encoder": text_encoder, "text_encoder_2": text_encoder_2,
        "tokenizer": tokenizer, "tokenizer_2": tokenizer_2, "unet": unet,
        "scheduler": diffusers.EulerDiscreteScheduler(
            beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
            timestep_spacing="leading", steps_offset=1,
        ),
    }  # fmt: skip


def _vae(latent_channels: int, **flux: Any):
    return diffusers.AutoencoderKL(
        block_out_channels=(8, 8, 8, 8), down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4, latent_channels=latent_channels,
        norm_num_groups=4, layers_per_block=1, **flux,
    )  # fmt: skip


def build_sdxl_ip2p(folder: Path) -> None:
    """StableDiffusionXLInstructPix2PixPipeline: an 8-channel SDXL UNet (noise + image latents)."""
    pipe = diffusers.StableDiffusionXLInstructPix2PixPipeline(
        **_sdxl_parts(in_channels=8), force_zeros_for_empty_prompt=True
    )
    pipe.save_pretrained(folder)


def build_sdxl_inpaint(folder: Path) -> None:
    """StableDiffusionXLInpaintPipeline: a 9-channel SDXL UNet (noise, mask, masked image)."""
    pipe = diffusers.StableDiffusionXLInpaintPipeline(
        **_sdxl_parts(in_channels=9), requires_aesthetics_score=False,
        force_zeros_for_empty_prompt=True,
    )  # fmt: skip
    pipe.save_pretrained(folder)


# -- FLUX ----------------------------------------------------------------------------------------
_FLUX_VAE = dict(use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.1159,
                 scaling_factor=0.3611)  # fmt: skip


def _flux_parts(in_channels: int, out_channels: int) -> dict[str, Any]:
    torch.manual_seed(0)
    tokenizer, tokenizer_2 = word_level_clip_tokenizer(), _t5_tokenizer()
    return {
        "scheduler": diffusers.FlowMatchEulerDiscreteScheduler(
            shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
            base_image_seq_len=256, max_image_seq_len=4096,
        ),
        "vae": _vae(4, **_FLUX_VAE),
        "text_encoder": _clip(tokenizer), "tokenizer": tokenizer,
        "text_encoder_2": _t5(tokenizer_2), "tokenizer_2": tokenizer_2,
        "transformer": diffusers.FluxTransformer2DModel(
            patch_size=1, in_channels=in_channels, out_channels=out_channels, num_layers=1,
            num_single_layers=1, attention_head_dim=8, num_attention_heads=2,
            joint_attention_dim=32, pooled_projection_dim=16, guidance_embeds=True,
            axes_dims_rope=(2, 2, 4),
        ),
    }  # fmt: skip


def build_flux_kontext(folder: Path) -> None:
    """FluxKontextPipeline: a FLUX transformer over 2x2-packed 4-channel latents (16)."""
    diffusers.FluxKontextPipeline(**_flux_parts(16, 16)).save_pretrained(folder)


def build_flux_fill(folder: Path) -> None:
    """FluxFillPipeline: packed latents (16) + masked-image latents (16) + the 8x8 mask packed
    2x2 (256) in, packed latents out."""
    diffusers.FluxFillPipeline(**_flux_parts(16 + 16 + 256, 16)).save_pretrained(folder)


def build_icedit_lora(folder: Path) -> None:
    """ICEdit's LoRA for the tiny FLUX Fill transformer, saved as its Hub repos ship it
    (``pytorch_lora_weights.safetensors``, diffusers' ``transformer.`` keys): rank 2 on the
    attention projections, the up-projections random so that it changes the output."""
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    transformer = diffusers.FluxTransformer2DModel.from_pretrained(
        weights("flux-fill") / "transformer"
    )
    transformer.add_adapter(
        LoraConfig(
            r=2,
            lora_alpha=2,
            init_lora_weights="gaussian",
            target_modules=["to_q", "to_k", "to_v", "to_out.0"],
        )
    )
    torch.manual_seed(1)
    with torch.no_grad():
        for name, parameter in transformer.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.5)
    diffusers.FluxFillPipeline.save_lora_weights(
        folder, transformer_lora_layers=get_peft_model_state_dict(transformer)
    )


# -- Stable Diffusion (Imagic) -----------------------------------------------------------------
def build_tiny_sd(folder: Path) -> None:
    """StableDiffusionPipeline (what Imagic fine-tunes): the tiny InstructPix2Pix's VAE and text
    encoder, a 4-channel UNet of the same shape, PNDM as SD 1.x ships it."""
    ip2p = diffusers.StableDiffusionInstructPix2PixPipeline.from_pretrained(weights("ip2p"))
    config = dict(ip2p.unet.config)
    config["in_channels"] = 4
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel.from_config(config)
    scheduler = diffusers.PNDMScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True,
        steps_offset=1,
    )  # fmt: skip
    diffusers.StableDiffusionPipeline(
        vae=ip2p.vae, text_encoder=ip2p.text_encoder, tokenizer=ip2p.tokenizer, unet=unet,
        scheduler=scheduler, safety_checker=None, feature_extractor=None,
        requires_safety_checker=False,
    ).save_pretrained(folder)  # fmt: skip


# -- InstructDiffusion's release -----------------------------------------------------------------
#: InstructDiffusion's released file name (its README)
INSTRUCT_DIFFUSION_CKPT = "v1-5-pruned-emaonly-adaption-task.ckpt"


def build_instruct_diffusion(folder: Path) -> None:
    """InstructDiffusion's release: one ``.ckpt`` holding an original-Stable-Diffusion (LDM)
    ``state_dict`` whose UNet's first convolution takes 8 channels (a few of its keys, tiny)."""
    torch.manual_seed(0)
    state = {
        "model.diffusion_model.input_blocks.0.0.weight": torch.randn(8, 8, 3, 3),
        "model.diffusion_model.input_blocks.0.0.bias": torch.randn(8),
        "first_stage_model.encoder.conv_in.weight": torch.randn(4, 3, 3, 3),
        "cond_stage_model.transformer.text_model.final_layer_norm.weight": torch.ones(16),
    }
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": state}, folder / INSTRUCT_DIFFUSION_CKPT)


# -- Qwen-Image-Edit -------------------------------------------------------------------------------
_QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]  # fmt: skip


def build_qwen_image_edit(folder: Path) -> None:
    """QwenImageEditPipeline: the Qwen-Image transformer and VAE, a Qwen2.5-VL text encoder with
    its vision tower, Qwen2Tokenizer and Qwen2VLProcessor (saved without a video processor: it
    needs torchvision, and the pipeline never reads video)."""
    torch.manual_seed(0)
    vocab, merges = _bpe_vocab(_QWEN_SPECIALS, space="\u0120")
    tokenizer = transformers.Qwen2Tokenizer(vocab=vocab, merges=merges, model_max_length=1024)
    tokenizer.add_special_tokens({"additional_special_tokens": _QWEN_SPECIALS[1:]})
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _QWEN_SPECIALS}
    encoder = transformers.Qwen2_5_VLForConditionalGeneration(transformers.Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=1, intermediate_size=64,
            bos_token_id=None, eos_token_id=ids["<|im_end|>"],
            rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 2, 4]},
        ),
        vision_config=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2,
                           out_hidden_size=32, fullatt_block_indexes=[0]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
    ))  # fmt: skip
    processor = _image_only(transformers.Qwen2VLProcessor)(
        image_processor=transformers.Qwen2VLImageProcessorPil(), tokenizer=tokenizer
    )
    pipe = diffusers.QwenImageEditPipeline(
        scheduler=diffusers.FlowMatchEulerDiscreteScheduler(
            shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
            base_image_seq_len=256, max_image_seq_len=8192, time_shift_type="exponential",
        ),
        vae=diffusers.AutoencoderKLQwenImage(base_dim=8, dim_mult=[1, 2, 2, 2], num_res_blocks=1),
        text_encoder=encoder, tokenizer=tokenizer, processor=processor,
        transformer=diffusers.QwenImageTransformer2DModel(
            num_layers=1, attention_head_dim=8, num_attention_heads=2, joint_attention_dim=32,
            axes_dims_rope=(2, 2, 4),
        ),
    )  # fmt: skip
    pipe.save_pretrained(folder)
    _as_qwen2vl_processor(folder)


def _image_only(cls):
    """``cls`` without its video processor (it needs torchvision), to build one here."""
    attributes = [a for a in cls.get_attributes() if a != "video_processor"]
    return type(cls.__name__, (cls,), {"get_attributes": classmethod(lambda c: attributes)})


def _as_qwen2vl_processor(folder: Path) -> None:
    """Write the processor folder as the Hub's Qwen-Image-Edit has it: a ``Qwen2VLProcessor``
    with its video processor's config beside the image processor's."""
    index = json.loads((folder / "model_index.json").read_text())
    index["processor"] = ["transformers", "Qwen2VLProcessor"]
    (folder / "model_index.json").write_text(json.dumps(index, indent=2))
    config_file = folder / "processor" / "processor_config.json"
    config = json.loads(config_file.read_text())
    image = config["image_processor"]
    config["video_processor"] = {
        "video_processor_type": "Qwen2VLVideoProcessor", "merge_size": image["merge_size"],
        "patch_size": image["patch_size"], "temporal_patch_size": image["temporal_patch_size"],
        "image_mean": image["image_mean"], "image_std": image["image_std"],
    }  # fmt: skip
    config["processor_class"] = "Qwen2VLProcessor"
    config_file.write_text(json.dumps(config, indent=2))


# -- OmniGen ---------------------------------------------------------------------------------------
def build_omnigen(folder: Path) -> None:
    """OmniGenPipeline's folder: a Phi-3-style OmniGen transformer, LlamaTokenizer, SD VAE.

    Saved component by component with the model index diffusers writes: diffusers defines
    ``OmniGenPipeline``'s processor only when torchvision is installed, so the pipeline object
    cannot be made here."""
    torch.manual_seed(0)
    specials = ["<unk>", "<s>", "</s>", "<img>", "</img>", "<|image_1|>"]
    vocab, merges = _bpe_vocab(specials, space="\u2581")
    components = {
        "transformer": diffusers.OmniGenTransformer2DModel(
            hidden_size=16, num_attention_heads=4, num_key_value_heads=4, intermediate_size=32,
            num_layers=1, in_channels=4, time_step_dim=4, vocab_size=len(vocab),
            pad_token_id=0, rope_scaling={"long_factor": [1.0] * 2, "short_factor": [1.0] * 2},
        ),
        "scheduler": diffusers.FlowMatchEulerDiscreteScheduler(invert_sigmas=True,
                                                               num_train_timesteps=1),
        "vae": _vae(4),
        "tokenizer": transformers.LlamaTokenizer(vocab=vocab, merges=merges),
    }  # fmt: skip
    index = {"_class_name": "OmniGenPipeline", "_diffusers_version": diffusers.__version__}
    for name, component in components.items():
        component.save_pretrained(folder / name)
        library = "transformers" if name == "tokenizer" else "diffusers"
        index[name] = [library, type(component).__name__]
    (folder / "model_index.json").write_text(json.dumps(index, indent=2))


def build_sd_inpaint_with_a_flagging_checker(folder: Path) -> None:
    """SD inpainting as the Hub ships it, with its safety checker and feature extractor; the
    checker's concept thresholds are set so that it flags every image (as the real one flags
    many medical images), blacking the output."""
    from diffusers.pipelines.stable_diffusion.safety_checker import StableDiffusionSafetyChecker

    pipe = build_tiny_sd_inpaint(folder)
    torch.manual_seed(0)
    checker = StableDiffusionSafetyChecker(transformers.CLIPConfig(
        text_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, image_size=32, patch_size=16),
        projection_dim=16,
    ))  # fmt: skip
    with torch.no_grad():
        checker.concept_embeds_weights.fill_(-2.0)  # cosine > -2: every image is flagged
    full = diffusers.StableDiffusionInpaintPipeline(
        **{**pipe.components, "safety_checker": checker,
           "feature_extractor": transformers.CLIPImageProcessor(
               size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})},
        requires_safety_checker=True,
    )  # fmt: skip
    full.save_pretrained(folder)


FAMILIES: dict[str, Callable[[Path], Any]] = {
    "ip2p": build_tiny_ip2p,
    "sdxl-ip2p": build_sdxl_ip2p,
    "flux-kontext": build_flux_kontext,
    "qwen-image-edit": build_qwen_image_edit,
    "omnigen": build_omnigen,
    "sd-inpaint": build_tiny_sd_inpaint,
    "sdxl-inpaint": build_sdxl_inpaint,
    "flux-fill": build_flux_fill,
    "icedit-lora": build_icedit_lora,
    "paint-by-inpaint": build_tiny_ip2p,
    "sd": build_tiny_sd,
    "instruct-diffusion": build_instruct_diffusion,
    "sd-inpaint-flagging": build_sd_inpaint_with_a_flagging_checker,
}
