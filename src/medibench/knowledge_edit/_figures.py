"""Figures of ``medibench edit analyze`` and ``medibench edit sweep`` (matplotlib, Agg; each
written as PNG and SVG, through the report's saver).

* :func:`pca_picture`: one editor's states at one layer, before and after each edit, on the
  first two principal components of all of them.
* :func:`shift_lines`: per layer, the mean pre/post cosine and the linear CKA of each editor,
  with their CIs.
* :func:`sweep_heatmap`: one metric's mean over seeds per grid cell, its interval (or ``n=1``)
  printed in the cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.collections import LineCollection

from medibench.report._plots import _save, plt
from medibench.stats import interval_text

__all__ = ["pca_picture", "shift_lines", "sweep_heatmap"]

_KIND_COLOURS = {"request": "#000000", "reliability": "#1b9e77", "generality": "#7570b3",
                 "locality": "#d95f02"}  # fmt: skip


def pca_picture(items: Sequence[Mapping[str, Any]], pre: np.ndarray, post: np.ndarray,
                fired: np.ndarray | None, title: str, stem: Path) -> list[Path]:  # fmt: skip
    """Items' states before (hollow circles) and after (filled triangles) their edit, joined by
    a line, coloured by kind, on the two leading principal components of the states before and
    after together (centred, by SVD). ``fired`` (memory editors): locality probes the memory
    fires on are ringed in red after the edit."""
    both = np.concatenate([pre, post])
    centred = both - both.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:2].T if vt.shape[0] >= 2 else np.eye(both.shape[1], 2)
    flat = centred @ axes
    a, b = flat[: len(pre)], flat[len(pre) :]
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    kinds = [str(it["kind"]) for it in items]
    moves = np.stack([a[:, :2], b[:, :2]], axis=1)  # one segment per item, before to after
    ax.add_collection(LineCollection(moves, colors="#bbbbbb", linewidths=0.6, zorder=1))
    for kind, colour in _KIND_COLOURS.items():
        rows = [i for i, k in enumerate(kinds) if k == kind]
        if not rows:
            continue
        ax.scatter(a[rows, 0], a[rows, 1], facecolors="none", edgecolors=colour, s=26,
                   label=f"{kind} (before)", zorder=2)  # fmt: skip
        ax.scatter(b[rows, 0], b[rows, 1], color=colour, marker="^", s=26,
                   label=f"{kind} (after)", zorder=3)  # fmt: skip
    if fired is not None:
        rows = [i for i, k in enumerate(kinds) if k == "locality" and fired[i]]
        if rows:
            ax.scatter(b[rows, 0], b[rows, 1], facecolors="none", edgecolors="red", s=90,
                       lw=1.2, label="memory fires (locality)", zorder=4)  # fmt: skip
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, stem, tight_box=True)


def shift_lines(editors: Sequence[Mapping[str, Any]], stem: Path) -> list[Path]:
    """Two panels (pre/post cosine, linear CKA) against the layer, one line per editor (its
    ``label`` and ``by_layer`` rows), CI bars where there is an interval."""
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.2))
    for e in editors:
        rows = e["by_layer"]
        x = [r["layer"] for r in rows]
        for ax, key in zip(axes, ("cosine", "cka"), strict=True):
            y = [np.nan if r[key] is None else r[key] for r in rows]
            err = np.array([[0.0, 0.0] if r[f"{key}_ci"] is None or r[key] is None else
                            [r[key] - r[f"{key}_ci"][0], r[f"{key}_ci"][1] - r[key]]
                            for r in rows]).T  # fmt: skip
            ax.errorbar(x, y, yerr=err, marker="o", ms=3, capsize=2, label=e["label"])
    for ax, name in zip(axes, ("mean cosine, before vs after", "linear CKA, before vs after"),
                        strict=True):  # fmt: skip
        ax.set_xlabel("decoder layer")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(sorted({r["layer"] for e in editors for r in e["by_layer"]}))
    axes[1].legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("representation shift per layer", fontsize=10)
    return _save(fig, stem, tight_box=True)


def sweep_heatmap(rows: Sequence[Mapping[str, Any]], metric: str, stem: Path) -> list[Path]:
    """``metric``'s mean over seeds per grid cell: ``row`` labels down, ``col`` labels across
    (each of ``rows`` one cell with those labels, ``metric``, ``<metric>_ci_low``,
    ``<metric>_ci_high`` and ``<metric>_n``); the interval, or ``n=1``, under each value. A cell
    without a value (undefined for every seed) says so."""
    down = list(dict.fromkeys(str(r["row"]) for r in rows))
    across = list(dict.fromkeys(str(r["col"]) for r in rows))
    grid = np.full((len(down), len(across)), np.nan)
    text = {}
    for r in rows:
        i, j = down.index(str(r["row"])), across.index(str(r["col"]))
        value = r[metric]
        if value is None:
            text[i, j] = "undefined"
            continue
        grid[i, j] = value
        ci = interval_text(r[f"{metric}_ci_low"], r[f"{metric}_ci_high"], r[f"{metric}_n"], ".2f")
        text[i, j] = f"{value:.3f}\n{ci}"
    fig, ax = plt.subplots(figsize=(1.9 + 1.3 * len(across), 1.5 + 0.7 * len(down)))
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for (i, j), label in text.items():
        dark = not np.isnan(grid[i, j]) and grid[i, j] < 0.5
        ax.text(j, i, label, ha="center", va="center", fontsize=7,
                color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(across)), across)
    ax.set_yticks(range(len(down)), down)
    ax.set_title(f"{metric}: mean over seeds [95% CI]", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.05)
    return _save(fig, stem)
