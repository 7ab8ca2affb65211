"""Which figures a protocol section gets: per-region bars, distributions, heat maps, a scatter.

For the first k mode of the protocol: a bar chart with CI whiskers per metric by region (or the
protocol's first grouping when the run has one region), a histogram per metric, a model x task
heat map per metric (split into images of at most 25 tasks), and one metric-vs-metric scatter (a
judged metric against the ROI metric when a judge has filled one; otherwise context
preservation against ROI fidelity).

A protocol with more than :data:`MAX_SINGLE_METRICS` metrics (MedGEN-Bench's thirty) gets one
figure per metric *family* instead (:func:`metric_families`): bars as small multiples, and heat
maps only for the family's first metric, so eight samples no longer make a hundred plots.

An in-context run (entries ``MODEL@icl-K``) also gets the score-vs-K figure
(:func:`medibench.report._icl.score_vs_k`): each model's overall mean against K with CI bars.

With ``--by-bins``, a figure per property: mean vs bin per model with CI bars, a panel per
metric (above :data:`MAX_SINGLE_METRICS`, the metrics of no family and each family's first:
PaintBench's iou, edit and preservation accuracy, cie76_0; every value is in the table).
"""

from __future__ import annotations

import json
from concurrent.futures import Executor
from pathlib import Path

from medibench.report import _icl, _plots

__all__ = ["describe", "draw", "plan", "run", "scatter_pair"]

#: Above this many plotted metrics a section draws one figure per metric family.
MAX_SINGLE_METRICS = 8

_PREFERRED_Y = ("roi_ssim", "roi_psnr", "ssim", "dice")
_PREFERRED_PAIRS = (("cp", "roi_ssim"), ("cp", "ssim"), ("cp_psnr", "psnr"))


def run(tasks: list[tuple], out: Path, pool: Executor | None = None) -> list[dict[str, str]]:
    """Draw planned figures (each on ``pool`` when given); return ``[{"kind", "title", "png",
    "svg"}]`` with paths relative to ``out``, in plan order."""
    drawing = [pool.submit(draw, t) for t in tasks] if pool is not None else None
    return describe(
        tasks, [f.result() for f in drawing] if drawing else [draw(t) for t in tasks], out
    )


def describe(tasks: list[tuple], paths: list[list[Path]], out: Path) -> list[dict[str, str]]:
    """The page's figure entries for drawn ``tasks``."""
    entries = []
    for t, p in zip(tasks, paths, strict=True):
        entry = {
            "kind": t[0],
            "title": t[1],
            "png": p[0].relative_to(out).as_posix(),
            "svg": p[1].relative_to(out).as_posix(),
            "wide": t[2] in ("heatmap", "small_multiples", "bin_lines"),
        }
        geometry = p[0].with_suffix(".json")
        if t[0] == "heatmap" and geometry.is_file():
            entry["geometry"] = json.loads(geometry.read_text(encoding="utf-8"))
        entries.append(entry)
    return entries


def draw(task: tuple) -> list[Path]:
    """Draw one planned figure; return its ``[png, svg]`` paths."""
    _, _, fn, args = task
    return (getattr(_plots, fn, None) or getattr(_icl, fn))(*args)


def plan(sec, out: Path) -> list[tuple]:
    """``sec``'s figures as ``(kind, title, function name, args)`` tasks, drawn under
    ``out/plots/<label>/``: bars for every metric, then distributions, heat maps, a scatter."""
    if not sec.rows:
        return []
    label = sec.aggregation.k_modes[0][0]
    rows = [r for r in sec.rows if r["k_mode"] == label]
    fields = list(dict.fromkeys(r["by"] for r in rows if r["by"] != "all"))
    folder = out / "plots" / sec.label
    figs: list[tuple] = []
    values = {m: v for (m, lab), v in sec.values.items() if lab == label}
    plotted = [m for m in sec.shown_metrics if any(_plots._finite(r.get(m)) for r in rows)]

    def add(kind: str, title: str, fn: str, *args) -> None:
        figs.append((kind, title, fn, args))

    bar_by = "region" if "region" in fields else (fields[0] if fields else None)
    heat_by = "task" if "task" in fields else bar_by
    keep = ("model", "by", "group", *_ci_keys(plotted))
    slim = [{k: r.get(k) for k in keep} for r in rows if r["by"] in (bar_by, heat_by)]
    families = (
        metric_families(plotted, sec.judged, [n for n, _, _ in sec.aggregation.pass_rates])
        if len(plotted) > MAX_SINGLE_METRICS
        else {m: [m] for m in plotted}
    )
    for fam, members in families.items() if bar_by else []:
        stem = folder / f"bars_{bar_by}_{_slug(fam)}"
        if len(members) == 1:
            add("bars", f"{fam} by {bar_by} ({label})", "group_bars", slim, fam, bar_by, stem)
        else:
            title = f"{fam}: {len(members)} metrics by {bar_by} (mean, 95% CI; {label})"
            add("bars", title, "small_multiples", slim, members, bar_by, title, stem)
    for m in (members[0] for members in families.values()):
        per_model = {
            model: [vals.get(m) for has, vals in v.values() if has] for model, v in values.items()
        }
        stem = folder / f"dist_{m}"
        add("distribution", f"distribution of {m} ({label})", "distributions", per_model, m, stem)
    heat_rows = [r for r in slim if r["by"] == heat_by]
    heat_groups = sorted({r["group"] for r in heat_rows})
    for m in (members[0] for members in families.values()) if heat_by else []:
        # only the groups where the metric has a value; every part on the metric's one scale
        valued = [r for r in heat_rows if _plots._finite(r.get(m))]
        groups = sorted({r["group"] for r in valued})
        if not groups:
            continue
        scale = (min(r[m] for r in valued), max(r[m] for r in valued))
        without = [g for g in heat_groups if g not in set(groups)]
        note = f"; no value for {heat_by} {', '.join(without)}" if without else ""
        size = _plots.HEAT_MAX_COLUMNS
        pages = [groups[i : i + size] for i in range(0, len(groups), size)]
        for p, page in enumerate(pages):
            part = [r for r in heat_rows if r["group"] in set(page)]
            suffix = f"_{p + 1}" if len(pages) > 1 else ""
            of = f", part {p + 1} of {len(pages)}" if len(pages) > 1 else ""
            stem = folder / f"heat_{heat_by}_{m}{suffix}"
            title = f"{m} by model and {heat_by} ({label}{of}{note})"
            add("heatmap", title, "heatmap", part, m, heat_by, stem, scale)
    for table in getattr(sec, "bins", []):  # --by-bins: mean vs bin, per model
        mine = [r for r in table.rows if r["k_mode"] == label]
        shown = [m for m in plotted if any(_plots._finite(r.get(m)) for r in mine)]
        if len(shown) > MAX_SINGLE_METRICS:  # the lone metrics, and each family's first
            fams = metric_families(shown, sec.judged, [n for n, _, _ in sec.aggregation.pass_rates])
            chosen = {m for f, ms in fams.items() for m in (ms if f == "metrics" else ms[:1])}
            shown = [m for m in shown if m in chosen]
        if shown:
            slim_bins = [{k: r.get(k) for k in ("model", "bin", *_ci_keys(shown))} for r in mine]
            ci = f"{sec.aggregation.ci_level:.0%} CI"
            title = f"{sec.label} ({label}): mean by {table.spec.prop} bin, {ci}"
            stem = folder / f"bins_{_slug(table.spec.prop)}"
            add("bins", f"by {table.spec.prop} ({label})", "bin_lines", slim_bins, shown,
                table.labels, title, stem)  # fmt: skip
    curves = _icl.k_curves(rows, [members[0] for members in families.values()])
    if curves:  # an in-context run: each model's mean against K (K = 0 included when run)
        ci = f"{sec.aggregation.ci_level:.0%} CI"
        title = f"{sec.label} ({label}): mean vs K in-context demonstrations, {ci}"
        add("icl", f"score vs K ({label})", "score_vs_k", curves, title, folder / "score_vs_k")
    pair = scatter_pair(plotted, sec.judged)
    if pair:
        x, y = pair
        points = {
            model: (
                [vals.get(x) for has, vals in v.values() if has],
                [vals.get(y) for has, vals in v.values() if has],
            )
            for model, v in values.items()
        }
        stem = folder / f"scatter_{x}_{y}"
        add("scatter", f"{y} vs {x} ({label})", "scatter", points, x, y, stem)
    return figs


def scatter_pair(metrics: list[str], judged: list[str]) -> tuple[str, str] | None:
    """``(x, y)``: a judged metric against the ROI metric, else a preferred pair, else the first
    two metrics with values; ``None`` with fewer than two."""
    have = set(metrics)
    for j in judged:
        if j in have:
            y = next(
                (m for m in _PREFERRED_Y if m in have and m not in judged),
                next((m for m in metrics if m not in judged), None),
            )
            if y:
                return j, y
    for x, y in _PREFERRED_PAIRS:
        if x in have and y in have:
            return x, y
    return (metrics[0], metrics[1]) if len(metrics) >= 2 else None


def metric_families(
    metrics: list[str], judged: list[str], pass_rates: list[str]
) -> dict[str, list[str]]:
    """``{family: metrics}`` in ``metrics`` order: the pass rates, the judged metrics, then one
    family per name prefix (``entity_*``); prefixes with a single metric share one family."""
    fams: dict[str, list[str]] = {}
    for m in metrics:
        if m in pass_rates or m.endswith("_pass_rate"):
            key = "pass rates"
        elif m in judged:
            key = "judged"
        else:
            key = m.split("_")[0]
        fams.setdefault(key, []).append(m)
    merged: dict[str, list[str]] = {}
    singles = [ms[0] for ms in fams.values() if len(ms) == 1]
    for key, ms in fams.items():
        if len(ms) > 1:
            merged[key] = ms
        elif len(singles) == 1:
            merged[ms[0]] = ms
    if len(singles) > 1:
        merged["metrics"] = singles
    return merged


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)


def _ci_keys(metrics: list[str]) -> list[str]:
    return [k for m in metrics for k in (m, f"{m}_ci_low", f"{m}_ci_high")]
