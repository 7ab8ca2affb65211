"""An inpainting expert: ``diffusers-inpaint`` (SD inpainting) trained with LoRA on images and
masks; the LoRA file is what the modification build's inpainter loads."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
pytest.importorskip("peft")
pytest.importorskip("accelerate")

from medibench.build import load_inpainter  # noqa: E402
from medibench.train import TrainConfig, TrainError, train  # noqa: E402
from tests.build.test_diffusers_inpaint import build_tiny_sd_inpaint  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def sd_inpaint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("weights") / "tiny-sd-inpaint"
    build_tiny_sd_inpaint(folder)
    return folder


@pytest.fixture(scope="module")
def flux_fill(tmp_path_factory):
    """A tiny random FluxFillPipeline: bench/gpu_generate.py's tiny FLUX parts with a
    transformer taking noisy, masked-image (16 + 16) and mask (8 * 8 * 4) token channels."""
    from bench.gpu_generate import build, flux_configs

    kontext = build("flux-kontext", tiny=True, device="cpu", dtype=torch.float32)
    cfg = {**flux_configs(True)["transformer"], "in_channels": 16 + 16 + 256, "out_channels": 16}
    torch.manual_seed(0)
    parts = {n: c for n, c in kontext.components.items() if n in FILL_PARTS}
    pipe = diffusers.FluxFillPipeline(transformer=diffusers.FluxTransformer2DModel(**cfg), **parts)
    folder = tmp_path_factory.mktemp("weights") / "tiny-flux-fill"
    pipe.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def sdxl_inpaint():
    from tests.conformance._diffusers_models import weights

    return weights("sdxl-inpaint")


FILL_PARTS = ("scheduler", "vae", "text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2")


@pytest.mark.parametrize(
    "base, conditioning",
    [
        ("sd_inpaint", "mask and masked-target latents concatenated on channels"),
        ("flux_fill", "masked-target latents and the mask concatenated on token channels"),
        ("sdxl_inpaint", "pooled text embeddings and time ids (size, crop (0, 0), size)"),
    ],
)
def test_an_inpainting_lora_trains_and_the_build_inpainter_uses_it(
    base, conditioning, triplets, tmp_path, request
):
    weights = request.getfixturevalue(base)
    cfg = TrainConfig(
        dataset=f"native:{triplets}",
        model=f"diffusers-inpaint:{weights}",
        method="lora",
        out=tmp_path / "expert",
        max_steps=3,
        bins=(32,),
        rank=4,
        lr=5e-2,
    )
    result = train(cfg)
    lora = result.checkpoint / "pytorch_lora_weights.safetensors"
    assert lora.is_file()
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    mask = np.zeros((32, 32), bool)
    mask[8:24, 8:24] = True

    def fill(options):
        inpainter = load_inpainter(
            f"diffusers-inpaint:{weights}", options={"steps": 2, "device": "cpu", **options}
        )
        return inpainter.inpaint(image, mask, prompt="remove the lesion", seed=3)

    expert = fill({"lora": str(result.checkpoint)})
    assert np.array_equal(expert, fill({"lora": str(result.checkpoint)}))
    assert not np.array_equal(expert, fill({}))
    card = (result.checkpoint / "README.md").read_text()
    assert conditioning in card


def test_sdxl_inpainting_gives_the_unet_the_pipelines_added_conditions(sdxl_inpaint, tmp_path):
    """Time ids (original size, crop, target size: no aesthetic score in this pipeline's
    config) of a 32 x 48 image, and the second encoder's pooled projection (16 wide)."""
    from medibench.train._inpaint import StableDiffusionXLInpaintFamily

    cfg = TrainConfig(dataset="native:x", model=f"diffusers-inpaint:{sdxl_inpaint}",
                      method="lora", out=tmp_path / "x")  # fmt: skip
    family = StableDiffusionXLInpaintFamily(sdxl_inpaint, cfg, torch.device("cpu"), torch.float32)
    text, added = family.text_conditioning(["a", "b"], (32, 48))
    assert added["time_ids"].tolist() == [[32, 48, 0, 0, 32, 48]] * 2
    assert tuple(added["text_embeds"].shape) == (2, 16) and text.shape[-1] == 32


def test_inpainting_needs_masks_and_only_lora(sd_inpaint, tmp_path):
    from tests.train.conftest import make_triplets

    data = make_triplets(tmp_path / "d", n=2)
    (data / "samples.jsonl").write_text(
        (data / "samples.jsonl").read_text().replace('"mask": "img/t000_m.png", ', "")
    )
    cfg = TrainConfig(
        dataset=f"native:{data}",
        model=f"diffusers-inpaint:{sd_inpaint}",
        method="lora",
        out=tmp_path / "x",
        bins=(32,),
    )
    with pytest.raises(TrainError, match=r"1 samples have no mask \(first: 't000'\)"):
        train(cfg)
    with pytest.raises(TrainError, match="diffusers-inpaint trains with lora"):
        TrainConfig(
            dataset="native:x",
            model=f"diffusers-inpaint:{sd_inpaint}",
            method="full",
            out=tmp_path / "y",
        )


def test_weights_of_another_pipeline_are_refused(sd_inpaint, triplets, tmp_path):
    cfg = TrainConfig(
        dataset=f"native:{triplets}",
        model=f"ip2p:{sd_inpaint}",
        method="lora",
        out=tmp_path / "x",
        bins=(32,),
    )
    with pytest.raises(
        TrainError,
        match="holds a StableDiffusionInpaintPipeline, not the "
        "StableDiffusionInstructPix2PixPipeline",
    ):
        train(cfg)


def test_inpainting_weights_of_another_pipeline_name_the_ones_it_trains(
    tiny_ip2p, triplets, tmp_path
):
    cfg = TrainConfig(
        dataset=f"native:{triplets}",
        model=f"diffusers-inpaint:{tiny_ip2p}",
        method="lora",
        out=tmp_path / "x",
        bins=(32,),
    )
    with pytest.raises(TrainError, match="holds a StableDiffusionInstructPix2PixPipeline; "
                       "diffusers-inpaint trains StableDiffusionInpaintPipeline, "
                       "StableDiffusionXLInpaintPipeline or FluxFillPipeline"):  # fmt: skip
        train(cfg)
