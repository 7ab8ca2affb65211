"""GPU generation throughput of the diffusion editors: official-style loop, hand-tuned loop and
``medibench run`` with the adapter, on pipelines built at their real sizes with random weights.

Run:  python bench/gpu_generate.py [--models ip2p,flux-kontext] [--images N] [--steps 10]
          [--batch 4] [--compile regional|full|none] [--json PATH] [--smoke]
On the device machine: bench/gpu_device.sh (with the wheels of bench/gpu_wheels.sh).

Each pipeline is built from configs written below (InstructPix2Pix: the SD 1.5 UNet, VAE and
CLIP ViT-L/14 text encoder; FLUX.1 Kontext: the 12B FluxTransformer2DModel, the 16-channel VAE,
CLIP-L and a T5-XXL encoder; Qwen-Image-Edit: the 20B QwenImageTransformer2DModel (60 blocks),
the Qwen-Image VAE and the Qwen2.5-VL-7B text encoder with its vision tower), with random weights
made in the mode's dtype (throughput does not depend on them; nothing downloads). The tokenizers
are word-level stand-ins of the real sequence lengths, and Qwen2.5-VL's processor is a stand-in
too (:class:`QwenVLInputs`: transformers' Qwen2VLProcessor needs torchvision for its video half;
the stand-in runs the real Qwen2VL image processor and expands each image to as many
``<|image_pad|>`` tokens as the real one does). All three modes use the same resolution (512 for
ip2p, 1024 for FLUX and Qwen-Image-Edit, whose pipelines work at about 1 megapixel whatever the
input), the same steps and the same inputs (``--images``: 32 for ip2p, 8 for FLUX, 4 for Qwen):

(a) official: the way the official scripts call the pipeline: batch 1, the official dtype
    (float16 for InstructPix2Pix, bfloat16 for FLUX and Qwen-Image-Edit; Qwen's model card calls
    it with ``true_cfg_scale=4.0`` and ``negative_prompt=" "``), PIL PNG save after each image.
(b) tuned: bfloat16, ``--batch`` images per call, SDPA attention, channels-last UNet/VAE,
    ``torch.compile`` of the denoiser (``--compile``: its repeated blocks by default, which
    compiles in a fraction of the whole model's time), PNG writes on a thread.
(c) medibench: ``medibench.runs.run`` (stage generate) with the medibench adapter
    (``InstructPix2PixModel`` / ``FluxKontextModel`` / ``QwenImageEditModel``) over the same
    pipeline object (kept warm: a ``module:callable`` factory hands it to the adapter),
    ``batch_size=--batch``, bfloat16; timed after a warm-up run of one batch, and including the
    run's own start (opening the store, recording the environment, making the adapter).

Prints images/s of each, (c)/(b) and (c)/(a) (targets: >= 0.9 and >= 3), the peak GPU memory
and the seconds of each phase; ``--json`` writes the same after each model. Without a CUDA GPU
it says so and runs the smoke version: tiny pipelines of the same classes on the CPU, 64x64, 2
steps (what tests/bench/test_gpu_generate.py runs), with the pipelines that pick their own
working size held to 64x64 too, so that (c) works at the size (a) and (b) do.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MODELS = ("ip2p", "flux-kontext", "qwen-image-edit")
# The live pipelines, for the adapter factory (`gpu_generate:warm_adapter`) that (c) names.
_WARM: dict[str, Any] = {}


# --- configs ---------------------------------------------------------------------------------


def ip2p_configs(tiny: bool) -> dict[str, dict[str, Any]]:
    """InstructPix2Pix (timbrooks/instruct-pix2pix = Stable Diffusion 1.5 with 8 input channels)."""
    if tiny:
        return {
            "unet": dict(
                block_out_channels=(16, 32), layers_per_block=1, sample_size=8, in_channels=8,
                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=16,
                attention_head_dim=4, norm_num_groups=8,
            ),
            "vae": dict(
                block_out_channels=(8, 8, 8, 8), down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4, latent_channels=4, norm_num_groups=4,
                layers_per_block=1,
            ),
            "clip": dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=77, projection_dim=16),
        }  # fmt: skip
    return {
        "unet": dict(
            sample_size=64, in_channels=8, out_channels=4, layers_per_block=2,
            block_out_channels=(320, 640, 1280, 1280), cross_attention_dim=768,
            attention_head_dim=8,
            down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
            up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
        ),
        "vae": dict(
            block_out_channels=(128, 256, 512, 512), layers_per_block=2, latent_channels=4,
            down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
            sample_size=512,
        ),
        "clip": CLIP_L,
    }  # fmt: skip


CLIP_L = dict(
    hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
    max_position_embeddings=77, projection_dim=768, hidden_act="quick_gelu",
)  # fmt: skip


def flux_configs(tiny: bool) -> dict[str, dict[str, Any]]:
    """FLUX.1 Kontext [dev] (black-forest-labs/FLUX.1-Kontext-dev)."""
    if tiny:
        return {
            "transformer": dict(
                patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                attention_head_dim=8, num_attention_heads=2, joint_attention_dim=32,
                pooled_projection_dim=16, guidance_embeds=True, axes_dims_rope=(2, 2, 4),
            ),
            "vae": dict(
                block_out_channels=(8, 8, 8, 8), down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4, latent_channels=4, norm_num_groups=4,
                layers_per_block=1, use_quant_conv=False, use_post_quant_conv=False,
                shift_factor=0.1159, scaling_factor=0.3611,
            ),
            "clip": dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=77, projection_dim=16),
            "t5": dict(d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
                       feed_forward_proj="gated-gelu"),
        }  # fmt: skip
    return {
        "transformer": dict(
            patch_size=1, in_channels=64, num_layers=19, num_single_layers=38,
            attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096,
            pooled_projection_dim=768, guidance_embeds=True, axes_dims_rope=(16, 56, 56),
        ),
        "vae": dict(
            block_out_channels=(128, 256, 512, 512), down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4, latent_channels=16, layers_per_block=2,
            sample_size=1024, use_quant_conv=False, use_post_quant_conv=False,
            shift_factor=0.1159, scaling_factor=0.3611,
        ),
        "clip": CLIP_L,
        "t5": dict(d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
                   feed_forward_proj="gated-gelu"),
    }  # fmt: skip


def qwen_configs(tiny: bool) -> dict[str, dict[str, Any]]:
    """Qwen-Image-Edit (Qwen/Qwen-Image-Edit): the transformer's and VAE's diffusers defaults are
    the released sizes; the text encoder is Qwen2.5-VL-7B-Instruct's config."""
    if tiny:
        return {
            "transformer": dict(num_layers=1, attention_head_dim=8, num_attention_heads=2,
                                joint_attention_dim=32, axes_dims_rope=(2, 2, 4)),
            "vae": dict(base_dim=8, dim_mult=[1, 2, 2, 2], num_res_blocks=1),
            "text": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=64, mrope_section=[2, 2, 4]),
            "vision": dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2,
                           out_hidden_size=32, fullatt_block_indexes=[0]),
        }  # fmt: skip
    return {
        "transformer": dict(num_layers=60, attention_head_dim=128, num_attention_heads=24,
                            joint_attention_dim=3584, axes_dims_rope=(16, 56, 56)),
        "vae": dict(base_dim=96, dim_mult=[1, 2, 4, 4], num_res_blocks=2),
        "text": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                     num_key_value_heads=4, intermediate_size=18944, mrope_section=[16, 24, 24]),
        "vision": dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16,
                       out_hidden_size=3584, fullatt_block_indexes=[7, 15, 23, 31]),
    }  # fmt: skip


QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")  # fmt: skip


class QwenVLInputs:
    """What the pipeline asks of Qwen2VLProcessor: the image processor's ``pixel_values`` and
    ``image_grid_thw``, each ``<|image_pad|>`` expanded to ``t*h*w / merge_size**2`` tokens, then
    the tokenizer (padded batch)."""

    image_token = "<|image_pad|>"

    def __init__(self, image_processor, tokenizer) -> None:
        self.image_processor, self.tokenizer = image_processor, tokenizer

    def __call__(self, text, images=None, padding=True, return_tensors="pt"):
        import transformers

        data: dict[str, Any] = {}
        if images is not None:
            data.update(self.image_processor(images=images, return_tensors=return_tensors))
            merge = self.image_processor.merge_size**2
            counts = iter(int(g.prod()) // merge for g in data["image_grid_thw"])
            expanded = []
            for t in [text] if isinstance(text, str) else text:
                while self.image_token in t:  # a placeholder, so the count is not expanded again
                    t = t.replace(self.image_token, "<|placeholder|>" * next(counts), 1)
                expanded.append(t.replace("<|placeholder|>", self.image_token))
            text = expanded
        data.update(self.tokenizer(text, padding=padding, return_tensors=return_tensors))
        return transformers.BatchFeature(data)


# --- building --------------------------------------------------------------------------------


def word_tokenizer(max_length: int, *, clip: bool, qwen: bool = False):
    """A word-level tokenizer (the real models' sequence lengths, a toy vocabulary)."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = "remove the lesion add a tumor enhance contrast denoise image segment liver".split()
    specials = ["<|startoftext|>", "<|endoftext|>"] if clip else ["<pad>", "</s>", "<unk>"]
    if qwen:
        specials = list(QWEN_SPECIALS)
    vocab = {t: i for i, t in enumerate([*specials, "<unk_word>", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk_word>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if qwen:
        fast = transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok, model_max_length=max_length, pad_token="<|endoftext|>",
            eos_token="<|im_end|>", unk_token="<unk_word>",
        )  # fmt: skip
        fast.add_special_tokens({"additional_special_tokens": list(QWEN_SPECIALS[1:])})
        return fast
    if clip:
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok, model_max_length=max_length, bos_token="<|startoftext|>",
            eos_token="<|endoftext|>", pad_token="<|endoftext|>", unk_token="<unk_word>",
        )  # fmt: skip
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, model_max_length=max_length, pad_token="<pad>", eos_token="</s>",
        unk_token="<unk>",
    )  # fmt: skip


def build(kind: str, *, tiny: bool, device: str, dtype) -> Any:
    """The pipeline ``kind`` with random weights, made on ``device`` in ``dtype``."""
    import diffusers
    import torch
    import transformers

    torch.manual_seed(0)
    # Made in ``dtype`` on ``device`` at once: float32 first would hold 112 GB for Qwen-Image-Edit
    # (20B + 8B parameters) before the cast, and take twice as long to fill with random values.
    with torch.device(device), _default_dtype(torch, dtype):
        if kind == "ip2p":
            cfg = ip2p_configs(tiny)
            clip = transformers.CLIPTextModel(
                transformers.CLIPTextConfig(vocab_size=49408, **cfg["clip"])
            )
            pipe = diffusers.StableDiffusionInstructPix2PixPipeline(
                vae=diffusers.AutoencoderKL(**cfg["vae"]),
                text_encoder=clip,
                tokenizer=word_tokenizer(77, clip=True),
                unet=diffusers.UNet2DConditionModel(**cfg["unet"]),
                scheduler=diffusers.EulerAncestralDiscreteScheduler(
                    beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear"
                ),
                safety_checker=None,
                feature_extractor=None,
                requires_safety_checker=False,
            )
        elif kind == "flux-kontext":
            cfg = flux_configs(tiny)
            pipe = diffusers.FluxKontextPipeline(
                scheduler=diffusers.FlowMatchEulerDiscreteScheduler(
                    shift=3.0,
                    use_dynamic_shifting=True,
                    base_shift=0.5,
                    max_shift=1.15,
                    base_image_seq_len=256,
                    max_image_seq_len=4096,
                ),  # fmt: skip
                vae=diffusers.AutoencoderKL(**cfg["vae"]),
                text_encoder=transformers.CLIPTextModel(
                    transformers.CLIPTextConfig(vocab_size=49408, **cfg["clip"])
                ),
                tokenizer=word_tokenizer(77, clip=True),
                text_encoder_2=transformers.T5EncoderModel(
                    transformers.T5Config(vocab_size=32128, **cfg["t5"])
                ),
                tokenizer_2=word_tokenizer(512 if not tiny else 32, clip=False),
                transformer=diffusers.FluxTransformer2DModel(**cfg["transformer"]),
            )
        elif kind == "qwen-image-edit":
            pipe = _build_qwen(qwen_configs(tiny))
        else:
            raise ValueError(f"cannot build {kind!r}; choose from {', '.join(MODELS)}")
    pipe.to(dtype=dtype)
    pipe.set_progress_bar_config(disable=True)
    return pipe


@contextlib.contextmanager
def _default_dtype(torch, dtype):
    """Parameters made inside are ``dtype`` (the schedulers give their tensors dtypes of their
    own: float32 timesteps and sigmas, as when built in float32)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _build_qwen(cfg: dict[str, dict[str, Any]]):
    import diffusers
    import transformers

    tokenizer = word_tokenizer(1024, clip=False, qwen=True)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}
    text = dict(cfg["text"])
    mrope = text.pop("mrope_section")
    encoder = transformers.Qwen2_5_VLForConditionalGeneration(
        transformers.Qwen2_5_VLConfig(
            text_config=dict(
                vocab_size=152064, bos_token_id=None, eos_token_id=None, **text,
                rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": mrope},
            ),
            vision_config=cfg["vision"], image_token_id=ids["<|image_pad|>"],
            video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
        )
    )  # fmt: skip
    processor = QwenVLInputs(transformers.Qwen2VLImageProcessorPil(), tokenizer)
    return diffusers.QwenImageEditPipeline(
        scheduler=diffusers.FlowMatchEulerDiscreteScheduler(
            shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
            base_image_seq_len=256, max_image_seq_len=8192, time_shift_type="exponential",
        ),
        vae=diffusers.AutoencoderKLQwenImage(**cfg["vae"]),
        text_encoder=encoder,
        tokenizer=tokenizer,
        processor=processor,
        transformer=diffusers.QwenImageTransformer2DModel(**cfg["transformer"]),
    )  # fmt: skip


def call_options(kind: str, steps: int, size: int, batch: int = 1) -> dict[str, Any]:
    """The official call settings (steps overridden by ``--steps`` for all three modes)."""
    if kind == "ip2p":
        return dict(num_inference_steps=steps, guidance_scale=7.5, image_guidance_scale=1.5)
    if kind == "qwen-image-edit":  # the model card's call; the pipeline sizes to ~1 megapixel
        return dict(num_inference_steps=steps, true_cfg_scale=4.0, negative_prompt=[" "] * batch)
    return dict(
        num_inference_steps=steps, guidance_scale=2.5, height=size, width=size,
        max_area=size * size, _auto_resize=False,
    )  # fmt: skip


# --- the three modes -------------------------------------------------------------------------


def official_loop(pipe, kind: str, images: list, steps: int, size: int, out: Path) -> float:
    """(a) batch 1, PIL save after each image; seconds."""
    import torch

    options = call_options(kind, steps, size)
    t0 = time.perf_counter()
    for i, image in enumerate(images):
        gen = torch.Generator(pipe.device).manual_seed(i)
        result = pipe(prompt="remove the lesion", image=image, generator=gen, **options)
        result.images[0].save(out / f"a_{i}.png")
    _sync()
    return time.perf_counter() - t0


def tuned_loop(
    pipe, kind: str, images: list, steps: int, size: int, batch: int, out: Path
) -> float:
    """(b) batched calls, PNG writes on a thread; seconds."""
    import torch

    t0 = time.perf_counter()
    with ThreadPoolExecutor(1) as writer, torch.inference_mode():
        for start in range(0, len(images), batch):
            chunk = images[start : start + batch]
            options = call_options(kind, steps, size, len(chunk))
            gens = [torch.Generator(pipe.device).manual_seed(start + j) for j in range(len(chunk))]
            result = pipe(
                prompt=["remove the lesion"] * len(chunk), image=chunk, generator=gens, **options
            )
            for j, im in enumerate(result.images):
                writer.submit(im.save, out / f"b_{start + j}.png")
    _sync()
    return time.perf_counter() - t0


def medibench_run(
    kind: str, data: Path, steps: int, size: int, batch: int, out: Path, dtype: str = "bfloat16"
) -> float:
    """(c) medibench.runs.run, stage generate, over the warm pipeline; seconds."""
    from rich.console import Console

    from medibench.runs import RunConfig, run

    # ``dtype`` is the warm pipeline's (the factory hands it over as it is): the run records it.
    options = [f"kind={kind}", f"steps={steps}", f"batch_size={batch}", f"dtype={dtype}"]
    if kind == "ip2p":
        options.append(f"resolution={size}")  # its default, 512, in the full version
    if kind == "flux-kontext":
        options.append(f"max_area={size * size}")
    config = RunConfig(
        dataset=f"native:{data}",
        models=("gpu_generate:warm_adapter",),
        model_options=tuple(options),
        out=out,
        stage="generate",
    )
    t0 = time.perf_counter()
    with run(config, progress=False, console=Console(stderr=True, quiet=True)) as store:
        _sync()
        seconds = time.perf_counter() - t0
        wanted, preds = len(store.samples()), store.predictions()
    failed = [p for p in preds if p.status != "ok"]
    if failed or len(preds) != wanted:  # a fast failure must not read as a fast run
        first = f"; the first: {failed[0].sample_id}: {failed[0].error}" if failed else ""
        raise RuntimeError(
            f"(c) made {len(preds) - len(failed)} of {wanted} outputs in {out}{first}"
        )
    return seconds


def warm_adapter(kind: str, **options: Any):
    """The medibench adapter of ``kind`` over the pipeline this script built (no loading)."""
    from medibench.models.diffusers import (
        FluxKontextModel,
        InstructPix2PixModel,
        QwenImageEditModel,
    )

    adapters = {"ip2p": InstructPix2PixModel, "flux-kontext": FluxKontextModel,
                "qwen-image-edit": QwenImageEditModel}  # fmt: skip
    base = adapters[kind]
    pipe = _WARM[kind]

    class Warm(base):  # type: ignore[misc, valid-type]
        def _load(self, torch, load_options, local_files_only):
            return pipe

    folder = Path(tempfile.mkdtemp(prefix="warm-")) / "weights"
    folder.mkdir()
    # A model index without components: the adapter's folder check passes, _load gives the pipe.
    (folder / "model_index.json").write_text(json.dumps({"_class_name": base.pipeline_class}))
    return Warm(str(folder), device=str(pipe.device), **options)


@contextlib.contextmanager
def _small_pipelines(smoke: bool):
    """The smoke version only: the pipelines that pick their own working size work at 64x64.
    QwenImageEditPipeline works at ~1 megapixel whatever the input size
    (``calculate_dimensions(1024 * 1024, ratio)``), and FluxKontextPipeline (``_auto_resize``,
    as the adapter calls it) resizes its input image to the nearest of
    ``PREFERRED_KONTEXT_RESOLUTIONS`` (about 1 megapixel): (a) and (b) at 64x64 against (c) at
    1024x1024 would say nothing about the adapter."""
    if not smoke:
        yield
        return
    from diffusers.pipelines.flux import pipeline_flux_kontext as kontext
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit as edit

    real, preferred = edit.calculate_dimensions, kontext.PREFERRED_KONTEXT_RESOLUTIONS
    edit.calculate_dimensions = lambda area, ratio: real(64 * 64, ratio)
    kontext.PREFERRED_KONTEXT_RESOLUTIONS = [(64, 64)]
    try:
        yield
    finally:
        edit.calculate_dimensions, kontext.PREFERRED_KONTEXT_RESOLUTIONS = real, preferred


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# --- driver ----------------------------------------------------------------------------------


#: ``--images`` per model when not given. Besides its pipeline calls, a run of 8 images spent
#: 35-58 ms on the CPU smoke version (opening the store, recording the environment, making the
#: adapter, reading inputs, writing outputs; five runs): at an estimated 0.1 s per ip2p image on
#: an H200 that is 1-2% of 32 images, in a few minutes of GPU time per model.
IMAGES = {"ip2p": 32, "flux-kontext": 8, "qwen-image-edit": 4}


def measure(kind: str, args, device: str, out: Path) -> dict[str, Any]:
    """Images/s of (a), (b), (c) for one model, the peak GPU memory of each (GiB) and the
    seconds each phase took (building, warm-ups and compiling included)."""
    import torch
    from PIL import Image

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from runner import make_samples  # the bench's native dataset of random inputs

    n = args.images or (4 if args.smoke else IMAGES[kind])
    size = args.size or (64 if args.smoke else (512 if kind == "ip2p" else 1024))
    data, warm = out / f"{kind}-data", out / f"{kind}-warm-data"
    samples = make_samples(data, n, size)
    make_samples(warm, min(args.batch, n), size)  # (c)'s warm-up: one batch of the same shape
    images = [Image.open(s.input).convert("RGB") for s in samples]
    official = {"ip2p": torch.float16}.get(kind, torch.bfloat16)
    if device == "cpu":
        official = torch.float32  # CPU kernels for half types are slow or missing
    tuned = torch.bfloat16 if device != "cpu" else torch.float32
    result: dict[str, Any] = {"size": size, "images": n}
    clock = [time.perf_counter()]

    def phase(name: str) -> None:
        now = time.perf_counter()
        result[f"{name}_s"] = round(now - clock[0], 2)
        clock[0] = now
        print(f"  {kind}: {name} {result[f'{name}_s']:.1f} s", flush=True)  # how far it got

    def release() -> None:
        gc.collect()  # a pipeline let go of may sit in reference cycles: 57 GB for Qwen's
        if device == "cuda":
            torch.cuda.empty_cache()

    def peak_reset() -> None:
        release()
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()

    def peak() -> float | None:
        return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None

    pipe = build(kind, tiny=args.smoke, device=device, dtype=official)
    official_loop(pipe, kind, images[:1], args.steps, size, out)  # warm-up
    phase("a_build")
    peak_reset()
    result["a"] = n / official_loop(pipe, kind, images, args.steps, size, out)
    result["a_mem"] = peak()
    phase("a_run")
    del pipe
    peak_reset()  # (a)'s pipeline is gone before (b)'s is made
    pipe = build(kind, tiny=args.smoke, device=device, dtype=tuned)
    denoiser = pipe.unet if kind == "ip2p" else pipe.transformer
    if kind == "qwen-image-edit" and device == "cuda":
        pipe.vae.to(memory_format=torch.channels_last_3d)  # a 3-D (causal video) VAE
    if device == "cuda":
        vae = pipe.vae if kind != "qwen-image-edit" else None  # its 3-D VAE: channels_last_3d
        for module in (getattr(pipe, "unet", None), vae):
            if module is not None:
                module.to(memory_format=torch.channels_last)
    if args.compile == "regional":  # each repeated block once: minutes less than the whole model
        denoiser.compile_repeated_blocks(fullgraph=True)
    elif args.compile == "full":
        denoiser.compile(mode="max-autotune-no-cudagraphs", fullgraph=False)
    tuned_loop(pipe, kind, images[: args.batch], args.steps, size, args.batch, out)  # compile
    phase("b_build")
    peak_reset()
    result["b"] = n / tuned_loop(pipe, kind, images, args.steps, size, args.batch, out)
    result["b_mem"] = peak()
    phase("b_run")
    _WARM[kind] = pipe
    try:
        name = str(tuned).removeprefix("torch.")
        medibench_run(kind, warm, args.steps, size, args.batch, out / f"{kind}-warmup", name)
        phase("c_warm")
        peak_reset()
        result["c"] = n / medibench_run(
            kind, data, args.steps, size, args.batch, out / f"{kind}-run", name
        )
        result["c_mem"] = peak()
        phase("c_run")
    finally:
        del _WARM[kind], pipe, denoiser
        release()
    return result


def _gib(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> dict[str, dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ip2p,flux-kontext,qwen-image-edit")
    parser.add_argument(
        "--images", type=int, default=None,
        help="images per mode (default: " + ", ".join(f"{k} {v}" for k, v in IMAGES.items()) + ")",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=10, help="denoising steps, all modes")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--size", type=int, default=None, help="default 512 ip2p, 1024 others")
    parser.add_argument(
        "--compile", choices=("regional", "full", "none"), default="regional",
        help="torch.compile of (b)'s denoiser (which (c) runs too): its repeated blocks "
        "(default), the whole model (max-autotune, much longer to compile) or none",
    )  # fmt: skip
    parser.add_argument("--no-compile", action="store_true", help="the same as --compile none")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--smoke", action="store_true", help="tiny pipelines on the CPU")
    args = parser.parse_args(argv)
    import torch

    if args.no_compile:
        args.compile = "none"
    sys.modules.setdefault("gpu_generate", sys.modules[__name__])  # for the factory spec
    device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
    if device == "cpu":
        if not args.smoke:
            print("no CUDA GPU: running the CPU smoke version (tiny pipelines, 64x64, 2 steps)")
        args.smoke, args.steps, args.compile = True, min(args.steps, 2), "none"
        args.images, args.batch = min(args.images or 4, 4), min(args.batch, 2)
        torch.set_num_threads(1)
        where = "CPU smoke version"
    else:
        name = torch.cuda.get_device_name()
        where = f"{name}, torch {torch.__version__}"
        print(f"GPU: {where}, bf16 {torch.cuda.is_bf16_supported()}")
    print(f"{args.steps} steps, batch {args.batch} for (b) and (c), compile {args.compile}")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gpu-generate-") as tmp, _small_pipelines(args.smoke):
        for kind in [m for m in args.models.split(",") if m]:
            if kind not in MODELS:
                parser.error(f"unknown model {kind!r}; choose from {', '.join(MODELS)}")
            out = Path(tmp) / kind
            out.mkdir()
            r = measure(kind, args, device, out)
            results[kind] = r
            print(
                f"{kind} at {r['size']:.0f}px, {r['images']:.0f} images: (a) official "
                f"{r['a']:.3f} img/s, (b) tuned {r['b']:.3f}, (c) medibench {r['c']:.3f}; "
                f"(c)/(b) {r['c'] / r['b']:.2f} (target >= 0.9), (c)/(a) {r['c'] / r['a']:.2f} "
                f"(target >= 3); peak GiB "
                + " ".join(f"{m} {_gib(r[m + '_mem'])}" for m in "abc")
                + "; seconds "
                + " ".join(f"{k[:-2]} {v:.1f}" for k, v in r.items() if k.endswith("_s")),
                flush=True,
            )
            if args.json is not None:  # after each model: a later one may not finish in time
                payload = {"device": where, "steps": args.steps, "batch": args.batch,
                           "compile": args.compile, "results": results}  # fmt: skip
                args.json.write_text(json.dumps(payload, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
