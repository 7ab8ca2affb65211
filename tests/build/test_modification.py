"""Modification: inpainting, background restore with a seam, the verifier, every attempt logged."""

from __future__ import annotations

import json

import numpy as np
import pytest

from medibench.build import (
    BuildError,
    ClassicalInpainter,
    StatisticsVerifier,
    Verdict,
    build,
    load_inpainter,
    load_verifier,
    restore_background,
)
from medibench.build._inpaint import high_frequency, ring
from medibench.build._items import Slice
from medibench.build._modification import modification
from medibench.build._records import BuildContext
from medibench.build._source import ItemSpec, SourceSpec, SplitRule


def test_restore_keeps_every_pixel_beyond_the_seam_and_blends_across_it():
    original = np.full((21, 21, 3), 100, np.uint8)
    filled = np.full((21, 21, 3), 200, np.uint8)
    region = np.zeros((21, 21), bool)
    region[10, 10] = True
    composite, changed = restore_background(original, filled, region, seam_px=3)
    # weight 1 - d / 4 at distance d from the region: 1, 0.75, 0.5, 0.25, then 0
    row = composite[10, 10:16, 0].tolist()
    assert row == [200, 175, 150, 125, 100, 100]
    assert changed.sum() == sum(1 for y in range(21) for x in range(21)
                                if np.hypot(y - 10, x - 10) < 4)  # fmt: skip
    assert np.array_equal(composite[~changed], original[~changed])
    hard, changed0 = restore_background(original, filled, region, seam_px=0)
    assert np.array_equal(changed0, region) and hard[10, 10, 0] == 200 and hard[10, 11, 0] == 100


def _textured(seed=0, size=64):
    rng = np.random.default_rng(seed)
    plane = np.clip(120 + rng.normal(0, 12, (size, size)), 0, 255).astype(np.uint8)
    return np.repeat(plane[:, :, None], 3, axis=2)


def test_classical_fill_has_the_surrounding_texture_and_the_verifier_accepts_it():
    image = _textured()
    mask = np.zeros((64, 64), bool)
    mask[24:40, 24:40] = True
    image[mask] = 20  # a dark lesion
    for method in ("telea", "ns", "biharmonic"):
        filled = ClassicalInpainter(method).inpaint(image, mask, prompt="healthy", seed=3)
        assert filled.shape == image.shape and np.array_equal(filled[~mask], image[~mask])
        assert np.array_equal(filled[..., 0], filled[..., 2])  # grey stays grey
        around = ring(mask, 5)
        hf = high_frequency(filled[..., 0])
        assert 0.6 < hf[mask].std() / hf[around].std() < 1.6
        verdict = StatisticsVerifier()(image, filled, mask, {"lesions": mask})
        assert verdict.accepted, (method, verdict.reason)
        assert abs(verdict.statistics["mean_region"] - 120) < 6
    plain = ClassicalInpainter("telea", texture=False).inpaint(image, mask, prompt="", seed=0)
    verdict = StatisticsVerifier()(image, plain, mask, {"lesions": mask})
    assert not verdict.accepted and verdict.reason.startswith("texture: region high-frequency")


def test_the_verifier_rejects_a_fill_that_keeps_the_lesion():
    image = _textured()
    mask = np.zeros((64, 64), bool)
    mask[24:40, 24:40] = True
    image[mask] = 20
    verdict = StatisticsVerifier()(image, image, mask, {"lesions": mask})
    assert not verdict.accepted
    assert verdict.reason.startswith("intensity: region mean 20.0 differs from the surrounding")


def _source(tmp_path=None):
    return SourceSpec(
        path=None, name="t", modality="MRI", licence="x", split=SplitRule("item", 0.2),
        items=(ItemSpec("it", image=__file__),), labels={1: "lesion"}, lesions=("lesion",),
    )  # fmt: skip


def _slice():
    image = _textured(1)
    mask = np.zeros((64, 64), bool)
    mask[20:34, 22:36] = True
    image[mask] = 30
    return Slice("it-s000", ItemSpec("it", image=__file__), 0, image, True,
                 {"lesion": mask}, (64, 64), 64)  # fmt: skip


class RejectFirst:
    """A verifier that rejects the first attempt of every lesion (a plug-in for tests)."""

    name = "reject-first"

    def __call__(self, original, edited, mask, context):
        self.calls = getattr(self, "calls", 0) + 1
        return (self.calls > 1, "first attempts are rejected")


def test_attempts_are_logged_with_retries_and_an_accepted_fill_gives_remove_and_add():
    ctx = BuildContext(0, inpainter=ClassicalInpainter(), verifier=RejectFirst())
    sl = _slice()
    out = modification(_source(), sl, ctx)
    assert [a["accepted"] for a in out.attempts] == [False, True]
    first, second = out.attempts
    assert first["reason"] == "first attempts are rejected" and not first["retry"]
    assert second["retry"] and second["dilation_px"] == first["dilation_px"] + 2
    assert first["seed"] != second["seed"] and second["verifier"] == "reject-first"
    remove, add = out.triplets
    assert (remove.task, add.task) == ("remove-lesion", "add-lesion")
    assert remove.input is sl.image and add.target is sl.image
    assert np.array_equal(remove.target, add.input) and remove.metadata["attempts"] == 2
    assert np.array_equal(remove.target[~remove.mask], sl.image[~remove.mask])
    never = BuildContext(0, inpainter=ClassicalInpainter(),
                         verifier=load_verifier(f"{__name__}:never_accept"))  # fmt: skip
    out = modification(_source(), sl, never)
    assert not out.triplets and dict(out.filters) == {"rejected": 1} and len(out.attempts) == 3
    assert [a["reason"] for a in out.attempts] == ["too much like the lesion"] * 3


def never_accept(original, edited, mask, context):
    return Verdict(False, "too much like the lesion")


def small_inpainter(image, mask, *, prompt, seed):
    return image[::2, ::2]


def test_an_inpainter_that_returns_another_size_is_named(tmp_path):
    inpainter = load_inpainter(f"{__name__}:small_inpainter")
    ctx = BuildContext(0, inpainter=inpainter, verifier=load_verifier(None))
    with pytest.raises(BuildError, match=r"item 'it' slice it-s000: inpainter "
                       r"'tests.build.test_modification:small_inpainter' returned uint8 "
                       r"\(32, 32, 3\) for a uint8 \(64, 64, 3\) image"):  # fmt: skip
        modification(_source(), _slice(), ctx)


def test_plugin_specs_are_checked():
    with pytest.raises(BuildError, match="unknown classical inpainter 'fast'"):
        load_inpainter("classical:fast")
    with pytest.raises(BuildError, match="cannot import module 'no_such_module'"):
        load_inpainter("no_such_module:fill")
    with pytest.raises(BuildError, match="has no attribute 'nothing'"):
        load_verifier(f"{__name__}:nothing")
    with pytest.raises(BuildError, match="unknown verifier 'strict'"):
        load_verifier("strict")


def test_a_modification_build_logs_attempts_and_reports_acceptance(tmp_path, demo_sources):
    out = tmp_path / "mod"
    result = build("modification", demo_sources["mni152"], out, exports=())
    assert not result.failures and result.samples > 0
    attempts = [json.loads(x) for x in (out / "attempts.jsonl").read_text().splitlines()]
    assert attempts and all(a["lesion"] == "csf" and a["modality"] == "MRI" for a in attempts)
    quality = json.loads((out / "report" / "quality.json").read_text())
    acceptance = quality["acceptance"]["MRI"]
    lesions = {(a["slice"], a["lesion"]) for a in attempts}
    accepted = {(a["slice"], a["lesion"]) for a in attempts if a["accepted"]}
    assert acceptance["lesions"] == len(lesions) and acceptance["attempts"] == len(attempts)
    assert acceptance["acceptance_rate"] == len(accepted) / len(lesions)
    assert quality["counts"]["task"] == {"remove-csf": len(accepted), "add-csf": len(accepted)}
    assert "## Modification acceptance" in (out / "report" / "quality.md").read_text()
