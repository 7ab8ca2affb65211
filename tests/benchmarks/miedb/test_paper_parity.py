"""``miedb@paper`` against an independent re-implementation of the shipped evaluation scripts.

The reference below follows Raiiyf/MieDB-100k ``evaluation/DICE.py``,
``PSNR-SSIM-perception.py`` and ``PSNR-SSIM-transformation.py`` step by step: ``cv2.imread``
(BGR), ``cv2.resize`` to the input size when shapes differ, the overlay alpha in float32 numpy,
the 1e-6-smoothed DICE, the in-place ``img[inverse_mask] = 255`` (a 0/1 array used as an index)
and scikit-image's PSNR and SSIM with their defaults; per sample the first available output (@1)
and the best (@3), 0 when no output exists.
"""

from __future__ import annotations

import json
import math
import os

import cv2
import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from medibench.benchmarks.miedb.dataset import read_miedb
from medibench.io import ImageReadError
from medibench.protocols import load_protocol
from medibench.samples import Perspective

from .conftest import MODEL

# scikit-image warns on the identical pair (PSNR = inf), as the official scripts would.
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")

BGR = {"RED": np.array([0, 0, 255]), "GREEN": np.array([0, 255, 0]), "BLUE": np.array([255, 0, 0])}


def ref_overlay_mask(blended, background, colours):
    """The official alpha projection, float32, union over colours (multi-class sums masks)."""
    b = blended.astype(np.float32)
    a = background.astype(np.float32)
    total = np.zeros(a.shape[:2])
    for name in colours:
        o = BGR[name].astype(np.float32)
        t, v = b - a, o - a
        alpha = np.clip(np.sum(t * v, axis=2) / (np.sum(v * v, axis=2) + 1e-6), 0.0, 1.0)
        total += (alpha > 0.5).astype(np.uint8)
    return total


def ref_dice(gt, pred):
    g, p = np.asarray(gt).astype(bool).ravel(), np.asarray(pred).astype(bool).ravel()
    return (2.0 * np.sum(g & p) + 1e-6) / (np.sum(g) + np.sum(p) + 1e-6)


def official_scores(bench, record, model_dir, n_batch=3):
    """Per-k values (only for outputs that load) of one sample, as the three scripts compute."""
    gt_path = os.path.join(bench, record["output_image"])
    gt = cv2.imread(gt_path)
    origin = cv2.imread(os.path.join(bench, record["input_image"]))
    gt_psnr_script = cv2.imread(gt_path)  # the perception PSNR script's own copy, mutated below
    category = record["category"].lower()
    if record.get("note") == "Multiclasses":
        colours = ["RED", "GREEN", "BLUE"]
    else:
        colours = [gt_path.split("_")[-1].replace(".png", "").upper()]
    per_k = {}
    for k in range(n_batch):
        path = os.path.join(model_dir, gt_path.split("/")[-1]).replace(".png", f"_{k}.png")
        pred = cv2.imread(path) if os.path.exists(path) else None
        if pred is None:
            continue
        if pred.shape != origin.shape:
            pred = cv2.resize(pred, (origin.shape[1], origin.shape[0]))
        if category == "perception":
            values = {
                "dice": ref_dice(
                    ref_overlay_mask(gt, origin, colours), ref_overlay_mask(pred, origin, colours)
                )
            }
            gt_mask = ref_overlay_mask(gt_psnr_script, origin, colours)
            gt_mask[gt_mask != 0] = 1
            inverse_mask = (1 - gt_mask).astype(np.uint8)
            gt_psnr_script[inverse_mask] = 255
            pred[inverse_mask] = 255
            values["bg_psnr"] = peak_signal_noise_ratio(gt_psnr_script, pred)
            values["bg_ssim"] = structural_similarity(gt_psnr_script, pred, channel_axis=-1)
        else:
            values = {
                "psnr": peak_signal_noise_ratio(gt, pred),
                "ssim": structural_similarity(gt, pred, channel_axis=-1),
            }
        per_k[k] = values
    return per_k


def reduce_k(per_k, names):
    """@1 = first available output, @3 = best; 0 for every metric when there is none."""
    if not per_k:
        return {n: 0.0 for n in names}, {n: 0.0 for n in names}
    first = per_k[min(per_k)]
    best = {n: max(v[n] for v in per_k.values()) for n in names}
    return first, best


def medibench_scores(protocol, sample, files):
    images = protocol.load_images(sample)
    per_k, notes = {}, {}
    for k, path in sorted(files.items()):
        try:
            prediction = protocol.read_prediction(path)
        except ImageReadError:
            continue  # scored as missing, like cv2.imread returning None
        res = protocol.score(sample, images, prediction)
        assert res.error is None, res.error
        per_k[k], notes[k] = res.metrics, res.notes
    return per_k, notes


@pytest.fixture(scope="module")
def scored(layout):
    ds = read_miedb(layout.root)
    index = ds.find_predictions(layout.root / "eval_results")
    protocol = load_protocol("miedb@paper")
    bench = str(layout.root / "dataBenchmark")
    model_dir = str(layout.root / "eval_results" / MODEL)
    records = {str(r["idx"]): r for r in layout.records}
    out = {}
    for sample in ds:
        if sample.perspective is Perspective.modification:
            continue
        files = index.files[MODEL].get(sample.sample_id, {})
        ours, notes = medibench_scores(protocol, sample, files)
        ref = official_scores(bench, records[sample.sample_id], model_dir)
        out[sample.sample_id] = (sample, ours, notes, ref)
    return out


def _close(a, b):
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-6


def test_every_output_matches_the_official_scripts(scored):
    compared = 0
    for sid, (_, ours, _, ref) in scored.items():
        assert sorted(ours) == sorted(ref), sid
        for k, values in ref.items():
            for name, value in values.items():
                assert _close(ours[k][name], value), (sid, k, name, ours[k][name], value)
                compared += 1
    assert compared >= 40


def test_at1_and_at3_match_with_zero_for_missing_samples(scored):
    for sid, (sample, ours, _, ref) in scored.items():
        names = (
            ("dice", "bg_psnr", "bg_ssim")
            if sample.perspective.value == "perception"
            else (
                "psnr",
                "ssim",
            )
        )
        for mine, theirs in zip(reduce_k(ours, names), reduce_k(ref, names), strict=True):
            for name in names:
                assert _close(mine[name], theirs[name]), (sid, name)


def test_the_fixture_exercises_the_cases_that_matter(scored, layout):
    # sample 0 has no k = 0 (so @1 is k = 1); samples 4 and 12 have no output at all;
    # the multi-class sample's k = 1 is corrupt; an identical output gives PSNR inf.
    assert sorted(scored["0"][1]) == [1, 2]
    assert scored["4"][1] == {} and scored["12"][1] == {}
    assert sorted(scored["3"][1]) == [0, 2]
    assert scored["10"][1][2]["psnr"] == math.inf
    assert 0.3 < scored["0"][1][1]["dice"] < 0.99  # a real, imperfect overlap
    assert scored["0"][1][2]["dice"] == pytest.approx(1.0)


def test_a_resized_prediction_is_recorded_in_the_notes(scored):
    notes = scored["1"][2][0]
    assert notes == [
        "prediction resized from 108x90 to the input's 72x72 (bilinear, cv2.INTER_LINEAR)"
    ]
    assert scored["1"][2][1] == []
    assert any("resized from 96x90 to the input's 80x72" in n for n in scored["11"][2][1])


def test_background_metrics_keep_the_shipped_row_bug(layout):
    """Only rows 0 and 1 are set to 255: a change anywhere below them still counts fully."""
    ds = read_miedb(layout.root)
    protocol = load_protocol("miedb@paper")
    sample = ds.get("0")
    images = protocol.load_images(sample)
    edited = images.target.copy()
    edited[54:, :] = 0  # wipe the bottom rows (the label spans rows 16-48)
    res = protocol.score(sample, images, edited)
    t, p = images.target.copy(), edited.copy()
    t[:2], p[:2] = 255, 255
    assert res.metrics["bg_psnr"] == pytest.approx(
        peak_signal_noise_ratio(t, p, data_range=255), abs=1e-9
    )
    assert res.metrics["bg_ssim"] == pytest.approx(structural_similarity(t, p, channel_axis=-1))
    assert res.metrics["bg_psnr"] < 20  # the 'background' change is not hidden by the bug


def test_an_empty_label_sets_row_1_only_and_says_so(tmp_path):
    """``1 - label`` holds only 1s: the index selects row 1 alone (first output's behaviour)."""
    from medibench.datasets import SampleImages
    from medibench.samples import Sample

    rng = np.random.default_rng(0)
    inp = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
    pred = np.clip(inp.astype(int) + rng.integers(-20, 20, inp.shape), 0, 255).astype(np.uint8)
    sample = Sample(
        sample_id="e",
        benchmark="miedb",
        input="i.png",
        instruction="x",
        perspective="perception",
        overlay_color=("red",),
    )
    protocol = load_protocol("miedb@paper")
    res = protocol.score(sample, SampleImages(inp, inp.copy(), None), pred)
    t, p = inp.copy(), pred.copy()
    inverse = np.ones((24, 24), np.uint8)
    t[inverse], p[inverse] = 255, 255  # what the script does
    assert (t[0] == inp[0]).all() and (t[1] == 255).all()
    assert res.metrics["bg_psnr"] == pytest.approx(peak_signal_noise_ratio(t, p), abs=1e-9)
    assert res.metrics["bg_ssim"] == pytest.approx(structural_similarity(t, p, channel_axis=-1))
    assert res.metrics["dice"] == pytest.approx(
        ref_dice(
            np.zeros(1),
            ref_overlay_mask(
                cv2.cvtColor(pred, cv2.COLOR_RGB2BGR), cv2.cvtColor(inp, cv2.COLOR_RGB2BGR), ["RED"]
            ),
        )
    )
    assert any("only row 1" in n for n in res.notes)


def test_the_metadata_written_matches_the_records(layout):
    # guard: the fixture's metadata is the list the reference iterates
    bench = layout.root / "dataBenchmark" / "metadata.json"
    assert json.loads(bench.read_text()) == layout.records
