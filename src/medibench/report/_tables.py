"""Leaderboard tables with confidence intervals and counts of what is missing.

:func:`leaderboard` is :func:`~medibench.report.summarize` (the means and their bootstrap
intervals, ``<metric>_ci_low`` / ``<metric>_ci_high``: per sample for group and micro rows,
hierarchical for the macro row, with the protocol's CI settings) broken down by every sample
field that varies, plus two counts next to ``n_missing`` (samples scored as having no output):
``n_unscored`` (samples of the run with no score record for the model under this protocol) and
``n_unjudged`` (samples with an output whose judged metrics are not all filled).

:func:`per_model_values` gives the per-sample values that paired tests and plots use;
:func:`comparisons` runs the paired tests of every pair of models.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from medibench.protocols import Aggregation
from medibench.report._aggregate import (
    Applicable,
    overall_rank,
    per_model_values,
    sample_field,
    summarize,
)
from medibench.report._icl import against_icl_zero
from medibench.samples import Sample, Score
from medibench.stats import compare_models

__all__ = ["BREAKDOWNS", "breakdowns", "comparisons", "leaderboard", "per_model_values"]

#: Sample fields every report breaks the tables down by (when the run has more than one value).
BREAKDOWNS = ("perspective", "task", "region", "modality")

#: Per-sample values of one (model, k mode): ``{sample_id: (has_output, {metric: value})}``.
Values = dict[str, tuple[bool, dict[str, float | None]]]


def breakdowns(samples: Iterable[Sample], aggregation: Aggregation) -> tuple[str, ...]:
    """The protocol's ``group_by`` fields, then those of :data:`BREAKDOWNS` that vary."""
    samples = list(samples)
    out = list(aggregation.group_by)
    for field in BREAKDOWNS:
        if field not in out and len({sample_field(s, field) for s in samples}) > 1:
            out.append(field)
    return tuple(out)


def leaderboard(
    scores: Iterable[Score],
    samples: Mapping[str, Sample],
    aggregation: Aggregation,
    *,
    metrics: Sequence[str],
    judged: Sequence[str] = (),
    by: Sequence[str] | None = None,
    values: Mapping[tuple[str, str], Values] | None = None,
    applicable: Applicable | None = None,
) -> list[dict[str, Any]]:
    """Summary rows with CIs and missing counts (see the module docstring).

    ``by`` replaces the protocol's ``group_by`` (default: :func:`breakdowns`); the CI settings
    are the aggregation's (``ci_resamples``, ``ci_seed``, ``ci_level``). ``values`` are the
    :func:`per_model_values` of the same scores, when the caller has them. Each row is the
    :func:`~medibench.report.summarize` row (``model, k_mode, by, group, n, n_missing``, per
    metric and pass rate ``<m>``, ``<m>_n``, ``<m>_ci_low``, ``<m>_ci_high``) plus
    ``n_unscored`` and ``n_unjudged``.
    """
    fields = tuple(by) if by is not None else breakdowns(samples.values(), aggregation)
    agg = dataclasses.replace(aggregation, group_by=fields)
    if values is None:
        values = per_model_values(scores, samples, agg, metrics, applicable)
    rows = summarize(scores, samples, agg, metrics=metrics, applicable=applicable, values=values)
    sizes = _group_sizes(samples, agg.group_by)
    unjudged: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for (model, label), vals in values.items():
        for sid, (has, v) in vals.items():
            if has and any(v.get(j) is None for j in judged):
                unjudged[(model, label, "all", "")] += 1
                for field in agg.group_by:
                    unjudged[(model, label, field, str(sample_field(samples[sid], field)))] += 1
    for r in rows:
        field, group = r["by"], r["group"]
        total = len(samples) if field == "all" else sizes[field].get(group, 0)
        r["n_unscored"] = total - r["n"] - r["n_missing"]
        key = (r["model"], r["k_mode"], field, "" if field == "all" else group)
        r["n_unjudged"] = unjudged.get(key, 0)
    return ordered(rows)


def ordered(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by grouping (in first-seen order), then group (the overall rows in
    :data:`~medibench.report._aggregate.OVERALL_ORDER`), then model and k mode: one group's
    models sit together, so they read as a comparison."""
    fields = list(dict.fromkeys(r["by"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    k_modes = list(dict.fromkeys(r["k_mode"] for r in rows))
    return sorted(rows, key=lambda r: (
        fields.index(r["by"]), overall_rank(r["group"]) if r["by"] == "all" else 0,
        str(r["group"]), models.index(r["model"]), k_modes.index(r["k_mode"])))  # fmt: skip


def comparisons(
    values: Mapping[tuple[str, str], Values],
    *,
    metrics: Sequence[str],
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    groups: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Paired comparisons (:func:`~medibench.stats.compare_models`) of every pair of
    models, per k mode and metric, on the samples where both have a value; ``k_mode`` first,
    then ``group``: ``all``, and with ``groups`` (sample id -> its task, say) each group's own
    comparison after it. In-context entries are compared K against K = 0 first
    (:mod:`medibench.report._icl`)."""
    rows = []
    parts: dict[str, set[str] | None] = {"all": None}
    if groups and len(set(groups.values())) > 1:
        for value in sorted(set(groups.values())):
            parts[value] = {s for s, g in groups.items() if g == value}
    labels = list(dict.fromkeys(label for _, label in values))
    for label in labels:
        per = {m: v for (m, lab), v in values.items() if lab == label}
        if len(per) < 2:
            continue
        for metric in metrics:
            for group, members in parts.items():
                by_model = {
                    m: {s: vals.get(metric) for s, (_, vals) in v.items()
                        if members is None or s in members}
                    for m, v in per.items()
                }  # fmt: skip
                if sum(any(x is not None for x in d.values()) for d in by_model.values()) < 2:
                    continue
                stats: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed, "level": level}
                pairs = compare_models(by_model, metric=metric, **stats)
                pairs = against_icl_zero(pairs, by_model, metric=metric, **stats)  # K vs K = 0
                rows += [{"k_mode": label, "group": group, **row} for row in pairs]
    return rows


def _group_sizes(samples: Mapping[str, Sample], fields: Sequence[str]) -> dict[str, dict]:
    sizes: dict[str, dict[str, int]] = {f: defaultdict(int) for f in fields}
    for s in samples.values():
        for f in fields:
            sizes[f][str(sample_field(s, f))] += 1
    return sizes
