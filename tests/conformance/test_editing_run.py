"""``medibench run`` on tiny random-weight editing pipelines of every family, loaded from their
Hub-layout folders alone: documented output size, uint8 RGB, the same seed the same bytes; the
families it cannot run fail with a clear error, never a traceback (cells: ``_editing_cells``)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from tests.conformance._diffusers_models import weights  # noqa: E402
from tests.conformance._editing_cells import cells  # noqa: E402
from tests.conformance._editing_data import HEIGHT, WIDTH, four_by_three, invoke, outputs  # noqa: E402

torch.set_num_threads(1)

#: per family: the options of the cell's run and the (height, width) its 48x64 input gives
RUNS = {
    "ip2p": (["steps=2", "resolution=64"], (48, 64)),
    "sdxl-ip2p": (["steps=2"], (64, 64)),  # the pipeline's square sample size: 8 latents x 8
    "flux-kontext": (["steps=2", "max_area=4096"], (48, 64)),
    "qwen-image-edit": (["steps=2"], (96, 128)),  # ~1 Mpx scaled to 96x128 below
    "flux-fill": (["steps=2", "width=64", "lora=LORA"], (48, 64)),  # icedit: the right half
    "sd": (["steps=2", "embedding_steps=2", "finetune_steps=2", "resolution=64"], (48, 64)),
    "paint-by-inpaint": (["steps=2", "resolution=64"], (48, 64)),
}


@pytest.fixture
def small_qwen(monkeypatch):
    """Qwen-Image-Edit's working area (1024 * 1024 px, fixed in the pipeline) held to 96 * 128
    px, so the cell runs in seconds on a CPU; the sizing rule itself is the pipeline's."""
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit as edit

    real = edit.calculate_dimensions
    monkeypatch.setattr(edit, "calculate_dimensions", lambda area, ratio: real(96 * 128, ratio))


def _run(family, spec, options, data, out, seed=0):
    folder = weights(family)
    args = ["run", "--dataset", f"native:{data}", "--model", spec.replace("PATH", str(folder)),
            "--out", out, "--seed", seed]  # fmt: skip
    for option in options:  # LORA: ICEdit's LoRA, saved for the tiny FLUX Fill
        args += ["--model-option", option.replace("LORA", str(weights("icedit-lora")))]
    return invoke(*args)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the folder alone: nothing may be fetched


@pytest.mark.parametrize("cell", cells("run", supported=True), ids=lambda c: c.id)
def test_each_editing_family_runs_from_its_folder_at_its_documented_size_reproducibly(
    cell, tmp_path, small_qwen
):
    data = four_by_three(tmp_path / "data")
    options, size = RUNS[cell.family]
    first = _run(cell.family, cell.spec, options, data, tmp_path / "a")
    assert first.exit_code == 0, first.output
    again = _run(cell.family, cell.spec, options, data, tmp_path / "b")
    assert again.exit_code == 0, again.output
    ((key, image),) = outputs(tmp_path / "a").items()
    assert key == ("s0", 0)
    assert image.shape == (*size, 3) and image.dtype == np.uint8
    assert np.array_equal(outputs(tmp_path / "b")[key], image)  # same seed, same bytes
    other = _run(cell.family, cell.spec, options, data, tmp_path / "c", seed=1)
    assert other.exit_code == 0, other.output
    assert not np.array_equal(outputs(tmp_path / "c")[key], image)  # the seed is used


@pytest.mark.parametrize("cell", cells("run", supported=False), ids=lambda c: c.id)
def test_a_family_run_does_not_support_fails_with_a_clear_error(cell, tmp_path):
    res = _run(cell.family, cell.spec, ["steps=2"], four_by_three(tmp_path / "d"), tmp_path / "r")
    assert res.exit_code != 0
    text = " ".join(res.output.split())
    assert cell.error in text
    assert "torchvision" in text if cell.family == "omnigen" else "--num_in_channels 8" in text
    assert "Traceback" not in res.output and not isinstance(res.exception, NameError)


def test_flux_kontext_keeps_the_input_aspect_ratio(tmp_path):
    """A 4:3 input gives a 4:3 output (the pipeline alone would make it square), at the
    default max_area the preferred Kontext resolution itself."""
    from medibench.models.diffusers import KONTEXT_RESOLUTIONS, FluxKontextModel, kontext_size

    assert kontext_size(640, 480) == (1184, 880) and kontext_size(480, 640) == (880, 1184)
    assert all(kontext_size(w, h) == (w, h) for w, h in KONTEXT_RESOLUTIONS)
    assert kontext_size(WIDTH, HEIGHT, 64 * 64) == (64, 48)
    model = FluxKontextModel(str(weights("flux-kontext")), steps=1, max_area=64 * 64)
    for (h, w), made in (((48, 64), (48, 64)), ((64, 48), (64, 48)), ((40, 40), (64, 64))):
        image = np.random.default_rng(h).integers(0, 256, (h, w, 3), dtype=np.uint8)
        assert model.edit(image, "remove the lesion", seed=0).shape == (*made, 3)


def test_sdxl_instruct_pix2pix_with_a_resolution_keeps_the_input_aspect(tmp_path):
    from medibench.models.diffusers import DiffusionPipelineModel

    model = DiffusionPipelineModel(str(weights("sdxl-ip2p")), steps=1, resolution=64)
    image = np.random.default_rng(0).integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)
    assert model.edit(image, "remove the lesion", seed=0).shape == (48, 64, 3)


def test_qwen_image_edit_loads_without_torchvision_through_an_image_only_processor(small_qwen):
    from medibench.models._processors import has_torchvision
    from medibench.models.diffusers import QwenImageEditModel

    model = QwenImageEditModel(str(weights("qwen-image-edit")), steps=1)
    processor = model.pipeline.processor
    assert type(processor).__name__ == "Qwen2VLProcessor"
    assert has_torchvision() or not hasattr(processor, "video_processor")


@pytest.mark.parametrize(
    "spec,family,found,runs",
    [
        ("ip2p", "sdxl-ip2p", "StableDiffusionXLInstructPix2PixPipeline", "diffusers:"),
        (
            "flux-kontext",
            "flux-fill",
            "FluxFillPipeline",
            "medibench build modification --inpainter",
        ),
        ("qwen-image-edit", "ip2p", "StableDiffusionInstructPix2PixPipeline", "ip2p:"),
        ("diffusers", "sd-inpaint", "StableDiffusionInpaintPipeline", "diffusers-inpaint:"),
    ],
)
def test_weights_of_another_family_are_refused_naming_what_runs_them(
    spec, family, found, runs, tmp_path
):
    """Before: every item failed with the pipeline's own TypeError or shape error."""
    res = _run(family, f"{spec}:PATH", ["steps=1"], four_by_three(tmp_path / "d"), tmp_path / "r")
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert f"holds a {found}" in text and runs in text and "Traceback" not in res.output
