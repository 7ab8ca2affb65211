"""Summary rows as rich tables for the terminal (``medibench score``, ``run``, ``demo``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table

from medibench.protocols import Aggregation
from medibench.report._aggregate import overall_rank
from medibench.stats import interval_text

__all__ = ["summary_tables", "format_value"]


def summary_tables(
    rows: Sequence[dict],
    *,
    label: str,
    aggregation: Aggregation,
    metrics: Sequence[str],
    judged: Sequence[str] = (),
) -> list[Table]:
    """One table per grouping (one per perspective for ``perspective``), then an overall table
    in long form (a row per model and metric, with the mean, its CI and how many samples have no
    value; ``judged`` metrics are listed even before any judgement, so missing ones show)."""
    agg = aggregation
    names = [*metrics, *(n for n, _, _ in agg.pass_rates)]
    several_k = len(agg.k_modes) > 1
    missing = "count as 0" if agg.missing == "zero" else "are left out of the means"
    caption = f"samples without an output {missing} (column 'missing'); micro = mean over samples"
    if agg.macro_over:
        caption += ", macro = mean over groups"
    if agg.caps:
        caption += "; in means " + ", ".join(f"{m} is capped at {c:g}" for m, c in agg.caps)
    overall_caption = (
        caption + "; n = samples with a value of the metric; no value = samples with an output "
        "but no value (not computable, or not judged yet: see the records' error)"
    )
    tables = []
    for by in agg.group_by:
        sub = [r for r in rows if r["by"] == by]
        parts: list[tuple[str | None, list[dict]]]
        if by == "perspective":  # per-perspective leaderboards: their metrics differ
            parts = [(g, [r for r in sub if r["group"] == g]) for g in _unique(sub)]
        else:
            parts = [(None, sub)]
        for group, part in parts:
            shown = [m for m in names if any(r.get(m) is not None for r in part)]
            title = f"{group} ({label})" if group else f"{label} by {by}"
            table = Table(title=title, caption=caption)
            cols = [
                "model",
                *(["k"] if several_k else []),
                *([] if group else [by]),
                "n",
                "missing",
                *shown,
            ]
            for col in cols:
                table.add_column(
                    col, justify="left" if col in ("model", by, "k") else "right", no_wrap=True
                )
            for r in sorted(part, key=lambda r: (r["group"], r["model"], r["k_mode"])):
                table.add_row(
                    r["model"],
                    *([r["k_mode"]] if several_k else []),
                    *([] if group else [str(r["group"])]),
                    str(r["n"]),
                    str(r["n_missing"]),
                    *[format_value(r.get(m)) for m in shown],
                )
            tables.append(table)
    overall = [r for r in rows if r["by"] == "all"]
    if any(r["group"] == "common" for r in overall):
        overall_caption += (
            "; common = the samples every model has an output for (compare these), micro = each "
            "model's own samples, unpaired = those only some models have"
        )
    ci = f"{agg.ci_level:.0%} CI" if agg.ci_resamples else "CI"
    table = Table(title=f"{label} overall", caption=overall_caption)
    for col in [
        "model",
        *(["k"] if several_k else []),
        "average",
        "metric",  # the last key column: a table split to fit repeats model, average, metric
        "missing",
        "n",
        "no value",
        "mean",
        ci,
    ]:
        table.add_column(
            col,
            justify="right" if col in ("n", "missing", "no value", "mean") else "left",
            no_wrap=True,
        )
    for r in sorted(overall, key=lambda r: (overall_rank(r["group"]), r["group"], r["model"],
                                            r["k_mode"])):  # fmt: skip
        for m in names:
            if r.get(m) is None and m not in judged:
                continue
            low, high = r.get(f"{m}_ci_low"), r.get(f"{m}_ci_high")
            n = r.get(f"{m}_n")
            if r.get(m) is not None and isinstance(n, int) and n < 2:
                interval = interval_text(low, high, n)  # "n=1": never a zero-width interval
            elif low is None:
                interval = "-"
            else:
                interval = f"[{format_value(low)}, {format_value(high)}]"
            table.add_row(
                r["model"],
                *([r["k_mode"]] if several_k else []),
                r["group"],
                m,
                str(r["n_missing"]),
                str(r.get(f"{m}_n", "")),
                str(max(0, r["n"] - r.get(f"{m}_n", 0))),
                format_value(r[m]),
                interval,
            )
    tables.append(table)
    return tables


def format_value(v) -> str:
    """4 decimals below 10, 2 above; ``inf``; ``-`` for no value."""
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.4f}" if abs(v) < 10 else f"{v:.2f}"


def _unique(rows: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(r["group"] for r in rows))
