"""The build's ``diffusers-inpaint:PATH`` inpainter on tiny random-weight SD, SDXL and FLUX.1
Fill inpainting pipelines loaded from their folders alone: the input's size, uint8 RGB, the same
seed the same bytes; the folder's safety checker dropped unless asked for, and then a flagged
fill is a refusal naming the checker (cells: ``_editing_cells``)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from medibench.build import BuildError, load_inpainter  # noqa: E402
from medibench.models import ContentRefusedError  # noqa: E402
from tests.conformance._diffusers_models import weights  # noqa: E402
from tests.conformance._editing_cells import cells  # noqa: E402

torch.set_num_threads(1)

OPTIONS = {"steps": 2, "device": "cpu"}


def _inputs():
    image = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    mask = np.zeros((48, 64), bool)
    mask[12:30, 20:44] = True
    return image, mask


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the folder alone: nothing may be fetched


@pytest.mark.parametrize("cell", cells("build", supported=True), ids=lambda c: c.id)
def test_each_inpainting_family_fills_at_the_input_size_reproducibly(cell):
    folder = weights(cell.family)
    inpainter = load_inpainter(cell.spec.replace("PATH", str(folder)), options=OPTIONS)
    image, mask = _inputs()
    filled = inpainter.inpaint(image, mask, prompt="healthy tissue", seed=3)
    assert filled.shape == image.shape and filled.dtype == np.uint8
    again = inpainter.inpaint(image, mask, prompt="healthy tissue", seed=3)
    assert np.array_equal(again, filled)
    assert not np.array_equal(inpainter.inpaint(image, mask, prompt="healthy tissue", seed=4),
                              filled)  # fmt: skip


@pytest.mark.parametrize("cell", cells("build", supported=False), ids=lambda c: c.id)
def test_a_family_build_does_not_support_is_refused_with_a_clear_error(cell):
    folder = weights(cell.family)
    with pytest.raises(BuildError, match=cell.error):
        load_inpainter(cell.spec.replace("PATH", str(folder)), options=OPTIONS)


def test_the_build_inpainter_drops_the_folders_safety_checker():
    folder = weights("sd-inpaint-flagging")
    inpainter = load_inpainter(f"diffusers-inpaint:{folder}", options=OPTIONS)
    assert inpainter.pipeline.safety_checker is None
    assert inpainter.spec()["safety_checker"] is False
    image, mask = _inputs()
    filled = inpainter.inpaint(image, mask, prompt="healthy tissue", seed=3)
    assert filled.max() > 0  # not the checker's black image


def test_a_flagged_fill_is_a_refusal_naming_the_safety_checker():
    folder = weights("sd-inpaint-flagging")
    inpainter = load_inpainter(f"diffusers-inpaint:{folder}",
                               options={**OPTIONS, "safety_checker": True})  # fmt: skip
    image, mask = _inputs()
    checker = r"safety checker \(StableDiffusionSafetyChecker\) flagged the fill"
    with pytest.raises(ContentRefusedError, match=checker):
        inpainter.inpaint(image, mask, prompt="healthy tissue", seed=3)
