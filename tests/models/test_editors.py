"""MedEBench's editors (medibench.models.editors): ICEdit and Imagic on the tiny FLUX Fill and
Stable Diffusion folders of the conformance matrix, held against the pipelines called by hand;
the single-file checkpoint InstructDiffusion publishes, refused with what differs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from tests.conformance._diffusers_models import INSTRUCT_DIFFUSION_CKPT, weights  # noqa: E402

from medibench.models._spec import ModelOptionError, parse_model_spec  # noqa: E402
from medibench.models._weights import WeightsNotFoundError, check_weights_folder  # noqa: E402
from medibench.models.editors import ICEditModel, ImagicModel, icedit_prompt  # noqa: E402

torch.set_num_threads(1)

INSTRUCTION = "remove the lesion"


def _image(shape=(48, 64)) -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, (*shape, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def icedit():
    return ICEditModel(str(weights("flux-fill")), lora=str(weights("icedit-lora")), steps=2,
                       width=32)  # fmt: skip


@pytest.fixture(scope="module")
def imagic():
    return ImagicModel(str(weights("sd")), steps=2, embedding_steps=2, finetune_steps=2,
                       resolution=32, unet_lr=1e-2)  # fmt: skip


def test_icedit_prompt_is_the_papers_diptych_template():
    assert icedit_prompt("add a tumor") == (
        "A diptych with two side-by-side images of the same scene. On the right, the scene is "
        "exactly the same as on the left but add a tumor"
    )


def test_icedit_is_the_right_half_of_flux_fill_on_the_masked_diptych(icedit):
    """The reference: FluxFillPipeline with the LoRA, called as ICEdit's scripts call it."""
    from PIL import Image

    image = _image((72, 48))
    made = icedit.edit(image, INSTRUCTION, seed=5)
    assert made.shape == (48, 32, 3)  # 32 wide, 72 * 32 / 48 = 48 high
    half = Image.fromarray(image).resize((32, 48), Image.Resampling.LANCZOS)
    diptych = Image.new("RGB", (64, 48))
    diptych.paste(half, (0, 0))
    mask = np.zeros((48, 64), np.uint8)
    mask[:, 32:] = 255
    pipe = icedit.pipeline
    result = pipe(prompt=icedit_prompt(INSTRUCTION), image=diptych,
                  mask_image=Image.fromarray(mask), height=48, width=64, guidance_scale=50.0,
                  num_inference_steps=2, generator=torch.Generator("cpu").manual_seed(5),
                  output_type="np").images[0]  # fmt: skip
    reference = np.clip(np.round(result * 255), 0, 255).astype(np.uint8)[:, 32:]
    assert np.array_equal(made, reference)


def test_icedit_batches_diptychs_as_it_edits_them_one_by_one(icedit):
    """One mask for the batch, one prompt and generator per item: the singles' bytes."""
    images = [_image(), _image()[::-1].copy()]
    texts = [INSTRUCTION, "add a tumor"]
    batched = icedit.edit_batch(images, texts, seeds=[1, 2])
    pairs = zip(images, texts, (1, 2), strict=True)
    singles = [icedit.edit(im, text, seed=s) for im, text, s in pairs]
    assert all(np.array_equal(b, s) for b, s in zip(batched, singles, strict=True))
    assert not np.array_equal(batched[0], batched[1])


def test_icedit_lora_changes_the_output(icedit):
    plain = ICEditModel(str(weights("flux-fill")), lora=str(weights("icedit-lora")), steps=2,
                        width=32, lora_scale=0.0)  # fmt: skip
    image = _image()
    assert not np.array_equal(plain.edit(image, INSTRUCTION, seed=5),
                              icedit.edit(image, INSTRUCTION, seed=5))  # fmt: skip


def test_icedit_without_its_lora_or_with_a_bad_one_is_a_clear_error(tmp_path):
    fill = str(weights("flux-fill"))
    with pytest.raises(ValueError, match="icedit needs the ICEdit LoRA: --model-option lora="):
        ICEditModel(fill, steps=1)
    with pytest.raises(FileNotFoundError, match="nowhere.safetensors do not exist"):
        ICEditModel(fill, lora=str(tmp_path / "nowhere.safetensors"), steps=1)
    bad = tmp_path / "pytorch_lora_weights.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match=f"LoRA weights {bad} cannot be loaded into FluxFill"):
        ICEditModel(fill, lora=str(bad), steps=1)
    with pytest.raises(ValueError, match="width must be a multiple of 16"):
        ICEditModel(fill, lora=str(weights("icedit-lora")), width=40)


def test_imagic_same_seed_same_bytes_and_the_folders_unet_after_each_edit(imagic):
    before = {k: v.clone() for k, v in imagic.pipeline.unet.state_dict().items()}
    image = _image()
    a = imagic.edit(image, INSTRUCTION, seed=1)
    b = imagic.edit(image, INSTRUCTION, seed=1)
    assert a.shape == (24, 32, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b)
    after = imagic.pipeline.unet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_imagic_untrained_at_alpha_1_is_stable_diffusion_on_the_target_text():
    """Zero training steps, alpha 1: the target embedding alone, generated by the folder's
    StableDiffusionPipeline with the generator that first drew the VAE sample."""
    model = ImagicModel(str(weights("sd")), steps=2, embedding_steps=0, finetune_steps=0,
                        alpha=1.0, resolution=32)  # fmt: skip
    image = _image()
    made = model.edit(image, INSTRUCTION, seed=4)
    pipe = model.pipeline
    prepared = model._prepare(image)
    generator = torch.Generator("cpu").manual_seed(4)
    pixels = pipe.image_processor.preprocess(prepared)
    pipe.vae.encode(pixels).latent_dist.sample(generator=generator)
    result = pipe(prompt=INSTRUCTION, negative_prompt="", height=24, width=32,
                  num_inference_steps=2, guidance_scale=7.5, generator=generator,
                  output_type="np").images[0]  # fmt: skip
    assert np.array_equal(made, np.clip(np.round(result * 255), 0, 255).astype(np.uint8))


def test_imagic_alpha_interpolates_the_optimised_embedding(imagic):
    """The embedding moved: alpha 1 (the target) and alpha 0 (the optimised) differ."""
    image = _image()
    imagic.alpha = 0.0
    try:
        reconstruct = imagic.edit(image, INSTRUCTION, seed=2)
    finally:
        imagic.alpha = 1.2
    assert not np.array_equal(reconstruct, imagic.edit(image, INSTRUCTION, seed=2))


@pytest.mark.parametrize(
    "option,message",
    [
        ("embedding_steps=-1", "embedding_steps must be >= 0, got -1"),
        ("unet_lr=0", "unet_lr must be > 0, got 0"),
        ("alpah=1", "model 'imagic' has no option 'alpah'"),
    ],
)
def test_imagic_bad_options_are_clear_errors(option, message):
    spec = parse_model_spec(f"imagic:{weights('sd')}", [option])
    with pytest.raises((ValueError, ModelOptionError), match=message):
        spec.load()


def test_ip2p_on_a_stable_diffusion_folder_names_imagic(tmp_path):
    from medibench.models._errors import UnsupportedPipelineError

    with pytest.raises(UnsupportedPipelineError, match="run it with imagic:"):
        parse_model_spec(f"ip2p:{weights('sd')}", ["steps=1"]).load()


def test_instruct_diffusions_ckpt_is_named_with_its_channels_and_the_conversion(tmp_path):
    ckpt = weights("instruct-diffusion") / INSTRUCT_DIFFUSION_CKPT
    with pytest.raises(WeightsNotFoundError) as caught:
        check_weights_folder(ckpt)
    text = str(caught.value)
    assert "single-file checkpoint in the original Stable Diffusion (LDM) layout" in text
    assert "its UNet takes 8 input channels (InstructPix2Pix-shaped" in text
    assert f"--checkpoint_path {ckpt}" in text and "--num_in_channels 8" in text
    from safetensors.torch import save_file

    single = tmp_path / "model.safetensors"
    save_file({"model.diffusion_model.input_blocks.0.0.weight": torch.zeros(8, 4, 3, 3)}, single)
    with pytest.raises(WeightsNotFoundError, match="its UNet takes 4 input channels. Convert"):
        check_weights_folder(single)
    legacy = tmp_path / "legacy.ckpt"  # torch's pre-zip format: read without memory-mapping
    conv_in = {"model.diffusion_model.input_blocks.0.0.weight": torch.zeros(8, 8, 3, 3)}
    torch.save({"state_dict": conv_in}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(WeightsNotFoundError, match="its UNet takes 8 input channels"):
        check_weights_folder(legacy)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(WeightsNotFoundError, match="notes.txt is a file, not a diffusers"):
        check_weights_folder(other)
