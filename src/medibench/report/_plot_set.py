"""Which figures a protocol section gets: per-region bars, distributions, heat maps, a scatter.

For the first k mode of the protocol: a bar chart with CI whiskers per metric by region (or the
protocol's first grouping when the run has one region), a histogram per metric, a model x task
heat map per metric, and one metric-vs-metric scatter (a judged metric against the ROI metric
when a judge has filled one; otherwise context preservation against ROI fidelity).
"""

from __future__ import annotations

from concurrent.futures import Executor
from pathlib import Path

from medibench.report import _plots

__all__ = ["describe", "draw", "plan", "run", "scatter_pair"]

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
    return [
        {
            "kind": t[0],
            "title": t[1],
            "png": p[0].relative_to(out).as_posix(),
            "svg": p[1].relative_to(out).as_posix(),
        }
        for t, p in zip(tasks, paths, strict=True)
    ]


def draw(task: tuple) -> list[Path]:
    """Draw one planned figure; return its ``[png, svg]`` paths."""
    _, _, fn, args = task
    return getattr(_plots, fn)(*args)


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
    for m in plotted if bar_by else []:
        stem = folder / f"bars_{bar_by}_{m}"
        add("bars", f"{m} by {bar_by} ({label})", "group_bars", slim, m, bar_by, stem)
    for m in plotted:
        per_model = {
            model: [vals.get(m) for has, vals in v.values() if has] for model, v in values.items()
        }
        stem = folder / f"dist_{m}"
        add("distribution", f"distribution of {m} ({label})", "distributions", per_model, m, stem)
    for m in plotted if heat_by else []:
        stem = folder / f"heat_{heat_by}_{m}"
        add("heatmap", f"{m} by model and {heat_by} ({label})", "heatmap", slim, m, heat_by, stem)
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


def _ci_keys(metrics: list[str]) -> list[str]:
    return [k for m in metrics for k in (m, f"{m}_ci_low", f"{m}_ci_high")]
