"""Report figures (matplotlib, Agg), each written as PNG and SVG.

* :func:`group_bars`: per-group (region, say) mean of one metric per model, with CI whiskers.
* :func:`distributions`: per-model histograms of one metric's per-sample values.
* :func:`heatmap`: model x group (task) means of one metric, annotated.
* :func:`scatter`: one metric against another, per sample, coloured by model.
* :func:`fit_scatter`: one value per model of two sources, labelled, with a fitted line and its
  confidence band (``medibench analyze correlate --out``).
* :func:`small_multiples`: a family of metrics, one bar panel per metric, in one figure.
* :func:`bin_lines`: mean vs bin of a sample property, one line per model with CI bars, one
  panel per metric (``--by-bins``).

Legends sit outside the axes, so they never cover a bar.

Every function takes plain rows or values (from :mod:`medibench.report._tables`), never scores,
and returns the paths it wrote (``[png, svg]``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = [
    "HEAT_CELL_PX",
    "HEAT_MAX_COLUMNS",
    "bin_lines",
    "distributions",
    "fit_scatter",
    "group_bars",
    "heatmap",
    "scatter",
    "small_multiples",
]

#: A heat map's cells are at least this many pixels wide (and 0.6 of it tall) at 100 dpi.
HEAT_CELL_PX = 48
#: Groups per heat-map image; more are split over several images.
HEAT_MAX_COLUMNS = 25

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
        err = _ci_errors(mine, means, metric)
        ax.bar(xs, means, width=width, label=model, yerr=err, capsize=2, ecolor="0.25")
    ax.set_xticks(
        range(len(groups)),
        groups,
        rotation=30 if len(groups) > 4 else 0,
        ha="right" if len(groups) > 4 else "center",
    )
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} by {by} (mean, 95% CI)")
    _legend_outside(ax)
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
        _legend_outside(ax)
    ax.set_xlabel(metric)
    ax.set_ylabel("samples")
    ax.set_title(f"distribution of {metric}")
    return _save(fig, stem)


def heatmap(
    rows: Sequence[Mapping[str, Any]],
    metric: str,
    by: str,
    stem: Path,
    scale: tuple[float, float] | None = None,
) -> list[Path]:
    """Model x ``by`` matrix of ``metric`` means, each value printed in its cell (cells without a
    value left blank). Pass at most :data:`HEAT_MAX_COLUMNS` groups (``_plot_set`` pages them,
    each part with the metric's one colour ``scale``, (low, high); default: this part's range).

    Cells are at least :data:`HEAT_CELL_PX` wide and tall at the figure's size; the axes'
    place in the image goes into ``<stem>.json`` (``rows``, ``cols``, ``axes``: left, bottom,
    right, top as fractions of the image) so a page can check the cells it shows.
    """
    rows = [r for r in rows if r["by"] == by]
    groups = sorted({r["group"] for r in rows})
    models = sorted({r["model"] for r in rows})
    grid = np.full((len(models), len(groups)), np.nan)
    for r in rows:
        if _finite(r.get(metric)):
            grid[models.index(r["model"]), groups.index(r["group"])] = r[metric]
    dpi = plt.rcParams["figure.dpi"]
    cell_w, cell_h = HEAT_CELL_PX / dpi, 0.6 * HEAT_CELL_PX / dpi
    label_w = 0.09 * max((len(m) for m in models), default=4)
    fig, ax = plt.subplots(
        figsize=(max(4.0, 1.9 + label_w + cell_w * len(groups)), 2.2 + cell_h * len(models))
    )
    low, high = scale if scale is not None else (None, None)
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", aspect="auto", vmin=low, vmax=high)
    middle = (
        (low + high) / 2
        if low is not None and high is not None
        else np.nanmean(grid)
        if np.isfinite(grid).any()
        else 0.0
    )
    for (i, j), v in np.ndenumerate(grid):
        if not math.isnan(v):
            color = "white" if v < middle else "black"
            ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=8, color=color)
    ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right")
    ax.set_yticks(range(len(models)), models)
    ax.set_title(f"{metric} by model and {by}")
    fig.colorbar(im, ax=ax, fraction=0.04)
    paths = _save(fig, stem, close=False)
    box = ax.get_position()
    geometry = {
        "rows": len(models),
        "cols": len(groups),
        "axes": [round(box.x0, 4), round(box.y0, 4), round(box.x1, 4), round(box.y1, 4)],
    }
    plt.close(fig)
    stem.with_suffix(".json").write_text(json.dumps(geometry), encoding="utf-8")
    return paths


def small_multiples(
    rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], by: str, title: str, stem: Path
) -> list[Path]:
    """One panel per metric of a family (``metrics``): each model's mean per value of ``by``
    with CI whiskers, in a grid of at most three columns and one legend outside the panels."""
    n = len(metrics)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    groups = sorted({r["group"] for r in rows if r["by"] == by})
    models = sorted({r["model"] for r in rows if r["by"] == by})
    wide = max(2.6, 0.3 * len(groups) * max(1, len(models)) + 0.8)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(wide * ncols + 1.6, 2.4 * nrows + 0.5), squeeze=False
    )
    width = 0.8 / max(1, len(models))
    for ax, metric in zip(axes.flat, metrics, strict=False):
        for i, model in enumerate(models):
            got = {
                r["group"]: r
                for r in rows
                if r["by"] == by and r["model"] == model and _finite(r.get(metric))
            }
            xs = [j + (i - (len(models) - 1) / 2) * width for j, g in enumerate(groups) if g in got]
            mine = [got[g] for g in groups if g in got]
            means = [r[metric] for r in mine]
            err = _ci_errors(mine, means, metric)
            ax.bar(xs, means, width=width, label=model, yerr=err, capsize=2, ecolor="0.25")
        ax.set_xticks(range(len(groups)), groups, rotation=30 if len(groups) > 3 else 0,
                      ha="right" if len(groups) > 3 else "center", fontsize=7)  # fmt: skip
        ax.set_title(metric, fontsize=9)
    return _finish_panels(fig, axes, n, title, stem)


def bin_lines(
    rows: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    labels: Sequence[str],
    title: str,
    stem: Path,
) -> list[Path]:
    """One panel per metric: each model's mean per bin (``rows``: bin rows with ``bin``, the
    bin's index in ``labels``), joined by a line, with CI bars (none for a bin of one value);
    a grid of at most three columns, one legend outside the panels."""
    n = len(metrics)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    models = sorted({r["model"] for r in rows})
    wide = max(2.8, 0.6 * len(labels) + 0.8)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(wide * ncols + 1.6, 2.5 * nrows + 0.5), squeeze=False
    )
    for ax, metric in zip(axes.flat, metrics, strict=False):
        for model in models:
            mine = sorted(
                (r for r in rows if r["model"] == model and _finite(r.get(metric))),
                key=lambda r: r["bin"],
            )
            xs = [r["bin"] for r in mine]
            means = [r[metric] for r in mine]
            err = _ci_errors(mine, means, metric)
            ax.errorbar(xs, means, yerr=err, marker="o", markersize=3, capsize=2, label=model)
        ax.set_xticks(range(len(labels)), labels, rotation=30 if len(labels) > 3 else 0,
                      ha="right" if len(labels) > 3 else "center", fontsize=7)  # fmt: skip
        ax.set_xlim(-0.5, len(labels) - 0.5)
        ax.set_title(metric, fontsize=9)
    return _finish_panels(fig, axes, n, title, stem)


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
    _legend_outside(ax)
    return _save(fig, stem)


def fit_scatter(
    points: Mapping[str, tuple[float, float]],
    line: Mapping[str, Sequence[float]],
    x_label: str,
    y_label: str,
    title: str,
    legend: Sequence[str],
    stem: Path,
) -> list[Path]:
    """One point per model (``points[model] = (x, y)``, the model's name beside it), the line
    ``line["y"]`` at ``line["x"]`` and the band from ``line["low"]`` to ``line["high"]``
    (:meth:`medibench.stats.LinearFit.band`), ``legend`` lines in a box beside the axes.

    What is drawn also goes into ``<stem>.json`` (``points``, ``line``, ``x_label``,
    ``y_label``, ``title``, ``legend``), so a test or a page reads the plotted values."""
    names = list(points)
    xs = [points[m][0] for m in names]
    ys = [points[m][1] for m in names]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.fill_between(line["x"], line["low"], line["high"], color="C0", alpha=0.18, linewidth=0,
                    label=legend[1] if len(legend) > 1 else None)  # fmt: skip
    ax.plot(line["x"], line["y"], color="C0", linewidth=1.5, label=legend[0] if legend else None)
    ax.scatter(xs, ys, s=22, color="C1", zorder=3)
    for name, x, y in zip(names, xs, ys, strict=True):
        ax.annotate(name, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    extra = [plt.Line2D([], [], linestyle="none") for _ in legend[2:]]
    ax.legend([*handles, *extra], [*labels, *legend[2:]], fontsize=7, frameon=False,
              loc="upper left", bbox_to_anchor=(1.01, 1.0))  # fmt: skip
    paths = _save(fig, stem, tight_box=True)
    drawn = {
        "points": {m: [points[m][0], points[m][1]] for m in names},
        "line": {k: [float(v) for v in line[k]] for k in ("x", "y", "low", "high")},
        "x_label": x_label,
        "y_label": y_label,
        "title": title,
        "legend": list(legend),
    }
    stem.with_suffix(".json").write_text(json.dumps(drawn, indent=1), encoding="utf-8")
    return paths


def _ci_errors(rows: Sequence[Mapping[str, Any]], means: list, metric: str) -> np.ndarray:
    """Matplotlib's ``yerr`` (2 x n: below, above) from each row's CI; 0 where it has none."""
    return np.array(
        [
            [m - _or(r.get(f"{metric}_ci_low"), m) for r, m in zip(rows, means, strict=True)],
            [_or(r.get(f"{metric}_ci_high"), m) - m for r, m in zip(rows, means, strict=True)],
        ]
    ).reshape(2, len(means))


def _finish_panels(fig, axes, n: int, title: str, stem: Path) -> list[Path]:
    """A grid of ``n`` metric panels: the unused panels hidden, one legend (the first panel's)
    outside on the right, the title above; saved."""
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    handles, names = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
                   frameon=False)  # fmt: skip
    fig.suptitle(title, fontsize=10)
    return _save(fig, stem, tight_box=True)


def _legend_outside(ax) -> None:
    # Beside the axes, never over the bars or lines it explains.
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _save(fig, stem: Path, *, close: bool = True, tight_box: bool = False) -> list[Path]:
    # ``tight_box``: grow the image to hold artists outside the axes (a figure legend).
    stem.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    box = "tight" if tight_box else None
    fig.savefig(paths[0], bbox_inches=box)
    fig.savefig(paths[1], bbox_inches=box)
    if close:
        plt.close(fig)
    return paths


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _or(v: Any, default: float) -> float:
    return v if _finite(v) else default
