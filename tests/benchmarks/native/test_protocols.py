import math

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from medibench.datasets import SampleImages
from medibench.metrics import blend_overlay
from medibench.protocols import PROTOCOLS, load_protocol
from medibench.samples import Sample

RNG = np.random.default_rng(3)
INPUT = RNG.integers(0, 256, (48, 40, 3), dtype=np.uint8)
MASK = np.zeros((48, 40), bool)
MASK[10:30, 12:28] = True
TARGET = INPUT.copy()
TARGET[MASK] = 30
PROTO = load_protocol("native@1")


def _sample(perspective="modification", **kw):
    return Sample(
        sample_id="x",
        benchmark="b",
        input="in.png",
        instruction="Remove the lesion.",
        perspective=perspective,
        **kw,
    )


def _skimage_map(a, b):
    _, full = structural_similarity(
        a,
        b,
        data_range=255,
        gaussian_weights=True,
        sigma=1.5,
        use_sample_covariance=False,
        channel_axis=-1,
        full=True,
    )
    return full


def test_values_match_scikit_image_references():
    pred = TARGET.copy()
    pred[0:5] = 200  # a change outside the ROI, so CP < 1
    res = PROTO.score(_sample(), SampleImages(INPUT, TARGET, MASK), pred)
    ref_ssim = structural_similarity(
        pred,
        TARGET,
        data_range=255,
        gaussian_weights=True,
        sigma=1.5,
        use_sample_covariance=False,
        channel_axis=-1,
    )
    assert res.metrics["ssim"] == pytest.approx(ref_ssim, abs=1e-5)
    assert res.metrics["psnr"] == pytest.approx(
        peak_signal_noise_ratio(TARGET, pred, data_range=255)
    )
    cp_ref = _skimage_map(pred, INPUT)[~MASK].mean()
    roi_ref = _skimage_map(pred, TARGET)[MASK].mean()
    assert res.metrics["cp"] == pytest.approx(cp_ref, abs=1e-5)
    assert res.metrics["roi_ssim"] == pytest.approx(roi_ref, abs=1e-5)
    diff = (pred.astype(float) - INPUT)[~MASK]
    assert res.metrics["cp_psnr"] == pytest.approx(10 * math.log10(255**2 / np.mean(diff**2)))
    assert "dice" not in res.metrics and res.error is None and res.notes == []


def test_perfect_edit_and_identity():
    perfect = PROTO.score(_sample(), SampleImages(INPUT, TARGET, MASK), TARGET)
    assert perfect.metrics["psnr"] == math.inf and perfect.metrics["ssim"] == pytest.approx(1)
    ident = PROTO.score(_sample(), SampleImages(INPUT, TARGET, MASK), INPUT)
    assert ident.metrics["cp_psnr"] == math.inf and ident.metrics["cp"] == pytest.approx(1)


def test_perception_dice_from_the_overlay():
    sample = _sample("perception", overlay_color=("green",))
    target = blend_overlay(INPUT, MASK, "green", alpha=0.6)
    images = SampleImages(INPUT, target, MASK)
    assert PROTO.score(sample, images, target).metrics["dice"] == pytest.approx(1.0)
    # identity recovers an empty mask: Dice 0 against a non-empty ROI
    assert PROTO.score(sample, images, INPUT).metrics["dice"] == 0.0
    half = MASK.copy()
    half[20:30] = False
    pred = blend_overlay(INPUT, half, "green", alpha=0.6)
    expected = 2 * half.sum() / (half.sum() + MASK.sum())
    assert PROTO.score(sample, images, pred).metrics["dice"] == pytest.approx(expected)


def test_resize_is_recorded_and_missing_parts_are_reasons_not_zeros():
    big = np.repeat(np.repeat(INPUT, 2, axis=0), 2, axis=1)
    res = PROTO.score(_sample("transformation"), SampleImages(INPUT, TARGET, None), big)
    assert res.notes == ["prediction resized from 80x96 to 40x48 (bilinear)"]
    assert res.metrics["cp"] is None and res.metrics["roi_ssim"] is None
    assert "cp: the sample has no ROI mask" in res.error
    full = np.ones_like(MASK)
    res = PROTO.score(_sample(), SampleImages(INPUT, TARGET, full), TARGET)
    assert res.metrics["cp"] is None and "outside" in res.reasons["cp"]
    assert res.metrics["roi_ssim"] == pytest.approx(1.0)


def test_bad_prediction_dtype_and_unknown_protocol():
    with pytest.raises(ValueError, match="uint8"):
        PROTO.score(_sample(), SampleImages(INPUT, TARGET, MASK), INPUT.astype(float))
    with pytest.raises(KeyError, match="Did you mean: native@1"):
        PROTOCOLS.get("native@2")
