"""The prompt-tuning grid in the report: its tables' columns in plain words and a heat map per
metric.

A heat map shows one metric's mean over seeds x templates (``spread.csv``'s ``<metric>_mean``):
a panel per (backbone, evaluation set), methods as rows and losses as columns, each value
printed in its cell. Every panel of a metric shares one colour scale (the metric's lowest and
highest mean in the grid); a cell without a value is left blank, and a panel (or a metric) with
no value at all is not drawn.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["PLAIN_COLUMNS", "grid_heatmaps", "plain_column"]

#: The grid tables' column names as the report shows them.
PLAIN_COLUMNS = {
    "set": "evaluation set",
    "runs": "runs (seeds x templates)",
    "ece_std_over_seeds": "ECE, SD over seeds",
    "ece_std_over_templates": "ECE, SD over templates",
    "tau": "Kendall's tau",
    "pvalue": "p-value",
    "n": "settings ranked",
    **{
        f"{m}_{stat}": f"{label}, {word}"
        for m, label in (("accuracy", "accuracy"), ("ece", "ECE"), ("mce", "MCE"), ("ace", "ACE"))
        for stat, word in (("mean", "mean"), ("std", "SD"))
    },
}

_METRICS = (("accuracy", "accuracy"), ("ece", "ECE"), ("mce", "MCE"), ("ace", "ACE"))


def plain_column(name: str) -> str:
    """``name`` (a grid table's key) in plain words; a key with no plain name stays as it is."""
    return PLAIN_COLUMNS.get(name, name)


def grid_heatmaps(spread: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A report-panel figure per metric with a value (:mod:`medibench.report._panels`):
    ``{"title", "svg", "data"}``; ``data`` holds ``kind`` (``"grid-heatmap"``), ``metric``,
    ``scale`` (``"low,high"``) and ``drawn``: ``{"backbone / set": {method: {loss: value}}}``
    as JSON, read back from the drawn images (the blank cells left out)."""
    figures = []
    for metric, label in _METRICS:
        key = f"{metric}_mean"
        rows = [r for r in spread if _finite(r.get(key))]
        if not rows:
            continue
        panels: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            panels.setdefault(f"{r['backbone']} / {r['set']}", []).append(r)
        scale = (min(r[key] for r in rows), max(r[key] for r in rows))
        svg, drawn = _draw(panels, key, label, scale)
        figures.append(
            {
                "title": f"{label}: mean over seeds and templates, by method and loss (one colour "
                f"scale, {scale[0]:.4f} to {scale[1]:.4f}; blank: no value)",
                "svg": svg,
                "data": {
                    "kind": "grid-heatmap",
                    "metric": metric,
                    "scale": f"{scale[0]!r},{scale[1]!r}",
                    "drawn": json.dumps(drawn),
                },
            }
        )
    return figures


def _draw(
    panels: dict[str, list[dict[str, Any]]], key: str, label: str, scale: tuple[float, float]
) -> tuple[str, dict[str, dict[str, dict[str, float]]]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = sorted(panels)
    ncols = min(3, len(names))
    nrows = math.ceil(len(names) / ncols)
    methods = list(dict.fromkeys(r["method"] for rows in panels.values() for r in rows))
    losses = list(dict.fromkeys(r["loss"] for rows in panels.values() for r in rows))
    size = (1.6 + 0.9 * len(losses), 1.2 + 0.35 * len(methods))
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols + 1.2, size[1] * nrows),
                             squeeze=False)  # fmt: skip
    low, high = scale
    middle = (low + high) / 2
    drawn: dict[str, dict[str, dict[str, float]]] = {}
    image: Any = None
    for ax, name in zip(axes.flat, names, strict=False):
        grid = np.full((len(methods), len(losses)), np.nan)
        for r in panels[name]:
            grid[methods.index(r["method"]), losses.index(r["loss"])] = r[key]
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=low, vmax=high,
                          aspect="auto")  # fmt: skip
        shown = image.get_array()
        drawn[name] = {}
        for (i, j), v in np.ndenumerate(grid):
            if math.isnan(v):
                continue
            value = float(shown[i, j])
            drawn[name].setdefault(methods[i], {})[losses[j]] = value
            ax.text(j, i, f"{value:.3f}", ha="center", va="center", fontsize=7,
                    color="white" if value < middle else "black")  # fmt: skip
        ax.set_xticks(range(len(losses)), losses, rotation=20, ha="right", fontsize=7)
        ax.set_yticks(range(len(methods)), methods, fontsize=7)
        ax.set_title(name, fontsize=8)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(f"{label} (mean over seeds and templates)", fontsize=9)
    fig.tight_layout()
    fig.colorbar(image, ax=list(axes.flat[: len(names)]), fraction=0.03)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :], drawn


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)
