"""Protocol-aware aggregation: score records -> per-sample values -> group means, micro and macro.

Three steps, each set by the protocol's :class:`~medibench.protocols.Aggregation`:

1. **k reduction**, per (model, sample): ``first`` takes the record of the lowest k that has an
   output; ``best`` takes, per metric, the best value over the outputs; ``mean`` averages them.
2. **missing outputs**: a sample with no output at all is left out of the means (``skip``) or
   counts 0 for every metric that applies to its perspective (``zero``, MieDB's scripts). Either
   way it is counted in ``n_missing``. A metric that is ``None`` on a scored record (not
   computable, not judged) is left out of that metric's mean, never counted as 0.
3. **grouping**: per value of each ``group_by`` field, the per-sample (micro) mean; an overall
   ``all`` row (micro); and, with ``macro_over``, an overall macro row: the mean over groups of
   the first field of the means over groups of the next field, and so on. A group row of a
   ``macro_over`` field with fields below it is itself the macro mean over those (PaintBench: a
   category is the mean of its task means); so is a group row of a ``macro_within`` field (a
   PaintBench visual condition: the mean of its task means). Samples named by ``outside`` appear
   only in their own group rows (and in those of the ``outside_also`` fields); a ``skip_empty``
   field gets no row for its empty value.
4. **common ground**: when the models of a k mode have outputs for different samples, two more
   overall rows per model: ``common``, over the samples every model has an output for (the
   headline: one n for all, so no mean mixes in samples another model lacks), and
   ``unpaired``, over the model's other samples. The ``micro`` row stays each model's mean
   over its own samples (what the papers' scripts report).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from medibench.protocols import Aggregation
from medibench.protocols._values import Applicable, Values, per_sample_values
from medibench.protocols._values import mean_value as _mean
from medibench.samples import Sample, Score, sample_field

__all__ = ["per_model_values", "per_sample_values", "sample_field", "summarize"]


def summarize(
    scores: Iterable[Score],
    samples: Mapping[str, Sample],
    aggregation: Aggregation,
    *,
    metrics: Sequence[str],
    applicable: Applicable | None = None,
    values: Mapping[tuple[str, str], dict[str, tuple[bool, Values]]] | None = None,
) -> list[dict[str, Any]]:
    """Summary rows, one per (model, k mode, grouping, group).

    Each row: ``model``, ``k_mode`` (the label, e.g. ``"@1"``), ``by`` (the field, ``"all"`` for
    the overall rows), ``group`` (its value; ``"micro"`` or ``"macro over region"`` for the
    overall rows), ``n`` (samples with an output), ``n_missing`` (samples without), then one key
    per metric and per pass rate: the mean (``None`` when no sample has a value), ``<metric>_n``
    (how many samples have a value) and, with CIs on, ``<metric>_ci_low`` / ``_ci_high``.

    ``applicable(sample)`` (a protocol's ``applicable_metrics``) names the metrics that describe
    a sample: only those count in its means and are zero-filled under ``missing="zero"``.
    Without it, a metric applies to a perspective when some scored sample of it has a value.
    ``values``: the :func:`per_model_values` of the same arguments, when the caller has them.
    """
    within = dict(aggregation.macro_within)
    fields = (*aggregation.group_by, *aggregation.macro_over, *within)
    for field in (*fields, *(f for below in within.values() for f in below)):
        if not field.startswith("metadata.") and field not in Sample.model_fields:
            raise ValueError(
                f"cannot group by {field!r}: use a sample field (perspective, task, region, "
                "modality, benchmark, split) or metadata.<key>"
            )
    names = list(metrics) + [name for name, _, _ in aggregation.pass_rates]
    if values is None:
        values = per_model_values(scores, samples, aggregation, metrics, applicable)
    rows: list[dict[str, Any]] = []
    # (row, its samples, the fields its macro mean and hierarchical CI run over)
    planned: list[tuple[dict[str, Any], list[str], tuple[str, ...]]] = []
    outside = aggregation.outside
    for (model, label), per_sample in values.items():
        for by in aggregation.group_by:
            groups: dict[str, list[str]] = defaultdict(list)
            for sid in per_sample:
                if by in aggregation.outside_also or _in_grouping(samples[sid], by, outside):
                    groups[str(sample_field(samples[sid], by))].append(sid)
            below = _below(aggregation.macro_over, by) or tuple(within.get(by, ()))
            for group in sorted(groups):
                if group == "" and by in aggregation.skip_empty:
                    continue
                row = _row(model, label, by, group, groups[group], per_sample, names)
                for m in names if below else ():
                    row[m] = _macro(groups[group], per_sample, samples, below, m)
                rows.append(row)
                planned.append((row, groups[group], below))
        overall = [s for s in per_sample if _in_grouping(samples[s], "all", outside)]
        micro = _row(model, label, "all", "micro", overall, per_sample, names)
        rows.append(micro)
        planned.append((micro, overall, ()))
        if aggregation.macro_over:
            macro = _row(
                model,
                label,
                "all",
                "macro over " + " > ".join(aggregation.macro_over),
                overall,
                per_sample,
                names,
            )
            for m in names:
                macro[m] = _macro(overall, per_sample, samples, aggregation.macro_over, m)
            rows.append(macro)
            planned.append((macro, overall, aggregation.macro_over))
    for row, sids in _common_rows(values, samples, outside, names):
        rows.append(row)
        planned.append((row, sids, ()))
    if aggregation.ci_resamples > 0:
        for row, sids, hierarchy in planned:
            per_sample = values[(row["model"], row["k_mode"])]
            _add_cis(row, sids, hierarchy, per_sample, samples, aggregation, names)
    return rows


#: The overall rows' groups, in the order the tables show them: the models on the samples they
#: all have first (the headline), then each model on its own samples, then what it has alone.
OVERALL_ORDER = ("common", "micro", "macro", "unpaired")


def overall_rank(group: str) -> int:
    """A row's place among the overall rows (:data:`OVERALL_ORDER`; ``macro over ...`` as
    ``macro``)."""
    first = group.split(" ")[0]
    return OVERALL_ORDER.index(first) if first in OVERALL_ORDER else len(OVERALL_ORDER)


def _common_rows(
    values: Mapping[tuple[str, str], dict[str, tuple[bool, Values]]],
    samples: Mapping[str, Sample],
    outside: Sequence[tuple[str, str]],
    names: Sequence[str],
) -> list[tuple[dict[str, Any], list[str]]]:
    """When models of one k mode have outputs for different samples: per model, a ``common``
    row over the samples every model has an output for (one n for all) and an ``unpaired`` row
    over its other samples, so no headline mean mixes in samples another model lacks."""
    out: list[tuple[dict[str, Any], list[str]]] = []
    for label in dict.fromkeys(lab for _, lab in values):
        mine = {m: v for (m, lab), v in values.items() if lab == label}
        if len(mine) < 2:
            continue
        had = {
            m: {s for s, (has, _) in v.items() if has and _in_grouping(samples[s], "all", outside)}
            for m, v in mine.items()
        }
        common = set.intersection(*had.values())
        if all(h == common for h in had.values()):
            continue
        for model, per_sample in mine.items():
            shared = sorted(common)
            out.append((_row(model, label, "all", "common", shared, per_sample, names), shared))
            extra = sorted(had[model] - common)
            if extra:
                out.append((_row(model, label, "all", "unpaired", extra, per_sample, names), extra))
    return out


def per_model_values(
    scores: Iterable[Score], samples: Mapping[str, Sample], aggregation: Aggregation,
    metrics: Sequence[str], applicable: Applicable | None = None,
) -> dict[tuple[str, str], dict[str, tuple[bool, Values]]]:  # fmt: skip
    """``{(model, k label): per-sample values}`` after the protocol's k reduction and
    missing policy (:func:`per_sample_values`), pass rates included; models in name order,
    k modes in the aggregation's. Each is a :class:`~medibench.protocols._values.ValueColumns`
    (the same mapping, held as columns: 100,000 samples cost a few MB)."""
    by_model: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    names = tuple(metrics)
    for s in scores:  # what the k reduction reads of each record, not the record
        if s.sample_id in samples:
            values = tuple(s.metrics.get(m) for m in names)
            by_model[s.model or ""][s.sample_id].append(_Kept(s.k, s.status, values, names))
    return {
        (model, label): per_sample_values(
            by_model[model], samples, aggregation, how, metrics, applicable=applicable
        )
        for model in sorted(by_model)
        for label, how in aggregation.k_modes
    }


class _Kept(NamedTuple):
    """What :func:`per_sample_values` reads of a score record: its k, status and the values
    of the metrics summarised (a tuple, not the record's dict: a third of the memory)."""

    k: int
    status: str
    values: tuple[float | None, ...]
    names: tuple[str, ...]

    @property
    def metrics(self) -> dict[str, float | None]:
        return dict(zip(self.names, self.values, strict=True))


def _row(model, label, by, group, sids, values, names) -> dict[str, Any]:
    row: dict[str, Any] = {
        "model": model,
        "k_mode": label,
        "by": by,
        "group": group,
    }
    looked_up = [values[s] for s in sids]  # once per sample, not per metric
    row["n"] = sum(has for has, _ in looked_up)
    row["n_missing"] = len(looked_up) - row["n"]
    for m in names:
        got = [v for _, vals in looked_up if (v := vals.get(m)) is not None]
        row[m] = _mean(got)
        row[f"{m}_n"] = len(got)
    return row


def _add_cis(row, sids, hierarchy, values, samples, aggregation, names) -> None:
    """``<metric>_ci_low`` / ``<metric>_ci_high``: bootstrap CI of the row's mean (``None``
    from fewer than two values, from values that are all equal, or with an infinite one),
    from the per-sample ``values`` of its ``sids`` (in ``ci_order``); hierarchical over the
    ``hierarchy`` fields when there are any."""
    from medibench.stats._bootstrap import bootstrap_ci, hierarchical_bootstrap_ci

    if aggregation.ci_order:
        sids = sorted(sids, key=lambda s: _order_key(samples[s], aggregation.ci_order))
    opts = dict(
        n_resamples=aggregation.ci_resamples, seed=aggregation.ci_seed, level=aggregation.ci_level
    )
    looked_up = [(s, values[s][1]) for s in sids]  # once per sample, not per metric
    for m in names:
        present = [(s, v) for s, vals in looked_up if (v := vals.get(m)) is not None]
        vals = [v for _, v in present]
        if len(vals) < 2 or any(math.isinf(v) for v in vals):  # n=1: no spread to resample
            row[f"{m}_ci_low"] = row[f"{m}_ci_high"] = None
            continue
        if min(vals) == max(vals):  # all equal: no spread either, never a [v, v] interval
            row[f"{m}_ci_low"] = row[f"{m}_ci_high"] = None
            continue
        if hierarchy:
            keys = [tuple(sample_field(samples[s], f) for f in hierarchy) for s, _ in present]
            low, high = hierarchical_bootstrap_ci(vals, keys, **opts)
        else:
            low, high = bootstrap_ci(vals, **opts)
        row[f"{m}_ci_low"], row[f"{m}_ci_high"] = low, high


def _in_grouping(sample: Sample, by: str, outside: Sequence[tuple[str, str]]) -> bool:
    """Whether ``sample`` enters the rows grouped by ``by`` (``"all"``: the overall rows)."""
    for field, value in outside:
        if str(sample_field(sample, field)) == value:
            return field == by
    return True


def _below(hierarchy: Sequence[str], field: str) -> tuple[str, ...]:
    """The ``macro_over`` fields under ``field`` (``()`` when it is the last or not in it)."""
    return tuple(hierarchy[hierarchy.index(field) + 1 :]) if field in hierarchy else ()


def _order_key(sample: Sample, fields: Sequence[str]) -> tuple:
    # Numbers sort numerically (problem 10 after 9), everything else as text.
    key = []
    for f in fields:
        v = sample_field(sample, f)
        is_number = isinstance(v, (int, float)) and not isinstance(v, bool)
        key.append((0, float(v), "") if is_number else (1, 0.0, str(v)))
    return tuple(key)


def _macro(sids, values, samples, hierarchy, metric) -> float | None:
    if not hierarchy:
        return _mean([v for s in sids if (v := values[s][1].get(metric)) is not None])
    groups: dict[Any, list[str]] = defaultdict(list)
    for s in sids:
        groups[sample_field(samples[s], hierarchy[0])].append(s)
    means = [_macro(g, values, samples, hierarchy[1:], metric) for g in groups.values()]
    return _mean([m for m in means if m is not None])
