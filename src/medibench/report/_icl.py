"""The in-context learning experiment in the report: each ``MODEL@icl-K`` against ``MODEL@icl-0``,
and the score-vs-K figure.

A run with ``--icl-k 0 --icl-k 1 ...`` holds one model entry per K
(:mod:`medibench.runs._icl`). Among the paired comparisons of every pair of models, those of an
entry with K > 0 and the same model's K = 0 entry are oriented ``A = MODEL@icl-K``,
``B = MODEL@icl-0`` (the difference is what the demonstrations changed, with its CI) and listed
first; every other pair stays as :func:`~medibench.stats.compare_models` orders it.

:func:`score_vs_k` draws each model's overall mean against K (K = 0, the model without
demonstrations, included when the run has it) with its CI bars, a panel per metric, from the
leaderboard rows (:func:`k_curves`): the values the leaderboard shows, nothing recomputed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medibench.stats import compare_models

__all__ = ["against_icl_zero", "icl_baselines", "k_curves", "score_vs_k"]

_ENTRY = re.compile(r"^(?P<base>.+)@icl-(?P<k>\d+)$")


def icl_baselines(models: list[str] | Any) -> dict[str, str]:
    """``{MODEL@icl-K: MODEL@icl-0}`` for every entry with K > 0 whose K = 0 entry is there."""
    names = set(models)
    out = {}
    for name in sorted(names):
        m = _ENTRY.match(name)
        if m and int(m["k"]) > 0 and f"{m['base']}@icl-0" in names:
            out[name] = f"{m['base']}@icl-0"
    return out


def against_icl_zero(
    rows: list[dict[str, Any]],
    by_model: Mapping[str, Mapping[str, float | None]],
    *,
    metric: str,
    n_resamples: int,
    seed: int,
    level: float,
) -> list[dict[str, Any]]:
    """``rows`` (one metric's :func:`~medibench.stats.compare_models` rows over ``by_model``)
    with each ICL pair recomputed as ``A = MODEL@icl-K``, ``B = MODEL@icl-0`` and put first."""
    pairs = icl_baselines(list(by_model))
    if not pairs:
        return rows
    first, rest = [], []
    wanted = {frozenset(p): p for p in pairs.items()}
    for row in rows:
        pair = wanted.get(frozenset((row["model_a"], row["model_b"])))
        if pair is None:
            rest.append(row)
            continue
        with_k, zero = pair
        values = {"a": by_model[with_k], "b": by_model[zero]}  # "a" sorts first: A = K
        (again,) = compare_models(
            values, metric=metric, n_resamples=n_resamples, seed=seed, level=level
        )
        first.append({**again, "model_a": with_k, "model_b": zero})
    return first + rest


def k_curves(
    rows: Sequence[Mapping[str, Any]], metrics: Sequence[str]
) -> dict[str, dict[str, list[list[float | None]]]]:
    """``{metric: {model: [[K, mean, ci_low, ci_high], ...]}}``, K ascending, from the overall
    micro rows (``by == "all"``, ``group == "micro"``) of the entries ``MODEL@icl-K``; only the
    models with two or more K that have a value (an empty dict when no model has)."""
    out: dict[str, dict[str, list[list[float | None]]]] = {}
    for metric in metrics:
        curves: dict[str, list[list[float | None]]] = {}
        for r in rows:
            m = _ENTRY.match(str(r["model"]))
            value = r.get(metric)
            if not (m and r["by"] == "all" and r["group"] == "micro" and _finite(value)):
                continue
            low, high = r.get(f"{metric}_ci_low"), r.get(f"{metric}_ci_high")
            point = [int(m["k"]), value, *(v if _finite(v) else None for v in (low, high))]
            curves.setdefault(m["base"], []).append(point)
        kept = {
            b: sorted(p, key=lambda x: float(x[0] or 0)) for b, p in curves.items() if len(p) > 1
        }
        if kept:
            out[metric] = dict(sorted(kept.items()))
    return out


def score_vs_k(
    curves: Mapping[str, Mapping[str, Sequence[Sequence[float | None]]]], title: str, stem: Path
) -> list[Path]:
    """One panel per metric of ``curves`` (:func:`k_curves`): each model's mean against K, joined,
    with CI bars (none for a point without an interval), K on the x axis as integers. What is
    drawn (read back from the plotted lines) goes into ``<stem>.json``: ``{"title", "curves":
    {metric: {model: [[K, mean], ...]}}}``."""
    from medibench.report._plots import _ci_errors, _finish_panels, plt

    metrics = list(curves)
    ncols = min(3, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols + 1.6, 2.6 * nrows + 0.5),
                             squeeze=False)  # fmt: skip
    drawn: dict[str, dict[str, list[list[float]]]] = {}
    ks: set[int] = set()
    for ax, metric in zip(axes.flat, metrics, strict=False):
        drawn[metric] = {}
        for model, points in curves[metric].items():
            rows = [{metric: p[1], f"{metric}_ci_low": p[2], f"{metric}_ci_high": p[3]}
                    for p in points]  # fmt: skip
            means = [p[1] for p in points]
            bars = ax.errorbar([p[0] for p in points], means, yerr=_ci_errors(rows, means, metric),
                               marker="o", markersize=4, capsize=3, label=model)  # fmt: skip
            xs, ys = bars.lines[0].get_data()
            drawn[metric][model] = [[float(x), float(y)] for x, y in zip(xs, ys, strict=True)]
            ks |= {int(p[0]) for p in points}  # type: ignore[arg-type]
        ax.set_xticks(sorted(ks))
        ax.set_xlabel("K (in-context demonstrations)")
        ax.set_title(metric, fontsize=9)
    paths = _finish_panels(fig, axes, len(metrics), title, stem)
    stem.with_suffix(".json").write_text(
        json.dumps({"title": title, "curves": drawn}, indent=1), encoding="utf-8"
    )
    return paths


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)
