"""Ranking stability (Kendall tau) and prompt/seed sensitivity."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from medibench.calibration import as_predictions
from medibench.calibration.analysis import (
    domain_ranking_stability,
    ranking_stability,
    sensitivity,
)
from medibench.calibration.metrics import expected_calibration_error
from medibench.stats import kendall
from tests.calibration.conftest import make_logits


def test_kendall_tau_by_hand():
    a = {"m1": 1.0, "m2": 2.0, "m3": 3.0, "m4": 4.0, "only_a": 9.0}
    b = {"m1": 1.0, "m2": 3.0, "m3": 2.0, "m4": 4.0}
    res = ranking_stability(a, b)
    assert res["n"] == 4 and res["methods"] == ["m1", "m2", "m3", "m4"]
    assert res["tau"] == pytest.approx(4 / 6)  # 5 concordant pairs, 1 discordant
    assert res["tau"] == pytest.approx(kendall([1, 2, 3, 4], [1, 3, 2, 4]))
    assert res["pvalue"] == pytest.approx(kendalltau([1, 2, 3, 4], [1, 3, 2, 4]).pvalue)
    assert np.isnan(ranking_stability({"m": 1.0}, {"m": 2.0})["tau"])


def stacked(scales: dict[str, float], domains=("in", "shifted"), n=300):
    """Predictions of several methods (a logit scale each) in several domains."""
    logits, labels, method, domain = [], [], [], []
    for d_i, d in enumerate(domains):
        z, y = make_logits(n, 3, seed=10 + d_i)
        for m, s in scales.items():
            logits.append(z * s * (1.0 + 0.3 * d_i))
            labels.append(y)
            method += [m] * n
            domain += [d] * n
    return as_predictions(
        np.concatenate(labels),
        logits=np.concatenate(logits),
        groups={"method": np.array(method), "domain": np.array(domain)},
    )


def test_domain_ranking_stability():
    pred = stacked({"a": 0.5, "b": 1.0, "c": 1.5, "d": 2.5})
    res = domain_ranking_stability(
        pred, method_column="method", domain_column="domain", reference="in"
    )
    rows = (pred.groups["method"] == "c") & (pred.groups["domain"] == "shifted")
    sub = pred.subset(rows)
    assert res["values"]["shifted"]["c"] == pytest.approx(
        expected_calibration_error(sub.probs, sub.labels)
    )
    want = ranking_stability(res["values"]["in"], res["values"]["shifted"])
    assert res["domains"]["shifted"] == want
    assert -1.0 <= want["tau"] <= 1.0 and want["n"] == 4
    with pytest.raises(ValueError, match="no rows with domain == 'lab'"):
        domain_ranking_stability(
            pred, method_column="method", domain_column="domain", reference="lab"
        )


def test_sensitivity_spread():
    pred = stacked({"t1": 1.0, "t2": 1.4, "t3": 2.0}, domains=("in",))
    res = sensitivity(pred, "method")
    vals = res["groups"][""]["values"]
    for t in ("t1", "t2", "t3"):
        sub = pred.subset(pred.groups["method"] == t)
        assert vals[t] == pytest.approx(expected_calibration_error(sub.probs, sub.labels))
    arr = np.array(list(vals.values()))
    g = res["groups"][""]
    assert g["std"] == pytest.approx(arr.std(ddof=1)) and g["range"] == pytest.approx(np.ptp(arr))
    assert g["min"] <= g["mean"] <= g["max"]
    within = sensitivity(stacked({"t1": 1.0, "t2": 2.0}), "method", within=["domain"])
    assert sorted(within["groups"]) == ["in", "shifted"]
    with pytest.raises(ValueError, match="unknown metric 'auc'"):
        sensitivity(pred, "method", metric="auc")
