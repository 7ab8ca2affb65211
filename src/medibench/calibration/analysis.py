"""Analyses across settings: does a method ranking survive a domain shift, and how much does a
calibration value move with the prompt template or the seed.

* :func:`ranking_stability`: Kendall's tau-b (``scipy.stats.kendalltau``, the statistic of
  :func:`medibench.stats.kendall`) with its two-sided p-value between two scorings of the same
  methods (in-domain against shifted), over the methods both score.
* :func:`domain_ranking_stability`: the same from one predictions file with a method column and
  a domain column: each method's metric in the reference domain against every other domain.
* :func:`sensitivity`: a metric per value of a column (``template``, ``seed``), optionally
  within groups (per method), and its spread: mean, sample standard deviation, min, max, range.

Why a model is miscalibrated (its top-two logit margins against ECE, per group) is
:mod:`medibench.calibration.margins` (``medibench calibration analyze``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from medibench.calibration._inputs import Predictions
from medibench.calibration.protocols import CalibrationProtocol, load_calibration_protocol

__all__ = ["domain_ranking_stability", "ranking_stability", "sensitivity"]


def ranking_stability(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, Any]:
    """Kendall tau-b and p-value of the methods' values in ``a`` against ``b``.

    Returns ``{"tau", "pvalue", "n", "methods"}`` (``tau`` and ``pvalue`` NaN when fewer than
    two methods are shared or one side is constant).
    """
    from scipy.stats import kendalltau

    methods = sorted(set(a) & set(b))
    x = np.array([a[m] for m in methods], dtype=np.float64)
    y = np.array([b[m] for m in methods], dtype=np.float64)
    tau = pvalue = math.nan
    if len(methods) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
        res = kendalltau(x, y)
        tau, pvalue = float(res.statistic), float(res.pvalue)
    return {"tau": tau, "pvalue": pvalue, "n": len(methods), "methods": methods}


def domain_ranking_stability(
    pred: Predictions,
    *,
    method_column: str,
    domain_column: str,
    reference: str,
    metric: str = "ece",
    protocol: str | CalibrationProtocol = "calibration@1",
) -> dict[str, Any]:
    """Per shifted domain, :func:`ranking_stability` of the methods' ``metric`` against the
    ``reference`` domain. Returns ``{"reference", "metric", "values": {domain: {method: v}},
    "domains": {domain: ranking_stability(...)}}``."""
    values = _metric_table(pred, [domain_column, method_column], metric, protocol)
    by_domain: dict[str, dict[str, float]] = {}
    for (domain, method), v in values.items():
        by_domain.setdefault(domain, {})[method] = v
    if reference not in by_domain:
        raise ValueError(
            f"{pred.source}: no rows with {domain_column} == {reference!r} "
            f"(domains: {', '.join(sorted(by_domain))})"
        )
    domains = {
        d: ranking_stability(by_domain[reference], v)
        for d, v in sorted(by_domain.items())
        if d != reference
    }
    return {"reference": reference, "metric": metric, "values": by_domain, "domains": domains}


def sensitivity(
    pred: Predictions,
    column: str,
    *,
    metric: str = "ece",
    within: Sequence[str] = (),
    protocol: str | CalibrationProtocol = "calibration@1",
) -> dict[str, Any]:
    """The ``metric`` for each value of ``column`` and its spread, per group of ``within``.

    Returns ``{"column", "metric", "groups": {group: {"values": {value: v}, "mean", "std",
    "min", "max", "range"}}}`` (the group key ``""`` without ``within``; ``std`` with ``ddof=1``,
    NaN for a single value).
    """
    keys = [*within, column]
    table = _metric_table(pred, keys, metric, protocol)
    grouped: dict[str, dict[str, float]] = {}
    for key, v in table.items():
        grouped.setdefault("/".join(key[:-1]), {})[key[-1]] = v
    out = {}
    for group, vals in sorted(grouped.items()):
        arr = np.array(list(vals.values()))
        out[group] = {
            "values": vals,
            "mean": float(arr.mean()),
            "std": float(arr.std(ddof=1)) if arr.size > 1 else math.nan,
            "min": float(arr.min()),
            "max": float(arr.max()),
            "range": float(np.ptp(arr)),
        }
    return {"column": column, "metric": metric, "groups": out}


def _metric_table(
    pred: Predictions, by: list[str], metric: str, protocol: str | CalibrationProtocol
) -> dict[tuple[str, ...], float]:
    from medibench.calibration.protocols import METRIC_NAMES

    if metric not in METRIC_NAMES:
        raise ValueError(f"unknown metric {metric!r} (one of {', '.join(METRIC_NAMES)})")
    proto = load_calibration_protocol(protocol)
    out = {}
    for values, rows in pred.group_keys(by):
        part = pred.subset(rows, source=f"{pred.source} [{'/'.join(values)}]")
        out[values] = proto.metrics(part)[metric]
    return out
