"""medebench@paper and medebench@1 against independent re-implementations, per sample.

The paper reference follows the official script (mliuby/MedEBench,
src/eval_metrics/traditional_metrics_eval.py) step by step: PIL reads and resizes, the
ToTensor / multiply / ToPILImage round trip written out in float32 numpy, then
skimage.metrics.structural_similarity with its defaults.
"""

import math

import numpy as np
import pytest
from PIL import Image
from skimage.metrics import structural_similarity

from medibench.benchmarks.medebench.dataset import read_medebench
from medibench.benchmarks.medebench.protocols import (
    FID_REASON,
    MedEBenchPaperProtocol,
    MedEBenchProtocol,
)
from medibench.datasets import SampleImages
from medibench.datasets import load_images as default_load_images
from medibench.protocols import NOT_JUDGED, PROTOCOLS, load_protocol
from medibench.runs._runner import score_one
from medibench.samples import Prediction, Sample

PAPER = load_protocol("medebench@paper")
CORRECTED = load_protocol("medebench@1")


@pytest.fixture(scope="module")
def ds(medebench_root):
    return read_medebench(medebench_root)


@pytest.fixture(scope="module")
def predictions(ds, medebench_root):
    return ds.find_predictions(medebench_root / "generated_images")


def _score(protocol, sample, path):
    pred = Prediction(sample_id=sample.sample_id, model="m", k=0, path=str(path))
    return score_one(path.parent, sample, pred, protocol, default_load_images)


# --- independent references -------------------------------------------------------------------


def official_cp(prev_path, edited_path, mask_path):
    """The official masked SSIM, written out from the script, one step per line."""
    prev_pil = Image.open(prev_path).convert("RGB")
    target_size = prev_pil.size
    edited_pil = Image.open(edited_path).convert("RGB").resize(target_size, Image.BICUBIC)
    mask_pil = Image.open(mask_path).convert("L").resize(target_size, Image.NEAREST)

    def to_tensor(pil):  # transforms.ToTensor: (C, H, W) float32 in [0, 1]
        arr = np.array(pil, dtype=np.uint8)
        arr = arr[:, :, None] if arr.ndim == 2 else arr
        return arr.transpose(2, 0, 1).astype(np.float32) / np.float32(255.0)

    def to_pil_numpy(t):  # transforms.ToPILImage on a float tensor: mul(255).byte()
        return (t * np.float32(255.0)).astype(np.uint8).transpose(1, 2, 0)

    inv_mask = np.float32(1.0) - to_tensor(mask_pil)
    edited_masked = to_pil_numpy(to_tensor(edited_pil) * inv_mask)
    prev_masked = to_pil_numpy(to_tensor(prev_pil) * inv_mask)
    return structural_similarity(prev_masked, edited_masked, channel_axis=-1)


def _pil_rgb(path, size=None, method=Image.BICUBIC):
    im = Image.open(path).convert("RGB")
    return np.asarray(im if size is None else im.resize(size, method))


def _pil_rgb_on_black(path, size):
    """medebench@1 composites an RGBA output on black (issue 10), then resizes it (PIL bicubic)."""
    im = Image.open(path)
    if im.mode != "RGBA":
        return _pil_rgb(path, size)
    rgba = np.asarray(im).astype(np.float64)
    rgb = np.rint(rgba[:, :, :3] * rgba[:, :, 3:] / 255).astype(np.uint8)
    return np.asarray(Image.fromarray(rgb).resize(size, Image.BICUBIC))


def corrected_reference(sample, pred_path, dilate=0):
    """medebench@1 from scikit-image's full SSIM map and boolean-mask means."""
    inp = _pil_rgb(sample.input)
    h, w = inp.shape[:2]
    pred = _pil_rgb_on_black(pred_path, (w, h))
    target = _pil_rgb(sample.target, (w, h))
    raw = np.asarray(Image.open(sample.mask))
    roi = (raw if raw.ndim == 2 else raw.max(axis=2)) > 0
    roi = np.asarray(Image.fromarray(roi.astype(np.uint8)).resize((w, h), Image.NEAREST)) > 0
    outside = ~roi
    if dilate:
        from scipy import ndimage

        outside = ndimage.distance_transform_edt(~roi) > dilate

    def smap(a, b):
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

    def mpsnr(a, b, where):
        diff = a[where].astype(np.float64) - b[where].astype(np.float64)
        mse = np.mean(diff**2)
        return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)

    return {
        "cp": float(smap(pred, inp)[outside].mean()),
        "cp_psnr": mpsnr(pred, inp, outside),
        "roi_ssim": float(smap(pred, target)[roi].mean()),
        "roi_psnr": mpsnr(pred, target, roi),
    }


# --- medebench@paper -------------------------------------------------------------------------


@pytest.mark.parametrize("sid", ["1", "2", "3", "5"])
def test_paper_cp_matches_the_official_computation(ds, predictions, sid):
    sample = ds.get(sid)
    path = predictions.files["modelA"][sid][0]
    score = _score(PAPER, sample, path)
    assert score.status == "ok"
    assert score.protocol == "medebench" and score.protocol_version == "paper"
    assert score.metrics["cp"] == pytest.approx(
        official_cp(sample.input, path, sample.mask), abs=1e-6
    )


def test_paper_cp_records_resizes_judged_and_set_level_metrics(ds, predictions):
    sample = ds.get("2")
    score = _score(PAPER, sample, predictions.files["modelA"]["2"][0])
    assert score.notes == (
        "prediction resized from 90x60 to 72x100 (bicubic, PIL)",
        "mask resized from 36x50 to 72x100 (nearest, PIL)",
    )
    assert set(score.metrics) == {"cp", "ea", "vq", "fid"}
    assert score.metrics["ea"] is score.metrics["vq"] is score.metrics["fid"] is None
    assert f"fid: {FID_REASON}" in score.error
    assert f"ea: {NOT_JUDGED}" in score.error and f"vq: {NOT_JUDGED}" in score.error


def test_paper_keeps_raw_mask_levels_and_truncates(ds):
    sample = ds.get("2")  # grey-level mask: 128 scales the pixel, it is not "inside"
    images = PAPER.load_images(sample)
    assert images.mask.dtype == np.uint8 and set(np.unique(images.mask)) == {0, 128, 255}
    assert images.input.shape == (100, 72, 3)
    # ToPILImage truncates. Outside a binary ROI (keep = 1.0) x/255*255 round-trips exactly in
    # float32; at a grey mask level the truncation drops about half the values by one.
    x = np.arange(256, dtype=np.float32)
    assert np.array_equal(x / np.float32(255) * np.float32(1.0) * np.float32(255), x)
    keep = np.float32(1.0) - np.float32(128) / np.float32(255)
    scaled = x / np.float32(255) * keep * np.float32(255)
    assert (scaled.astype(np.uint8) != np.rint(scaled)).sum() == 128
    # and the protocol truncates: its CP equals the one computed with truncation, not rounding
    pred = np.asarray(Image.open(sample.input).convert("RGB"))[::-1].copy()
    got = PAPER.score(sample, images, pred).metrics["cp"]
    full_mask = np.asarray(Image.fromarray(images.mask).resize((72, 100), Image.NEAREST))
    keep_map = np.float32(1.0) - full_mask.astype(np.float32) / np.float32(255)

    def fill(img, cast):
        return cast(img.astype(np.float32) / np.float32(255) * keep_map[:, :, None] * 255)

    def trunc(v):
        return v.astype(np.uint8)

    def rounded(v):
        return np.rint(v).astype(np.uint8)

    truncated = structural_similarity(fill(images.input, trunc), fill(pred, trunc), channel_axis=-1)
    by_rounding = structural_similarity(
        fill(images.input, rounded), fill(pred, rounded), channel_axis=-1
    )
    assert got == pytest.approx(truncated, abs=1e-9)
    assert abs(got - by_rounding) > 1e-6


def test_paper_sample_without_mask_is_skipped_with_the_reason(ds, predictions):
    score = _score(PAPER, ds.get("4"), predictions.files["modelA"]["4"][0])
    assert score.status == "ok" and score.metrics["cp"] is None
    assert "cp: the official script skips samples with a missing file (no mask)" in score.error


def test_paper_missing_ground_truth_is_skipped_too():
    inp = np.zeros((16, 16, 3), np.uint8)
    res = MedEBenchPaperProtocol().score(
        Sample(
            sample_id="x",
            benchmark="medebench",
            input="a.png",
            instruction="i",
            perspective="modification",
        ),
        SampleImages(inp, None, None),
        inp,
    )
    assert res.metrics["cp"] is None
    assert res.reasons["cp"] == (
        "the official script skips samples with a missing file (no ground-truth image and no mask)"
    )


# --- medebench@1 -----------------------------------------------------------------------------


@pytest.mark.parametrize("sid", ["1", "2", "3", "5"])
def test_corrected_metrics_match_skimage_maps_and_hand_psnr(ds, predictions, sid):
    sample = ds.get(sid)
    path = predictions.files["modelA"][sid][0]
    score = _score(CORRECTED, sample, path)
    ref = corrected_reference(sample, path)
    assert score.status == "ok" and score.protocol_version == "1"
    for name in ("cp", "roi_ssim"):
        assert score.metrics[name] == pytest.approx(ref[name], abs=1e-5), name
    for name in ("cp_psnr", "roi_psnr"):
        assert score.metrics[name] == pytest.approx(ref[name], abs=1e-9), name


def test_corrected_dilation_notes_and_description(ds, predictions):
    sample = ds.get("1")
    path = predictions.files["modelA"]["1"][0]
    protocol = MedEBenchProtocol(dilate=3)
    score = _score(protocol, sample, path)
    ref = corrected_reference(sample, path, dilate=3)
    assert score.metrics["cp"] == pytest.approx(ref["cp"], abs=1e-5)
    assert score.metrics["cp_psnr"] == pytest.approx(ref["cp_psnr"], abs=1e-9)
    assert score.notes == (
        "prediction resized from 128x112 to 96x80 (bicubic, PIL)",
        "ROI dilated by 3 px for cp and cp_psnr",
    )
    assert "dilated by 3 px" in protocol.description
    assert "dilated by 0 px" in CORRECTED.description
    with pytest.raises(ValueError, match="dilate must be a non-negative integer"):
        MedEBenchProtocol(dilate=-1)


def test_corrected_without_mask_gives_reasons_not_zeros(ds, predictions):
    score = _score(CORRECTED, ds.get("4"), predictions.files["modelA"]["4"][0])
    assert score.status == "ok"
    for name in ("cp", "cp_psnr", "roi_ssim", "roi_psnr"):
        assert score.metrics[name] is None
        assert f"{name}: the sample has no ROI mask (no previous_mask file)" in score.error


def test_corrected_roi_covering_everything_is_a_reason():
    inp = np.full((24, 24, 3), 100, np.uint8)
    res = CORRECTED.score(
        Sample(
            sample_id="x",
            benchmark="medebench",
            input="a.png",
            instruction="i",
            perspective="modification",
        ),
        SampleImages(inp, inp, np.ones((24, 24), bool)),
        inp,
    )
    assert res.metrics["cp"] is None and "region 'outside' is empty" in res.reasons["cp"]
    assert res.metrics["roi_psnr"] == math.inf


# --- the CP inflation the SPEC describes ------------------------------------------------------


def test_paper_cp_inflates_with_roi_area_where_the_corrected_cp_does_not(ds, predictions):
    # Sample 5: the prediction is unrelated noise, the ROI covers 69% of the image.
    sample = ds.get("5")
    path = predictions.files["modelA"]["5"][0]
    paper = _score(PAPER, sample, path).metrics["cp"]
    corrected = _score(CORRECTED, sample, path).metrics["cp"]
    assert paper > 0.6 and corrected < 0.05
    assert paper > corrected + 0.5

    # Same noise, growing ROI: paper CP rises with the ROI's area, corrected CP stays near 0.
    images = PAPER.load_images(sample)
    noise = np.asarray(Image.open(path).convert("RGB"))
    paper_cps, corrected_cps = [], []
    for half in (8, 24, 40):
        m = np.zeros((96, 96), np.uint8)
        m[48 - half : 48 + half, 48 - half : 48 + half] = 255
        paper_cps.append(PAPER.score(sample, SampleImages(images.input, images.target, m), noise))
        corrected_cps.append(
            CORRECTED.score(sample, SampleImages(images.input, images.target, m > 0), noise)
        )
    paper_cps = [r.metrics["cp"] for r in paper_cps]
    corrected_cps = [r.metrics["cp"] for r in corrected_cps]
    assert paper_cps == sorted(paper_cps) and paper_cps[-1] - paper_cps[0] > 0.5
    assert max(corrected_cps) < 0.05


# --- declarations ------------------------------------------------------------------------------


def test_protocol_declarations():
    for spec, protocol in (("medebench@paper", PAPER), ("medebench@1", CORRECTED)):
        assert PROTOCOLS.create(spec) == protocol
        agg = protocol.aggregation
        assert agg.k_modes == (("@1", "first"),) and agg.missing == "skip"
        assert agg.group_by == ("region",) and agg.macro_over == ("region",)
        assert protocol.judged_metrics == ("ea", "vq")
        assert set(protocol.judged_metrics) <= set(protocol.metric_names)
        assert "fid" in protocol.metric_names
    assert PAPER.metric_names == ("cp", "ea", "vq", "fid")
    assert CORRECTED.metric_names == ("cp", "cp_psnr", "roi_ssim", "roi_psnr", "ea", "vq", "fid")
    assert load_protocol("medebench") == CORRECTED


def test_paper_read_prediction_drops_alpha_like_pil(ds, predictions):
    path = predictions.files["modelA"]["3"][0]
    pred = PAPER.read_prediction(path)
    assert pred.shape == (90, 110, 3) and pred.dtype == np.uint8
    assert np.array_equal(pred, np.asarray(Image.open(path))[:, :, :3])
