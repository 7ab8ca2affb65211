"""``calibration@1``: declared settings, values equal to the metric functions, per-group
results and bootstrap intervals drawn as medibench.stats draws them."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.calibration import (
    METRIC_NAMES,
    as_predictions,
    load_calibration_protocol,
    score,
)
from medibench.calibration import metrics as M


def test_calibration_1_declares_and_records_its_settings(overconfident):
    res = score(overconfident, n_resamples=0)
    assert res["protocol"] == "calibration@1"
    assert (res["protocol_name"], res["protocol_version"]) == ("calibration", "1")
    s = res["settings"]
    assert (s["ece_bins"], s["mce_bins"], s["ace_bins"], s["classwise_bins"]) == (15,) * 4
    assert s["edges"] == "right" and s["ace_variant"] == "equal_mass" and s["quirks"] == []
    p, y = overconfident.probs, overconfident.labels
    assert res["ece"] == M.expected_calibration_error(p, y, n_bins=15)
    assert res["mce"] == M.maximum_calibration_error(p, y, n_bins=15)
    assert res["ace"] == M.adaptive_calibration_error(p, y, n_bins=15)
    assert res["classwise_ece"] == M.classwise_ece(p, y, n_bins=15)
    assert res["brier"] == M.brier_score(p, y)
    assert res["nll"] == pytest.approx(M.negative_log_likelihood(p, y, logits=overconfident.logits))
    assert res["smooth_ece"] == pytest.approx(M.smooth_ece(p, y), abs=1e-5)
    assert res["ece"] > 0.1  # the fixture is over-confident by construction


def test_bins_override_and_protocol_lookup(overconfident):
    res = score(overconfident, "calibration", n_bins=10, n_resamples=0)
    assert res["settings"]["ece_bins"] == 10
    assert res["ece"] == M.expected_calibration_error(
        overconfident.probs, overconfident.labels, n_bins=10
    )
    assert load_calibration_protocol("mvcbench").spec == "mvcbench-dassl@paper"
    with pytest.raises(KeyError, match="calibration@1"):
        load_calibration_protocol("calibraton@1")


def test_groups_are_scored_on_their_own_samples(overconfident):
    res = score(overconfident, by=["domain"], n_resamples=0)
    assert sorted(res["groups"]) == ["a", "b"]
    rows = overconfident.groups["domain"] == "b"
    sub = overconfident.subset(rows)
    assert res["groups"]["b"]["n"] == int(rows.sum()) == 200
    assert res["groups"]["b"]["by"] == {"domain": "b"}
    assert res["groups"]["b"]["ece"] == M.expected_calibration_error(sub.probs, sub.labels)
    with pytest.raises(ValueError, match="no group column 'site'"):
        score(overconfident, by=["site"], n_resamples=0)


def test_bootstrap_intervals_resample_as_medibench_stats_does(overconfident):
    res = score(overconfident, n_resamples=50)
    proto = load_calibration_protocol("calibration@1")
    rng = np.random.default_rng(42)  # medibench.stats.bootstrap_ci's draws
    idx = rng.integers(0, overconfident.n, size=(50, overconfident.n))
    values = [proto.metrics(overconfident.subset(r)) for r in idx]
    for name in METRIC_NAMES:
        want = np.percentile([v[name] for v in values], [2.5, 97.5])
        np.testing.assert_allclose(res["ci"][name], want, rtol=1e-12)


def test_bootstrap_in_chunks_gives_the_same_intervals(overconfident):
    # issue 28: chunked resampling (bounded memory) draws today's resamples exactly
    from medibench.calibration.protocols import bootstrap_intervals, load_calibration_protocol

    for spec in ("calibration@1", "mvcbench@paper"):
        proto = load_calibration_protocol(spec)
        whole = bootstrap_intervals(overconfident, proto, n_resamples=40)
        chunked = bootstrap_intervals(
            overconfident, proto, n_resamples=40, max_entries=overconfident.n + 1
        )
        assert chunked == whole and set(whole) == set(proto.metric_names)


@pytest.mark.slow
def test_a_million_rows_are_bootstrapped_not_refused():
    # 1,000,000 x 10 used to be refused ("1,000,000,000 indices (limit 50,000,000)"); each
    # resample row is now drawn alone when it is longer than the bound
    rng = np.random.default_rng(0)
    pred = as_predictions(rng.integers(0, 10, 1_000_000), logits=rng.normal(size=(1_000_000, 10)))
    res = score(pred, "calibration@1", n_resamples=2)
    assert res["ci"]["ece"][0] <= res["ci"]["ece"][1] and res["n"] == 1_000_000
