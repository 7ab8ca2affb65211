"""Grounding IoU on hand-made maps; the failure diagnosis."""

from __future__ import annotations

import math

import numpy as np
import pytest
from skimage.filters import threshold_otsu

import medibench.analysis as analysis
from medibench.analysis import diagnose, grounding, grounding_iou, normalize_heatmap


def _square(shape, y0, y1, x0, x1, value=1.0):
    a = np.zeros(shape)
    a[y0:y1, x0:x1] = value
    return a


def test_iou_of_hand_made_maps():
    heat = _square((10, 10), 2, 6, 2, 6)  # 16 hot pixels
    mask = _square((10, 10), 4, 8, 4, 8).astype(bool)  # 16 pixels, 4 shared
    assert grounding_iou(heat, mask) == pytest.approx(4 / 28)
    assert analysis.grounding_iou(heat, heat > 0) == 1.0
    assert grounding_iou(heat, ~(heat > 0)) == 0.0


def test_threshold_is_alpha_times_otsu_strictly_above():
    rng = np.random.default_rng(0)
    heat = normalize_heatmap(rng.random((32, 48)))
    mask = rng.random((32, 48)) > 0.7
    otsu = threshold_otsu(heat)
    for alpha in (1.0, 1.3, 1.6):
        binary = heat > alpha * otsu
        want = (binary & mask).sum() / (binary | mask).sum()
        g = grounding(heat, mask, alpha=alpha)
        assert g.iou == pytest.approx(want) and g.threshold == pytest.approx(alpha * otsu)
        assert g.pixels == binary.sum() and g.note is None


def test_threshold_above_the_maximum_gives_zero_with_a_note():
    heat = np.full((8, 8), 0.9)
    heat[1, 1] = 1.0  # Otsu between 0.9 and 1 -> 1.3 x Otsu > 1
    g = grounding(heat, _square((8, 8), 0, 4, 0, 4).astype(bool))
    assert g.threshold > 1.0
    assert g.iou == 0.0 and g.pixels == 0 and "binarised map is empty" in g.note


def test_both_empty_is_nan_with_a_reason():
    heat = np.full((6, 6), 0.3)  # constant: nothing above the threshold
    g = grounding(heat, np.zeros((6, 6), bool))
    assert math.isnan(g.iou) and "and so is the mask" in g.note
    assert math.isnan(grounding_iou(heat, np.zeros((6, 6), np.uint8)))


def test_bad_inputs():
    heat = np.zeros((4, 4))
    with pytest.raises(
        ValueError, match=r"mask shape \(4, 5\) differs from heatmap shape \(4, 4\)"
    ):
        grounding_iou(heat, np.zeros((4, 5), bool))
    with pytest.raises(ValueError, match="NaN"):
        grounding_iou(np.full((4, 4), np.nan), np.zeros((4, 4), bool))
    with pytest.raises(ValueError, match="not binary"):
        grounding_iou(heat, np.arange(16).reshape(4, 4))
    with pytest.raises(ValueError, match="alpha"):
        grounding_iou(heat, np.zeros((4, 4), bool), alpha=0)
    with pytest.raises(ValueError, match=r"\(H, W\)"):
        grounding_iou(np.zeros((4, 4, 3)), np.zeros((4, 4), bool))


def test_normalize_heatmap():
    np.testing.assert_allclose(
        normalize_heatmap(np.array([[2.0, 4.0], [3.0, 6.0]])), [[0, 0.5], [0.25, 1]]
    )
    assert not normalize_heatmap(np.full((2, 2), 7.0)).any()


def test_diagnosis_reads_iou_beside_judged_accuracy():
    rows = [
        {"model": "m", "sample_id": "a", "k": 0, "iou": 0.7},
        {"model": "m", "sample_id": "b", "k": 0, "iou": 0.7},
        {"model": "m", "sample_id": "c", "k": 0, "iou": 0.1},
        {"model": "m", "sample_id": "d", "k": 0, "iou": 0.9},  # not judged: left out
        {"model": "m", "sample_id": "e", "k": 0, "iou": float("nan")},
    ]
    acc = {("m", "a", 0): 0.2, ("m", "b", 0): 0.8, ("m", "c", 0): 0.9, ("m", "e", 0): 0.5}
    out = {r["sample_id"]: r["diagnosis"] for r in diagnose(rows, acc)}
    assert out == {"a": "conservative edit", "b": "grounded", "c": "mislocalised"}


def test_the_attention_summary_counts_diagnoses_per_region_and_model():
    from medibench.analysis._run import attention_summary
    from medibench.samples import Score

    def row(model, sid, region, iou, status="ok"):
        return {"model": model, "sample_id": sid, "k": 0, "region": region, "iou": iou,
                "status": status}  # fmt: skip

    rows = [
        row("m", "a", "liver", 0.7),  # judged 0.2: conservative edit
        row("m", "b", "liver", 0.0),  # judged 0.9: mislocalised
        row("m", "c", "lung", 0.6),  # judged 0.8: grounded
        row("m", "d", "lung", None),  # NaN IoU: counted, not averaged, not diagnosed
        row("m", "e", "lung", None, status="error"),  # failed: not in the summary
        row("other", "a", "liver", 0.5),  # no judged accuracy
    ]

    def score(model, sid, ea):
        return Score(sample_id=sid, model=model, k=0, protocol="p", protocol_version="1",
                     metrics={"ea": ea})  # fmt: skip

    scores = [score("m", "a", 0.2), score("m", "b", 0.9), score("m", "c", 0.8)]
    out = {(r["model"], r["region"]): r for r in attention_summary(rows, scores)}
    assert list(out) == [("m", "liver"), ("m", "lung"), ("m", "overall"),
                         ("other", "liver"), ("other", "overall")]  # fmt: skip
    verdicts = ("grounded", "conservative_edit", "mislocalised")
    assert out["m", "liver"] == {"model": "m", "region": "liver", "n": 2, "iou": 0.35, "zero": 1,
                                 "nan": 0, "grounded": 0, "conservative_edit": 1,
                                 "mislocalised": 1}  # fmt: skip
    assert (out["m", "lung"]["n"], out["m", "lung"]["iou"], out["m", "lung"]["nan"]) == (2, 0.6, 1)
    assert [out["m", "lung"][v] for v in verdicts] == [1, 0, 0]
    assert [out["m", "overall"][v] for v in verdicts] == [1, 1, 1]
    assert out["m", "overall"]["n"] == 4 and out["m", "overall"]["iou"] == pytest.approx(1.3 / 3)
    assert [out["other", "overall"][v] for v in verdicts] == [None, None, None]


@pytest.mark.parametrize("seed", range(5))
def test_iou_matches_scikit_learns_jaccard_of_the_binarised_map(seed):
    from sklearn.metrics import jaccard_score

    rng = np.random.default_rng(seed)
    heat = normalize_heatmap(rng.gamma(2.0, size=(24, 40)))
    mask = np.zeros((24, 40), bool)
    mask[rng.integers(0, 12) :, rng.integers(0, 20) :] = True
    binary = heat > 1.3 * threshold_otsu(heat)
    want = jaccard_score(mask.ravel(), binary.ravel())
    assert grounding_iou(heat, mask) == pytest.approx(want)
