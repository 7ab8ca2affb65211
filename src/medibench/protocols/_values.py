"""Per-sample metric values of one model under a protocol's aggregation: the k reduction, the
caps, the metrics each sample declares, the missing policy and the pass rates (the first two
steps of :mod:`medibench.report._aggregate`; :mod:`medibench.runs` compares runs with them).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from medibench.protocols._base import Aggregation
from medibench.samples import Sample, Score, sample_field

__all__ = ["Applicable", "Values", "mean_value", "per_sample_values"]

Values = dict[str, float | None]
#: A protocol's ``applicable_metrics``: the metrics that describe a sample, ``None``: all.
Applicable = Callable[[Sample], Iterable[str] | None]


def per_sample_values(
    records: Mapping[str, list[Score]],
    samples: Mapping[str, Sample],
    aggregation: Aggregation,
    how: str,
    metrics: Sequence[str],
    *,
    applicable: Applicable | None = None,
) -> dict[str, tuple[bool, Values]]:
    """``{sample_id: (has_output, {metric: value})}`` after the k reduction and missing policy."""
    out: dict[str, tuple[bool, Values]] = {}
    for sid, recs in records.items():
        ok = sorted((r for r in recs if r.status == "ok"), key=lambda r: r.k)
        if not ok:
            out[sid] = (False, {m: None for m in metrics})
            continue
        if how == "first":
            vals = {m: ok[0].metrics.get(m) for m in metrics}
        else:
            vals = {}
            for m in metrics:
                got = [v for r in ok if (v := r.metrics.get(m)) is not None]
                if not got:
                    vals[m] = None
                elif how == "best":
                    vals[m] = min(got) if m in aggregation.lower_is_better else max(got)
                elif how == "mean":
                    vals[m] = mean_value(got)
                else:
                    raise ValueError(f"unknown k reduction {how!r}: use first, best or mean")
        out[sid] = (True, vals)
    caps = dict(aggregation.caps)
    if caps:
        for _has, vals in out.values():
            for m, cap in caps.items():
                v = vals.get(m)
                if v is not None and v > cap:
                    vals[m] = cap
    for sid, (has, vals) in out.items():
        keep = _declared(applicable, samples[sid])
        if keep is not None:
            out[sid] = (has, {m: v if m in keep else None for m, v in vals.items()})
    if aggregation.missing == "zero":
        observed = _applicable(out, samples)
        for sid, (has, vals) in out.items():
            if not has:
                keep = _declared(applicable, samples[sid])
                if keep is None:
                    keep = observed[sample_field(samples[sid], "perspective")]
                out[sid] = (False, {m: 0.0 if m in keep else None for m in vals})
    for name, metric, threshold in aggregation.pass_rates:
        lower = metric in aggregation.lower_is_better
        for _has, vals in out.values():
            v = vals.get(metric)
            vals[name] = None if v is None else float(v <= threshold if lower else v >= threshold)
    return out


def _declared(applicable: Applicable | None, sample: Sample) -> set[str] | None:
    # The metrics a protocol declares for ``sample``; None: it declares none (hook or answer).
    names = None if applicable is None else applicable(sample)
    return None if names is None else set(names)


def _applicable(values: Mapping[str, tuple[bool, Values]], samples: Mapping[str, Sample]):
    # A metric applies to a perspective when some scored sample of it has a value.
    seen: dict[Any, set[str]] = defaultdict(set)
    for sid, (has, vals) in values.items():
        if has:
            key = sample_field(samples[sid], "perspective")
            seen[key].update(m for m, v in vals.items() if v is not None)
    return seen


def mean_value(values: Sequence[float]) -> float | None:
    """The mean (``math.fsum``), an infinity when one is there, ``None`` for none or both."""
    if not values:
        return None
    if any(math.isinf(v) for v in values):
        pos = any(v == math.inf for v in values)
        neg = any(v == -math.inf for v in values)
        return None if pos and neg else (math.inf if pos else -math.inf)
    return math.fsum(values) / len(values)
