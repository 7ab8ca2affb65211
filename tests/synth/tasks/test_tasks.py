"""Every task type on every modality it supports: valid items with exact targets and masks."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.metrics import blend_overlay
from medibench.models._instructions import parse_instruction
from medibench.samples import OVERLAY_COLORS, Perspective
from medibench.synth import degrade
from medibench.synth.scenes import Lesion, make_scene, render
from medibench.synth.suite import SuiteItem, generate_item
from medibench.synth.tasks import PRESETS, TASKS

SIZE = 128
CASES = [(t.name, m) for t in TASKS.values() for m in t.modalities]
# Tasks whose first instruction the classical baseline must parse (a classical method applies).
PARSEABLE = {
    "highlight-structure", "highlight-two-structures", "highlight-three-structures",
    "highlight-lesion", "highlight-all-lesions", "highlight-described-lesion",
    "highlight-largest-lesion", "highlight-lesion-and-host", "remove-lesion",
    "remove-described-lesion", "remove-all-lesions", "denoise-gaussian", "denoise-poisson",
    "denoise-rician", "low-dose-ct", "deblur", "super-resolution-2x", "super-resolution-4x",
    "enhance-contrast",
}  # fmt: skip


def _scene_of(item, modality: str, lesions=None):
    """Rebuild the input scene of an item from its metadata."""
    s = item.metadata["scene"]
    # the variant is drawn from the seed (passing it would skip that draw)
    scene = make_scene(modality, seed=s["seed"], size=SIZE, clutter=s["clutter"], noise=s["noise"])
    assert scene.param("variant") == s["variant"]
    chosen = s["lesions"] if lesions is None else lesions
    return scene.with_lesions(_lesion(d) for d in chosen)


def _lesion(d: dict) -> Lesion:
    return Lesion(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


@pytest.fixture(scope="module")
def items():
    made = {}
    for name, modality in CASES:
        made[name, modality], _ = generate_item(
            SuiteItem(name, 0, modality), difficulty="medium", size=SIZE, seed=3
        )
    return made


@pytest.mark.parametrize(("name", "modality"), CASES)
def test_item_is_valid_and_exact(items, name: str, modality: str) -> None:
    item = items[name, modality]
    task = TASKS[name]
    assert item.input.shape == item.target.shape == (SIZE, SIZE, 3)
    assert item.input.dtype == item.target.dtype == np.uint8
    assert item.instruction and item.description
    assert len(set(item.paraphrases)) >= 3 and item.instruction not in item.paraphrases
    if name in PARSEABLE:
        parse_instruction(item.instruction)  # raises when outside the vocabulary
    if task.perspective is Perspective.transformation:
        assert item.mask is None
        assert not np.array_equal(item.input, item.target)
        return
    assert item.mask.dtype == bool and item.mask.shape == (SIZE, SIZE) and item.mask.any()
    outside = ~item.mask
    assert np.array_equal(item.input[outside], item.target[outside])
    if task.perspective is Perspective.perception:
        colours = item.overlay_color
        assert colours and set(colours) <= set(OVERLAY_COLORS)
        blends = [blend_overlay(item.input, item.mask, c) for c in colours]
        inside = np.zeros(item.mask.sum(), bool)
        for blend in blends:
            inside |= (blend[item.mask] == item.target[item.mask]).all(axis=1)
        assert inside.all()
        if len(colours) == 1:
            assert np.array_equal(item.target, blend_overlay(item.input, item.mask, colours[0]))
    else:
        changed = (item.input != item.target).any(axis=2)
        assert changed.any() and not (changed & outside).any()
        # the input and the target are renders of the same scene with two lesion lists
        assert np.array_equal(render(_scene_of(item, modality)).image, item.input)
        after = _scene_of(item, modality, item.metadata["target_lesions"])
        assert np.array_equal(render(after).image, item.target)


@pytest.mark.parametrize("modality", TASKS["remove-lesion"].modalities)
def test_removal_target_is_the_scene_without_the_lesion(items, modality: str) -> None:
    item = items["remove-lesion", modality]
    assert len(item.metadata["scene"]["lesions"]) == 1
    assert item.metadata["target_lesions"] == []
    assert np.array_equal(render(_scene_of(item, modality, [])).image, item.target)


@pytest.mark.parametrize("factor", [2, 4])
def test_super_resolution_input_lost_high_frequencies(items, factor: int) -> None:
    for modality in TASKS[f"super-resolution-{factor}x"].modalities:
        item = items[f"super-resolution-{factor}x", modality]
        assert np.array_equal(item.input, degrade.downsample(item.target, factor))
        # spectral energy beyond the small image's Nyquist frequency mostly gone
        half = SIZE // (2 * factor)
        hi_in, hi_out = (_high_energy(x.mean(axis=2), half) for x in (item.input, item.target))
        assert hi_in < 0.6 * hi_out, modality


def _high_energy(grey: np.ndarray, half: int) -> float:
    window = np.outer(np.hanning(grey.shape[0]), np.hanning(grey.shape[1]))  # no edge wrap
    spectrum = np.abs(np.fft.fftshift(np.fft.fft2((grey - grey.mean()) * window))) ** 2
    c = grey.shape[0] // 2
    spectrum[c - half : c + half, c - half : c + half] = 0.0
    return float(spectrum.sum())


@pytest.mark.parametrize("window", list(degrade.CT_WINDOWS))
def test_windowing_target_is_the_named_window(items, window: str) -> None:
    name = f"window-{window.replace(' ', '-')}"
    for modality in TASKS[name].modalities:
        item = items[name, modality]
        rendered = render(_scene_of(item, modality))
        assert np.array_equal(rendered.image, render(_scene_of(item, modality)).image)
        target = degrade.apply_window(rendered.raw, window)
        assert np.array_equal(item.target[:, :, 0], target)
        shown = item.metadata["input_display"]
        assert np.array_equal(item.input[:, :, 0], degrade.to_display(rendered.raw, *shown))
        assert item.metadata["window_level_width"] == list(degrade.CT_WINDOWS[window])


def test_degraded_transformations_match_their_degradation(items) -> None:
    item = items["enhance-contrast", "ct"]
    factor = item.metadata["contrast_factor"]
    assert np.array_equal(
        item.input[:, :, 0], degrade.reduce_contrast(item.target[:, :, 0], factor)
    )
    item = items["deblur", "mri"]
    blurred = degrade.gaussian_blur(item.target[:, :, 0], item.metadata["blur_sigma_px"])
    assert np.array_equal(item.input[:, :, 0], blurred)


def test_the_registry_covers_the_issue() -> None:
    perspectives = {t.perspective for t in TASKS.values()}
    modalities = {m for t in TASKS.values() for m in t.modalities}
    assert len(TASKS) >= 30 and perspectives == set(Perspective)
    assert {"ct", "mri", "xray", "dermoscopy", "endoscopy", "fundus"} <= modalities
    assert set(PRESETS) == {"easy", "medium", "hard"}
