"""``miedb@1`` values against scikit-image/numpy references; both protocols' declarations,
set-level perception accuracy, and scoring through the runner."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from medibench.benchmarks.miedb.dataset import read_miedb
from medibench.benchmarks.miedb.protocols import (
    MieDBPaperProtocol,
    MieDBProtocol,
)
from medibench.datasets import SampleImages
from medibench.io import read_image
from medibench.metrics import blend_overlay, overlay_to_mask
from medibench.protocols import NOT_JUDGED, load_protocol
from medibench.runs._runner import score_one
from medibench.samples import Prediction, Sample

from .conftest import MODEL

V1 = load_protocol("miedb@1")


def _outside_mean(a, b, label, *, gaussian=True):
    _, full = structural_similarity(
        a,
        b,
        data_range=255,
        gaussian_weights=gaussian,
        sigma=1.5,
        use_sample_covariance=False,
        channel_axis=-1,
        full=True,
    )
    return float(full[~label].mean())


def _masked_psnr(a, b, label):
    mse = np.mean((a[~label].astype(np.float64) - b[~label]) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def test_v1_perception_against_references(layout):
    ds = read_miedb(layout.root)
    index = ds.find_predictions(layout.root / "eval_results")
    checked = 0
    for sid in ("0", "1", "2", "3"):
        sample = ds.get(sid)
        images = V1.load_images(sample)
        assert images.label_source == "target overlay"
        label = images.label
        assert label.sum() > 50
        for path in index.files[MODEL][sid].values():
            if path == layout.corrupt:
                continue
            pred = read_image(path)
            res = V1.score(sample, images, pred)
            if pred.shape != images.input.shape:
                h, w = images.input.shape[:2]
                pred = cv2.resize(pred, (w, h), interpolation=cv2.INTER_LINEAR)
                assert any("resized" in n for n in res.notes)
            got = overlay_to_mask(pred, images.input, list(sample.overlay_color))
            want_dice = 2 * np.sum(got & label) / (got.sum() + label.sum())
            assert res.metrics["dice"] == pytest.approx(want_dice, abs=1e-12)
            assert res.metrics["bg_psnr"] == pytest.approx(
                _masked_psnr(pred, images.input, label), abs=1e-9
            )
            assert res.metrics["bg_ssim"] == pytest.approx(
                _outside_mean(pred, images.input, label), abs=1e-5
            )
            assert res.metrics["ill_conditioned_fraction"] == 0.0
            assert "label from the target overlay" in res.notes
            checked += 1
    assert checked == 10


def test_v1_transformation_against_references(layout):
    ds = read_miedb(layout.root)
    sample = ds.get("10")
    images = V1.load_images(sample)
    path = layout.root / "eval_results" / MODEL / "astro_t_clean_0.png"
    pred = read_image(path)
    res = V1.score(sample, images, pred)
    assert set(res.metrics) == {"psnr", "ssim"}
    assert res.metrics["psnr"] == pytest.approx(
        peak_signal_noise_ratio(images.target, pred, data_range=255), abs=1e-9
    )
    assert res.metrics["ssim"] == pytest.approx(
        structural_similarity(
            pred,
            images.target,
            data_range=255,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
            channel_axis=-1,
        ),
        abs=1e-5,
    )


def _red_sample():
    return Sample(
        sample_id="endo",
        benchmark="miedb",
        input="i.png",
        instruction="Segment the polyp in red.",
        perspective="perception",
        overlay_color=("red",),
    )


def test_v1_flags_ill_conditioned_overlay_pixels():
    """An input already red where the label is (endoscopy-like): flagged, not silently trusted."""
    inp = np.full((32, 32, 3), 120, np.uint8)
    inp[8:16, 8:24] = (255, 0, 0)  # pure red already: the blend cannot change it
    label = np.zeros((32, 32), bool)
    label[8:24, 8:24] = True  # half of it over the red patch
    target = blend_overlay(inp, label, "red")
    res = V1.score(_red_sample(), SampleImages(inp, target, label), target)
    assert res.metrics["ill_conditioned_fraction"] == pytest.approx(0.5)
    assert any("50.0% of the label and predicted pixels" in n for n in res.notes)
    assert "label from the stored mask" in res.notes
    # the stored mask is preferred: Dice of the overlay reading vs the mask shows the loss
    assert res.metrics["dice"] == pytest.approx(2 * 128 / (128 + 256))


def test_v1_label_covering_everything_gives_reasons_not_zeros():
    inp = np.full((16, 16, 3), 100, np.uint8)
    label = np.ones((16, 16), bool)
    res = V1.score(_red_sample(), SampleImages(inp, blend_overlay(inp, label, "red"), label), inp)
    assert res.metrics["bg_psnr"] is None and res.metrics["bg_ssim"] is None
    assert "the ROI covers the whole image" in res.reasons["bg_psnr"]
    assert res.metrics["dice"] == 0.0


def test_target_of_another_size_is_a_reason():
    inp = np.full((16, 16, 3), 100, np.uint8)
    images = SampleImages(inp, np.zeros((20, 16, 3), np.uint8), None)
    for protocol in (V1, MieDBPaperProtocol()):
        res = protocol.score(_red_sample(), images, inp)
        assert res.metrics["dice"] is None
        assert "the target is 16x20 but the input is 16x16" in res.reasons["dice"]


def test_declarations():
    paper, v1 = load_protocol("miedb@paper"), V1
    assert isinstance(paper, MieDBPaperProtocol) and isinstance(v1, MieDBProtocol)
    assert (paper.name, paper.version, v1.name, v1.version) == ("miedb", "paper", "miedb", "1")
    for p in (paper, v1):
        assert p.aggregation.k_modes == (("@1", "first"), ("@3", "best"))
        assert p.aggregation.group_by == ("perspective",)
        assert p.judged_metrics == ("rubric",)
        assert set(p.judged_metrics) <= set(p.metric_names)
        assert p.aggregation.pass_rates == (("perception_accuracy", "dice", 0.8),)
    assert paper.aggregation.missing == "zero" and v1.aggregation.missing == "skip"
    perception = _red_sample()
    assert paper.applicable_metrics(perception) == ("dice", "bg_psnr", "bg_ssim")
    assert v1.applicable_metrics(perception)[-1] == "ill_conditioned_fraction"
    mod = perception.model_copy(update={"perspective": "modification"})
    assert paper.applicable_metrics(mod) == ("rubric",)


def test_perception_accuracy_follows_the_missing_policy():
    from medibench.report import summarize
    from medibench.samples import Score

    samples = {str(i): _red_sample().model_copy(update={"sample_id": str(i)}) for i in range(4)}
    dices = {"0": 0.9, "1": 0.8, "2": 0.79, "3": None}  # "3" has no output at all

    def records(proto):
        return [
            Score(
                sample_id=sid,
                model="m",
                k=0,
                protocol=proto.name,
                protocol_version=proto.version,
                metrics={"dice": d, "bg_psnr": None if d is None else 30.0},
                status="missing" if d is None else "ok",
            )
            for sid, d in dices.items()
        ]

    for proto, expected in ((load_protocol("miedb@paper"), 0.5), (V1, 2 / 3)):
        rows = summarize(
            records(proto), samples, proto.aggregation, metrics=list(proto.metric_names)
        )
        row = next(r for r in rows if r["by"] == "all" and r["k_mode"] == "@1")
        assert row["perception_accuracy"] == pytest.approx(expected)


def test_scoring_through_the_runner(layout):
    ds = read_miedb(layout.root)
    paper = load_protocol("miedb@paper")
    preds = layout.root / "eval_results" / MODEL

    def run(sid, name, protocol=paper):
        pred = Prediction(sample_id=sid, model=MODEL, k=0, path=str(preds / name))
        return score_one(layout.root, ds.get(sid), pred, protocol, None)

    ok = run("0", "astro_red_1.png")
    # the judged rubric applies to modification samples only (applicable_metrics)
    assert ok.status == "ok" and set(ok.metrics) == {"dice", "bg_psnr", "bg_ssim"}
    assert ok.protocol_version == "paper"
    corrupt = run("3", layout.corrupt.name)
    assert corrupt.status == "error" and "coffee_classes_1.png" in corrupt.error
    assert "count this output as missing" in corrupt.error
    mod = run("20", "cat_m_0.png", V1)
    assert mod.status == "ok" and mod.metrics == {"rubric": None}
    assert mod.error == f"rubric: {NOT_JUDGED}"


def test_unreadable_files_name_the_file(layout, tmp_path):
    from medibench.io import ImageReadError

    paper = MieDBPaperProtocol()
    with pytest.raises(ImageReadError, match="gone_0.png: could not be read"):
        paper.read_prediction(tmp_path / "gone_0.png")
    sample = read_miedb(layout.root).get("0")
    broken = sample.model_copy(update={"input": str(layout.corrupt)})
    with pytest.raises(ImageReadError, match=r"coffee_classes_1\.png: OpenCV could not decode it$"):
        paper.load_images(broken)
