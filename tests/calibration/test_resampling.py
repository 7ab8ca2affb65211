"""The bootstrap without copies (:mod:`medibench.calibration._resampling`): every resample's
metrics equal the protocol's metrics of the copied resample, and the intervals equal the ones
the copying bootstrap gave (pinned in ``bootstrap_intervals_pinned.json``, computed by it
before the change)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from medibench.calibration import as_predictions, load_calibration_protocol
from medibench.calibration._resampling import ResampledMetrics, percentile_of_counts
from medibench.calibration.protocols import bootstrap_intervals

PINNED = json.loads((Path(__file__).with_name("bootstrap_intervals_pinned.json")).read_text())
# Only the order of floating-point additions differs (sum of w_i x_i against the resample's
# values one by one): a few ulps of each metric.
RTOL, ATOL = 1e-12, 1e-15


def cases():
    rng = np.random.default_rng(7)
    # heavy ties across equal-mass boundaries with right and wrong predictions among them,
    # confidences on bin edges and of exactly 1.0
    pool = np.array([[1.0, 0, 0, 0], [0.6, 0.2, 0.2, 0.0], [0.2, 0.2, 0.6, 0.0],
                     [0.4, 0.4, 0.2, 0.0], [0.25, 0.25, 0.25, 0.25], [0.0, 0.8, 0.2, 0.0],
                     [0.1, 0.1, 0.1, 0.7], [0.5, 0.3, 0.2, 0.0]])  # fmt: skip
    rows = rng.integers(0, len(pool), 90)
    yield "ties", as_predictions(rng.integers(0, 4, 90), probs=pool[rows])
    z = rng.normal(size=(70, 3)) * 2
    yield "logits", as_predictions(rng.integers(0, 3, 70), logits=z)
    p = rng.dirichlet(np.ones(5) * 0.5, 64)
    yield "probs", as_predictions(rng.integers(0, 4, 64), probs=p)  # class 4 never a label


def protocols():
    base = load_calibration_protocol("calibration@1")
    yield "calibration@1", base
    yield "mvcbench-dassl@paper", load_calibration_protocol("mvcbench-dassl@paper")
    yield "mvcbench-vl@paper", load_calibration_protocol("mvcbench-vl@paper")
    yield "variants-left", dataclasses.replace(
        base, edges="left", ece_variant="mvcbench_drops_one",
        mce_variant="mvcbench_count_weighted", ace_variant="mvcbench",
        classwise_variant="mvcbench_present_classes", nll_variant="mvcbench_mean_true_logit",
    )  # fmt: skip
    yield (
        "variants-torchmetrics",
        dataclasses.replace(base, edges="torchmetrics", ace_variant="netcal"),
    )


@pytest.mark.parametrize("case", ["ties", "logits", "probs"])
def test_intervals_equal_the_copying_bootstraps(case):
    pred = dict(cases())[case]
    for name, proto in protocols():
        got = bootstrap_intervals(pred, proto, n_resamples=30)
        want = PINNED[f"{case}|{name}"]
        assert list(got) == list(want)
        for metric in want:
            np.testing.assert_allclose(got[metric], want[metric], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{case} {name} {metric}")  # fmt: skip


@pytest.mark.parametrize("case", ["ties", "logits", "probs"])
def test_every_resample_equals_the_metrics_of_its_copy(case):
    pred = dict(cases())[case]
    rng = np.random.default_rng(1)
    draws = [np.arange(pred.n), *rng.integers(0, pred.n, size=(25, pred.n))]
    for name, proto in protocols():
        resampled = ResampledMetrics(pred, proto)
        for rows in draws:
            want = proto.metrics(pred.subset(rows))
            got = resampled(rows)
            assert list(got) == list(want)
            for metric in want:
                assert got[metric] == pytest.approx(want[metric], rel=RTOL, abs=ATOL), (
                    name,
                    metric,
                )


@pytest.mark.parametrize("spec", ["mvcbench-dassl@paper", "mvcbench-vl@paper"])
def test_scores_mixing_probability_rows_and_logits_are_read_per_resample(spec):
    # MVC-Bench reads a resample as probabilities when all of its rows look like ones: Dassl's
    # evaluator the logits it is handed, the VL evaluator saved probabilities (the VL trainer
    # softmaxes logits first, which always look like probabilities)
    z = np.random.default_rng(2).normal(size=(40, 3))
    z[:39] = np.exp(z[:39]) / np.exp(z[:39]).sum(axis=1, keepdims=True)
    if spec.startswith("mvcbench-vl"):
        z[39] = [0.5, 0.3, 0.2005]  # off by 5e-4: the whole file is softmaxed
        pred = as_predictions(np.arange(40) % 3, probs=z, atol=1e-3)
    else:
        pred = as_predictions(np.arange(40) % 3, logits=z)
    proto = load_calibration_protocol(spec)
    resampled = ResampledMetrics(pred, proto)
    only_probability_rows = np.arange(39).repeat(2)[:40]
    for rows in (np.arange(40), only_probability_rows):
        want = proto.metrics(pred.subset(rows))
        assert resampled(rows) == pytest.approx(want, rel=RTOL, abs=ATOL)
    assert want["ece"] != proto.metrics(pred)["ece"]


def test_resamples_of_the_vl_edge_rows_divide_twice():
    from tests.calibration.test_mvcbench_paths import EDGE_LABELS, EDGE_ROWS

    pred = as_predictions(np.repeat(EDGE_LABELS, 4), probs=np.repeat(EDGE_ROWS, 4, axis=0))
    proto = load_calibration_protocol("mvcbench-vl@paper")
    resampled = ResampledMetrics(pred, proto)
    rng = np.random.default_rng(3)
    for rows in [np.arange(pred.n), *rng.integers(0, pred.n, size=(20, pred.n))]:
        assert resampled(rows) == pytest.approx(
            proto.metrics(pred.subset(rows)), rel=RTOL, abs=ATOL
        )


@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_percentiles_read_off_the_counts_are_numpys(n):
    rng = np.random.default_rng(n)
    jitter = rng.normal(size=n) * 1e-3 * (n % 2)  # ties when n is even
    values = np.sort(rng.choice([0.1, 0.25, 0.3, 0.7, 1.0], n) + jitter)
    levels = np.linspace(0, 100, 11)
    for _ in range(20):
        counts = np.bincount(rng.integers(0, n, n), minlength=n)
        for method in ("linear", "averaged_inverted_cdf"):
            got = percentile_of_counts(values, counts, np.cumsum(counts), levels, method)
            want = np.percentile(np.repeat(values, counts), levels, method=method)
            np.testing.assert_array_equal(got, want)
