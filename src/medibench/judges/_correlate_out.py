"""What ``medibench analyze correlate`` shows of a :class:`~medibench.judges.correlate.
CorrelateResult`: its three tables as text cells (printed by the command, written as markdown),
and with ``--out DIR`` the figure of each pair (the per-model values, the least-squares line and
its confidence band, :meth:`medibench.stats.LinearFit.band`) and ``DIR/correlate.md``."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "BAND_POINTS",
    "METHOD_NAMES",
    "correlation_cells",
    "fit_cells",
    "value_cells",
    "write_correlate_folder",
]

#: Points of the fitted line and its band across the range of the first source.
BAND_POINTS = 101
METHOD_NAMES = {"spearman": "Spearman rho", "kendall": "Kendall tau-b", "pearson": "Pearson r"}
MARKDOWN = "correlate.md"

Cells = tuple[list[str], list[list[str]]]


def value_cells(result) -> Cells:
    """Model rows: each source's value (and, for per-sample sources, the samples behind it)."""
    columns = ["model", *(f"{s.label} ({s.metric})" for s in result.sources)]
    rows = []
    for row in result.model_rows():
        cells = [row["model"]]
        for s in result.sources:
            n = row[f"{s.label}_n"]
            cells.append(f"{row[s.label]:.4g}" + ("" if s.samples is None else f" ({n})"))
        rows.append(cells)
    return columns, rows


def correlation_cells(result) -> Cells:
    """A row per pair and method: the coefficient, its p-value and how, both intervals."""
    columns = ["pair", "statistic", "value", "p", "p by", "CI models", "CI samples"]
    rows = []
    for p in result.pairs:
        for i, (method, c) in enumerate(p.correlations.items()):
            low, high, _ = p.samples_ci.get(method, (None, None, 0))
            rows.append(
                [
                    f"{p.a} vs {p.b}" if i == 0 else "",
                    METHOD_NAMES[method],
                    f"{c.statistic:.3f}",
                    f"{c.pvalue:.3g}",
                    c.pvalue_method,
                    _interval(c.ci_low, c.ci_high),
                    _interval(low, high),
                ]
            )
    return columns, rows


def fit_cells(result) -> Cells:
    """A row per pair with a fit: slope, intercept, R^2, the slope's p-value and its stderr."""
    columns = ["pair", "slope", "intercept", "R^2", "p (slope)", "stderr"]
    rows = [
        [
            f"{p.a} vs {p.b}",
            f"{p.fit.slope:.4g}",
            f"{p.fit.intercept:.4g}",
            f"{p.fit.r_squared:.3f}",
            f"{p.fit.pvalue:.3g}",
            f"{p.fit.stderr:.3g}",
        ]
        for p in result.pairs
        if p.fit is not None
    ]
    return columns, rows


def write_correlate_folder(result, out: Path) -> list[Path]:
    """``out/<A>-vs-<B>.png`` (and ``.svg``, and ``.json``: the values drawn) for every pair
    with a fit, and ``out/correlate.md`` (the three tables and the figures); returns the PNGs
    and the markdown file. The band's level is the result's ``level`` setting."""
    from medibench.io import atomic_write_text
    from medibench.report._plots import fit_scatter

    out.mkdir(parents=True, exist_ok=True)
    level = float(result.settings.get("level", 0.95))
    by_label = {s.label: s for s in result.sources}
    written: list[Path] = []
    figures: list[tuple[str, str]] = []
    taken: set[str] = set()
    for p in result.pairs:
        if p.fit is None:
            continue
        a, b = by_label[p.a], by_label[p.b]
        stem = _stem(f"{p.a}-vs-{p.b}", taken)
        x = np.array([a.values[m] for m in p.models])
        grid = np.linspace(x.min(), x.max(), BAND_POINTS)
        band = p.fit.band(grid, level)
        line = {"x": grid, "y": p.fit.intercept + p.fit.slope * grid,
                "low": band[:, 0], "high": band[:, 1]}  # fmt: skip
        title = f"{p.b} vs {p.a} across {len(p.models)} models"
        png, _svg = fit_scatter(
            {m: (a.values[m], b.values[m]) for m in p.models},
            line,
            f"{a.label} ({a.metric})",
            f"{b.label} ({b.metric})",
            title,
            _legend(p, level),
            out / stem,
        )
        written.append(png)
        figures.append((title, png.name))
    md = out / MARKDOWN
    atomic_write_text(md, _markdown(result, figures))
    return [*written, md]


def _legend(pair, level: float) -> list[str]:
    f = pair.fit
    lines = [
        f"least squares: y = {f.intercept:.4g} + {f.slope:.4g} x",
        f"{level:.0%} confidence band of the line",
        f"R^2 = {f.r_squared:.3f}, p (slope) = {f.pvalue:.3g}",
    ]
    for method, c in pair.correlations.items():
        lines.append(f"{METHOD_NAMES[method]} = {c.statistic:.3f}, p = {c.pvalue:.3g}")
    return lines


def _markdown(result, figures: list[tuple[str, str]]) -> str:
    s = result.settings
    parts = [
        f"# Statistics across {len(result.models)} models\n",
        "## Values per model\n\n(n: samples behind each mean)\n",
        _table(*value_cells(result)),
        "## Correlations\n",
        f"{s['level']:.0%} percentile bootstrap CIs over {s['n_resamples']} resamples (seed "
        f"{s['seed']}): models resampled, and samples resampled within each model; p: "
        "two-sided.\n",
        _table(*correlation_cells(result)),
        "## Linear fit: second source = intercept + slope x first\n",
        _table(*fit_cells(result)),
    ]
    if figures:
        parts.append("## Figures\n")
        parts += [f"![{title}]({name})\n" for title, name in figures]
    return "\n".join(parts)


def _table(columns: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    body = [line(columns), "|" + "---|" * len(columns), *(line(r) for r in rows)]
    return "\n".join(body) + "\n"


def _interval(low: Any, high: Any) -> str:
    return "-" if low is None or math.isnan(low) else f"[{low:.3f}, {high:.3f}]"


def _stem(text: str, taken: set[str]) -> str:
    """A file stem from a pair's labels (characters other than letters, digits, ``.``, ``_``
    and ``-`` become ``_``), unique among ``taken``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
    base, n = stem, 2
    while stem in taken:
        stem, n = f"{base}-{n}", n + 1
    taken.add(stem)
    return stem
