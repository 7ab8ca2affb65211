"""The grid's tables, as MVC-Bench reports them, from the cells' saved predictions.

``OUT/tables/``:

* ``cells.csv``: per setting (backbone, method, loss, template, seed) and evaluation set:
  n, accuracy, ECE, MCE, ACE (``calibration@1`` with the grid's ``bins``);
* ``spread.csv``: per (backbone, method, loss, set): mean and sample standard deviation of each
  metric over all seeds x templates, and ECE's spread over seeds (std across seeds, averaged
  over templates) and over templates (std across templates, averaged over seeds);
* ``kendall.csv``: per (backbone, seed, template, shifted set, metric): Kendall's tau-b
  between the settings' (method x loss) values on the reference set and on the shifted set,
  with its two-sided p-value (:func:`medibench.calibration.analysis.ranking_stability`), and
  one ``mean`` row per (backbone, shifted set, metric) averaging tau over seeds and templates
  (MVC-Bench's summary);
* ``grid.json``: all three; ``diagrams/<set>/reliability_<method>_<loss>.svg``: reliability
  diagrams of each (method, loss) pooled over seeds, templates and backbones.

``OUT`` is a run folder (its ``run.sqlite`` holds no samples): ``medibench report OUT`` shows
``grid.json`` (columns in plain words), a heat map per metric
(:mod:`medibench.prompt_tuning._heatmaps`) and the diagrams in the "Prompt tuning grid" panel
(:func:`grid_panel`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["grid_panel", "write_tables"]

_METRICS = ("accuracy", "ece", "mce", "ace")


def write_tables(grid: Any, cells: list[Any]) -> Path:
    """Write ``OUT/tables`` (module doc) and make ``OUT`` a run folder; returns the tables'
    folder."""
    from medibench.calibration import load_predictions, score
    from medibench.calibration.diagrams import write_diagrams

    out = grid.out / "tables"
    rows, pooled = [], defaultdict(list)
    for cell in cells:
        for name in grid.evals:
            pred = load_predictions(cell.folder / "predictions" / f"{name}.npz")
            r = score(pred, "calibration@1", n_bins=grid.bins, n_resamples=0)
            rows.append(
                {
                    "backbone": cell.backbone,
                    "method": cell.method,
                    "loss": cell.loss,
                    "template": cell.template,
                    "seed": cell.seed,
                    "set": name,
                    "n": r["n"],
                    **{m: r[m] for m in _METRICS},
                }
            )
            pooled[(name, cell.method, cell.loss)].append(pred)
    spread = _spread(rows)
    kendall = _kendall(rows, grid.reference)
    _csv(out / "cells.csv", rows)
    _csv(out / "spread.csv", spread)
    _csv(out / "kendall.csv", kendall)
    summary = {
        "reference": grid.reference,
        "bins": grid.bins,
        "cells": rows,
        "spread": spread,
        "kendall": kendall,
    }
    (out / "grid.json").write_text(json.dumps(_clean(summary), indent=1) + "\n", "utf-8")
    for (name, method, loss), preds in sorted(pooled.items()):
        stacked = _stack(preds, f"{method} / {loss} on {name}")
        for path in write_diagrams(
            stacked, out / "diagrams" / name, n_bins=grid.bins, formats=["svg"]
        ):
            path.rename(path.with_name(f"reliability_{_safe(method)}_{_safe(loss)}.svg"))
    from medibench.runs import RunStore

    with RunStore(grid.out):  # the run.sqlite that `medibench report OUT` opens
        pass
    return out


def grid_panel(store: Any, run_dir: Path) -> dict[str, Any] | None:
    """The report panel (:mod:`medibench.report._panels`) of the grid whose run folder is
    ``run_dir`` (or, from before ``--out`` was the grid's folder, one copied into
    ``RUN/prompt_tuning/`` by ``--run RUN``)."""
    found = [Path(run_dir) / d / "grid.json" for d in ("tables", "prompt_tuning")]
    path = next((p for p in found if p.is_file()), None)
    if path is None:
        return None
    from medibench.prompt_tuning._heatmaps import grid_heatmaps, plain_column

    data = json.loads(path.read_text("utf-8"))
    tables = []
    for key, title in (
        ("spread", "Mean and spread over seeds and templates"),
        ("kendall", f"Kendall tau: {data['reference']} against shifted rankings"),
    ):
        rows = data[key]
        if rows:
            cols = list(rows[0])
            tables.append(
                {
                    "title": title,
                    "columns": [plain_column(c) for c in cols],
                    "rows": [[_cell(r[c]) for c in cols] for r in rows],
                    "notes": [],
                }
            )
    figures = grid_heatmaps(data["spread"])  # a heat map per metric, then the diagrams
    for svg in sorted((path.parent / "diagrams").rglob("*.svg")):
        text = svg.read_text("utf-8")
        figures.append(
            {"title": f"{svg.parent.name}: {svg.stem}", "svg": text[text.find("<svg") :]}
        )
    return {
        "id": "prompt-tuning",
        "title": "Prompt tuning grid",
        "tables": tables,
        "figures": figures,
    }


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _spread(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["backbone"], r["method"], r["loss"], r["set"])].append(r)
    out = []
    for (backbone, method, loss, name), members in sorted(groups.items()):
        row: dict[str, Any] = {
            "backbone": backbone,
            "method": method,
            "loss": loss,
            "set": name,
            "runs": len(members),
        }
        for m in _METRICS:
            values = np.array([r[m] for r in members])
            row[f"{m}_mean"] = float(values.mean())
            row[f"{m}_std"] = _std(values)
        row["ece_std_over_seeds"] = _mean_std(members, by="template", over="seed")
        row["ece_std_over_templates"] = _mean_std(members, by="seed", over="template")
        out.append(row)
    return out


def _mean_std(members: list[dict], *, by: str, over: str) -> float:
    """The std of ECE across ``over`` values, within each ``by`` value, averaged."""
    parts: dict[Any, list[float]] = defaultdict(list)
    for r in members:
        parts[r[by]].append(r["ece"])
    stds = [_std(np.array(v)) for v in parts.values() if len(v) > 1]
    return float(np.mean(stds)) if stds else math.nan


def _kendall(rows: list[dict], reference: str) -> list[dict]:
    from medibench.calibration.analysis import ranking_stability

    table: dict[tuple, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        setting = f"{r['method']}/{r['loss']}"
        for m in ("accuracy", "ece"):
            table[(r["backbone"], r["seed"], r["template"], m)][r["set"]][setting] = r[m]
    out: list[dict[str, Any]] = []
    taus: dict[tuple, list[float]] = defaultdict(list)
    for (backbone, seed, template, metric), by_set in sorted(table.items(), key=str):
        for name, values in sorted(by_set.items()):
            if name == reference:
                continue
            res = ranking_stability(by_set[reference], values)
            out.append(
                {
                    "backbone": backbone,
                    "seed": seed,
                    "template": template,
                    "set": name,
                    "metric": metric,
                    "tau": res["tau"],
                    "pvalue": res["pvalue"],
                    "n": res["n"],
                }
            )
            taus[(backbone, name, metric)].append(res["tau"])
    for (backbone, name, metric), found in sorted(taus.items()):
        finite = [t for t in found if not math.isnan(t)]
        out.append(
            {
                "backbone": backbone,
                "seed": "mean",
                "template": "mean",
                "set": name,
                "metric": metric,
                "tau": float(np.mean(finite)) if finite else math.nan,
                "pvalue": math.nan,
                "n": len(finite),
            }
        )
    return out


def _stack(preds: list[Any], source: str) -> Any:
    from medibench.calibration import as_predictions

    return as_predictions(
        np.concatenate([p.labels for p in preds]),
        probs=np.concatenate([p.probs for p in preds]),
        source=source,
    )


def _std(values: np.ndarray) -> float:
    return float(values.std(ddof=1)) if values.size > 1 else math.nan


def _csv(path: Path, rows: list[dict]) -> None:
    from medibench.io import atomic_write_text

    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def _safe(value: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in value)


def _clean(value: Any) -> Any:
    """NaN -> None (JSON has no NaN), recursively."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value
