"""Report figures (matplotlib, Agg), each written as PNG and SVG.

* :func:`group_bars`: per-group (region, say) mean of one metric per model, with CI whiskers.
* :func:`distributions`: per-model histograms of one metric's per-sample values.
* :func:`heatmap`: model x group (task) means of one metric, annotated.
* :func:`scatter`: one metric against another, per sample, coloured by model.

Every function takes plain rows or values (from :mod:`medibench.report._tables`), never scores,
and returns the paths it wrote (``[png, svg]``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["distributions", "group_bars", "heatmap", "scatter"]

plt.rcParams.update({"svg.fonttype": "none", "figure.dpi": 100, "font.size": 9})


def group_bars(rows: Sequence[Mapping[str, Any]], metric: str, by: str, stem: Path) -> list[Path]:
    """Bars of ``metric`` per value of ``by`` (leaderboard rows with ``by == by``), one bar per
    model, whiskers from ``<metric>_ci_low`` to ``<metric>_ci_high`` (none when unknown)."""
    rows = [r for r in rows if r["by"] == by and _finite(r.get(metric))]
    groups = sorted({r["group"] for r in rows})
    models = sorted({r["model"] for r in rows})
    fig, ax = plt.subplots(figsize=(max(4.0, 0.5 + 0.35 * len(groups) * len(models)), 3.2))
    width = 0.8 / max(1, len(models))
    for i, model in enumerate(models):
        got = {r["group"]: r for r in rows if r["model"] == model}
        xs = [j + (i - (len(models) - 1) / 2) * width for j, g in enumerate(groups) if g in got]
        mine = [got[g] for g in groups if g in got]
        means = [r[metric] for r in mine]
        err = np.array(
            [
                [m - _or(r.get(f"{metric}_ci_low"), m) for r, m in zip(mine, means, strict=True)],
                [_or(r.get(f"{metric}_ci_high"), m) - m for r, m in zip(mine, means, strict=True)],
            ]
        )
        ax.bar(xs, means, width=width, label=model, yerr=err, capsize=2, ecolor="0.25")
    ax.set_xticks(
        range(len(groups)),
        groups,
        rotation=30 if len(groups) > 4 else 0,
        ha="right" if len(groups) > 4 else "center",
    )
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} by {by} (mean, 95% CI)")
    ax.legend(fontsize=8, frameon=False)
    return _save(fig, stem)


def distributions(values: Mapping[str, Sequence[float]], metric: str, stem: Path) -> list[Path]:
    """Histograms (outlines, shared bins) of each model's finite per-sample ``metric`` values."""
    finite = {m: [v for v in vs if _finite(v)] for m, vs in values.items()}
    allv = [v for vs in finite.values() for v in vs]
    fig, ax = plt.subplots(figsize=(4.5, 3.0))
    if allv:
        lo, hi = min(allv), max(allv)
        bins = np.linspace(lo, hi if hi > lo else lo + 1e-9, 31)
        for model, vs in sorted(finite.items()):
            if vs:
                ax.hist(
                    vs,
                    bins=bins.tolist(),
                    histtype="step",
                    linewidth=1.5,
                    label=f"{model} (n={len(vs)})",
                )
        ax.legend(fontsize=8, frameon=False)
    ax.set_xlabel(metric)
    ax.set_ylabel("samples")
    ax.set_title(f"distribution of {metric}")
    return _save(fig, stem)


def heatmap(rows: Sequence[Mapping[str, Any]], metric: str, by: str, stem: Path) -> list[Path]:
    """Model x ``by`` matrix of ``metric`` means (cells without a value left blank)."""
    rows = [r for r in rows if r["by"] == by]
    groups = sorted({r["group"] for r in rows})
    models = sorted({r["model"] for r in rows})
    grid = np.full((len(models), len(groups)), np.nan)
    for r in rows:
        if _finite(r.get(metric)):
            grid[models.index(r["model"]), groups.index(r["group"])] = r[metric]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 + 0.75 * len(groups)), 1.9 + 0.4 * len(models)))
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", aspect="auto")
    for (i, j), v in np.ndenumerate(grid):
        if not math.isnan(v):
            ax.text(
                j,
                i,
                f"{v:.3g}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if v < np.nanmean(grid) else "black",
            )
    ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right")
    ax.set_yticks(range(len(models)), models)
    ax.set_title(f"{metric} by model and {by}")
    fig.colorbar(im, ax=ax, fraction=0.04)
    return _save(fig, stem)


def scatter(
    points: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    x_metric: str,
    y_metric: str,
    stem: Path,
) -> list[Path]:
    """Per-sample ``y_metric`` against ``x_metric``, one colour per model (finite pairs only;
    points are rasterised in the SVG so 10,000 of them stay light)."""
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    for model, (xs, ys) in sorted(points.items()):
        pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if _finite(x) and _finite(y)]
        if pairs:
            px, py = zip(*pairs, strict=True)
            ax.scatter(px, py, s=8, alpha=0.6, label=model, rasterized=True)
    ax.set_xlabel(x_metric)
    ax.set_ylabel(y_metric)
    ax.set_title(f"{y_metric} vs {x_metric}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, frameon=False)
    return _save(fig, stem)


def _save(fig, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.savefig(paths[0])
    fig.savefig(paths[1])
    plt.close(fig)
    return paths


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _or(v: Any, default: float) -> float:
    return v if _finite(v) else default
