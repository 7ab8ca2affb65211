"""Scores by bins of a sample property (``score`` / ``report --by-bins PROP=EDGES``).

For each property (:mod:`medibench.datasets.properties`) and each model and k mode of a
protocol, on the per-sample values after the protocol's k reduction and missing policy (a
``missing="zero"`` protocol's missing outputs count 0, as in its other rows):

* a **bin row** per bin: ``by`` = the property, ``group`` = the bin (``"[0, 0.01)"``; a
  categorical property's level), ``bin_low`` / ``bin_high`` (numeric bins), ``n``,
  ``n_missing`` and per metric the mean over the bin's samples (micro: not the protocol's macro
  average), ``<metric>_n`` and the percentile bootstrap CI with the protocol's resamples, seed,
  level and value order (:func:`medibench.stats.bootstrap_ci`); a bin with one value has no
  interval (``None``; shown ``n=1``), never one of zero width;
* a **trend row** per metric: ``group = "trend"``, ``test = "spearman"``, ``rho`` and its
  two-sided ``p`` (:func:`medibench.stats.trend_test`) of the metric with the property over the
  binned samples (a categorical level counts as its index), ``n`` the pairs; ``note`` says why
  rho is undefined (fewer than 3 pairs, a constant side).

Bins are half-open ``[a, b)`` but the last, which is closed. Samples with no value of the
property, outside every bin, or set apart by the protocol (``outside``: PaintBench's
``preservation`` task) enter no bin and no trend test: each count is a note, never dropped
silently.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table
from rich.text import Text

from medibench.datasets.properties import (
    PropertyError,
    SampleProperty,
    find_property,
    property_values,
)
from medibench.protocols import Aggregation
from medibench.protocols._values import Applicable, Values
from medibench.report._aggregate import _add_cis, _in_grouping, _row, per_model_values
from medibench.samples import Sample, Score
from medibench.stats import assign_bins, bin_labels, check_edges, trend_test

__all__ = [
    "BinSpec",
    "BinTable",
    "bin_matrix",
    "bin_tables",
    "bins_caption",
    "bins_panel",
    "bins_table",
    "check_specs",
    "parse_bins",
]

#: The trend test's name in rows, tables and captions.
TREND_TEST = "spearman"


@dataclass(frozen=True)
class BinSpec:
    """One ``--by-bins``: the property and its edges (``None``: a categorical property)."""

    prop: str
    edges: tuple[float, ...] | None = None

    @property
    def text(self) -> str:
        """As it was given: ``mask_fraction=0,0.01,1`` or ``color_scheme``."""
        if self.edges is None:
            return self.prop
        return f"{self.prop}={','.join(f'{e:g}' for e in self.edges)}"


@dataclass
class BinTable:
    """One property's breakdown of one protocol's scores (module docstring)."""

    spec: BinSpec
    labels: list[str]
    counts: list[int]
    rows: list[dict[str, Any]] = field(default_factory=list)
    trend: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def parse_bins(text: str) -> BinSpec:
    """``"PROP=E0,E1,..."`` (numeric bins) or ``"PROP"`` (a categorical property's levels).

    Raises:
        ValueError: no property name, an edge that is not a number, fewer than two edges,
            edges that do not increase strictly; each naming the option's text.
    """
    name, sep, edges = text.partition("=")
    name = name.strip()
    if not name:
        raise ValueError(f"--by-bins {text!r}: give PROP=EDGES, e.g. mask_fraction=0,0.05,1")
    if not sep:
        return BinSpec(name)
    values = []
    for part in edges.split(","):
        try:
            values.append(float(part))
        except ValueError:
            raise ValueError(
                f"--by-bins {text!r}: edge {part.strip()!r} is not a number "
                "(edges: comma-separated numbers, increasing)"
            ) from None
    return BinSpec(name, check_edges(values, name=f"--by-bins {text!r}"))


def check_specs(specs: Sequence[BinSpec], samples: Iterable[Sample]) -> None:
    """Refuse, before any work, a spec naming an unknown property (the error lists those of
    ``samples``' benchmarks), edges for a categorical property or none for a numeric one
    (:class:`~medibench.datasets.properties.PropertyError`)."""
    benchmarks = {s.benchmark for s in samples}
    for spec in specs:
        _check_kind(spec, find_property(spec.prop, benchmarks))


def bin_tables(
    scores: Iterable[Score], samples: Mapping[str, Sample], aggregation: Aggregation, *,
    metrics: Sequence[str], specs: Sequence[BinSpec], applicable: Applicable | None = None,
    values: Mapping[tuple[str, str], dict[str, tuple[bool, Values]]] | None = None,
) -> list[BinTable]:  # fmt: skip
    """One :class:`BinTable` per spec (module docstring) of the scores of one protocol.

    Raises:
        PropertyError: an unknown property (listing the available ones), edges for a
            categorical property or none for a numeric one, a property value that cannot be
            computed (:class:`~medibench.datasets.properties.PropertyError`).
    """
    names = list(metrics) + [name for name, _, _ in aggregation.pass_rates]
    if values is None:
        values = per_model_values(scores, samples, aggregation, metrics, applicable)
    scored = {sid for per_sample in values.values() for sid in per_sample}
    kept = [s for sid, s in samples.items() if sid in scored]
    inside = [s for s in kept if _in_grouping(s, "all", aggregation.outside)]
    return [
        _table(spec, inside, len(kept) - len(inside), values, samples, aggregation, names)
        for spec in specs
    ]


def bins_table(table: BinTable, *, label: str, aggregation: Aggregation) -> Table:
    """The breakdown as a rich table: a row per (model, metric), a column per bin (mean and
    CI), then the trend test."""
    columns, rows = bin_matrix(table, several_k=len(aggregation.k_modes) > 1)
    # Text, not markup: "[a, b]" in a caption or a bin's name is not a rich style tag.
    out = Table(
        title=Text(f"{label} by {table.spec.prop}"),
        caption=Text(bins_caption(aggregation, table.spec)),
    )
    for c in columns:
        left = c in ("model", "k", "metric")
        out.add_column(Text(c), justify="left" if left else "right", no_wrap=True)
    for r in rows:
        out.add_row(*(Text(cell) for cell in r))
    return out


def bins_panel(sections: Sequence[Any]) -> dict[str, Any]:
    """The report's "Diagnostics by factor" panel (:mod:`medibench.report._panels`): each
    protocol section's breakdowns as :func:`bin_matrix` tables, with their notes."""
    tables = []
    for sec in sections:
        agg = sec.aggregation
        for t in sec.bins:
            columns, rows = bin_matrix(t, several_k=len(agg.k_modes) > 1)
            tables.append(
                {
                    "title": f"{sec.label} by {t.spec.prop}",
                    "columns": columns,
                    "rows": rows,
                    "notes": [
                        bins_caption(agg, t.spec), *t.notes,
                        f"every value: tables/{sec.label}/bins_{t.spec.prop}.csv (and .json)",
                    ],
                }
            )  # fmt: skip
    return {
        "id": "bins",
        "title": "Diagnostics by factor",
        "summary": f"{len(tables)} breakdown(s)",
        "tables": tables,
    }


def bin_matrix(table: BinTable, *, several_k: bool = False) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)`` of text: ``model``, (``k``), ``metric``, one column per bin
    (``"label (n=N)"``; cells ``mean [low, high]``, ``mean (n=1)`` or ``-``), ``rho``, ``p``."""
    bins = [f"{lab} (n={n})" for lab, n in zip(table.labels, table.counts, strict=True)]
    columns = ["model", *(["k"] if several_k else []), "metric", *bins, "rho", "p"]
    rows = []
    for t in table.trend:
        m = t["metric"]
        mine = [r for r in table.rows if (r["model"], r["k_mode"]) == (t["model"], t["k_mode"])]
        cells = [_mean_cell(r, m) for r in mine]
        rho = "-" if t["rho"] is None else f"{t['rho']:.3f}"
        p = "-" if t["p"] is None else f"{t['p']:.3g}"
        rows.append([t["model"], *([t["k_mode"]] if several_k else []), m, *cells, rho, p])
    return columns, rows


def _table(spec, inside, n_set_apart, values, samples, aggregation, names) -> BinTable:
    props, prop = property_values(inside, spec.prop)
    _check_kind(spec, prop)
    ids = list(props)
    if spec.edges is None:
        labels = list(prop.levels)
        x = {sid: float(labels.index(str(props[sid]))) for sid in ids}
        index = {sid: int(x[sid]) for sid in ids}
    else:
        labels = bin_labels(spec.edges)
        x = {sid: float(props[sid]) for sid in ids}
        found = assign_bins([x[sid] for sid in ids], spec.edges)
        index = {sid: int(i) for sid, i in zip(ids, found, strict=True) if i >= 0}
    counts = [sum(i == b for i in index.values()) for b in range(len(labels))]
    out = BinTable(spec, labels, counts)
    out.notes = _notes(spec, prop, inside, props, index, n_set_apart, aggregation)
    for (model, label), per_sample in values.items():
        for b, group in enumerate(labels):
            sids = [s for s in per_sample if index.get(s) == b]
            row = _row(model, label, spec.prop, group, sids, per_sample, names)
            row["bin"] = b
            if spec.edges is not None:
                row["bin_low"], row["bin_high"] = spec.edges[b], spec.edges[b + 1]
            if aggregation.ci_resamples > 0:
                _add_cis(row, sids, (), per_sample, samples, aggregation, names)
                for m in names:  # one value has no spread: no interval, never a zero-width one
                    if row[f"{m}_n"] < 2:
                        row[f"{m}_ci_low"] = row[f"{m}_ci_high"] = None
            out.rows.append(row)
        binned = [s for s in per_sample if s in index]
        for m in names:
            if not any(per_sample[s][1].get(m) is not None for s in binned):
                continue
            out.trend.append(_trend(model, label, spec.prop, m, binned, per_sample, x))
    return out


def _check_kind(spec: BinSpec, prop: SampleProperty) -> None:
    """Edges for a numeric property, none for a categorical one."""
    if prop.categorical and spec.edges is not None:
        raise PropertyError(
            f"--by-bins {spec.text!r}: {spec.prop} is categorical (levels "
            f"{', '.join(prop.levels)}): give it without edges, --by-bins {spec.prop}"
        )
    if not prop.categorical and spec.edges is None:
        raise PropertyError(
            f"--by-bins {spec.text!r}: {spec.prop} is numeric: give its bin edges, e.g. "
            f"--by-bins {spec.prop}=0,0.05,0.2,1"
        )


def _trend(model, label, prop, metric, sids, per_sample, x) -> dict[str, Any]:
    pairs = [(x[s], v) for s in sids if (v := per_sample[s][1].get(metric)) is not None]
    row: dict[str, Any] = {
        "model": model, "k_mode": label, "by": prop, "group": "trend", "test": TREND_TEST,
        "metric": metric, "n": len(pairs), "rho": None, "p": None, "note": None,
    }  # fmt: skip
    try:
        res = trend_test([p for p, _ in pairs], [v for _, v in pairs])
    except ValueError as exc:
        row["note"] = str(exc).removeprefix("correlation: ")
        return row
    row["rho"], row["p"] = res.statistic, res.pvalue
    return row


def _notes(spec, prop, inside, props, index, n_set_apart, aggregation) -> list[str]:
    notes = []
    if n_set_apart:
        apart = ", ".join(f"{f}={v}" for f, v in aggregation.outside)
        notes.append(
            f"{spec.prop}: {n_set_apart} sample(s) of {apart} are left out, as the protocol "
            "reports them on their own"
        )
    none = [s.sample_id for s in inside if s.sample_id not in props]
    if none:
        notes.append(
            f"{spec.prop}: {len(none)} of {len(inside)} samples have no value ({prop.help}) "
            f"and enter no bin: {_some(none)}"
        )
    out = [sid for sid in props if sid not in index]
    if out:
        low, high = f"{spec.edges[0]:g}", f"{spec.edges[-1]:g}"
        notes.append(
            f"{spec.prop}: {len(out)} sample(s) lie outside the edges [{low}, {high}] and enter "
            f"no bin nor the trend test: {_some(out)}"
        )
    return notes


def _mean_cell(row: dict[str, Any], metric: str) -> str:
    v = row.get(metric)
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    low, high = row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high")
    if row.get(f"{metric}_n") == 1:
        return f"{v:.3f} (n=1)"
    if low is None or high is None:
        return f"{v:.3f}"
    return f"{v:.3f} [{low:.3f}, {high:.3f}]"


def bins_caption(aggregation: Aggregation, spec: BinSpec) -> str:
    """What a breakdown's numbers are (its tables' caption)."""
    if spec.edges is None:
        edges = "one column per level, in order (the trend test counts level i as i)"
    else:
        edges = "bins [a, b), the last [a, b]"
    return (
        f"mean over the bin's samples [{aggregation.ci_level:.0%} bootstrap CI, "
        f"{aggregation.ci_resamples} resamples, seed {aggregation.ci_seed}; none for one value]; "
        f"{edges}; rho, p: Spearman correlation of the per-sample value with the property "
        "(two-sided)"
    )


def _some(ids: list[str], most: int = 5) -> str:
    more = f" and {len(ids) - most} more" if len(ids) > most else ""
    return ", ".join(ids[:most]) + more
