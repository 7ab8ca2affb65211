"""The report's calibration panel: the stored ``calibration_results`` of a run, one table per
(predictions source, protocol), and the reliability diagrams ``calibration score --run`` drew
beside them (:func:`diagram_folder`); then each margin analysis ``calibration analyze --out``
kept (table ``calibration_margins``), as a table per group and its figure
(:func:`margin_figure_path`)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from medibench.calibration.store import TABLE, read_margin_analyses

__all__ = ["calibration_panel", "diagram_folder", "margin_figure_path"]

_SHOWN = ("accuracy", "ece", "mce", "ace", "brier", "nll")


def diagram_folder(run_dir: str | Path, source: str) -> Path:
    """Where the reliability diagrams of predictions ``source`` go in a run folder: the file's
    name (for the reader) and a hash of its whole path (its identity: two files of one name
    scored into one run keep their own diagrams)."""
    safe = "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in Path(source).name) or "_"
    identity = hashlib.sha256(str(source).encode("utf-8")).hexdigest()[:10]
    return Path(run_dir) / "calibration" / f"{safe}-{identity}"


def margin_figure_path(run_dir: str | Path, key: str) -> Path:
    """Where the figure of the margin analysis ``key`` goes in a run folder."""
    return Path(run_dir) / "calibration" / f"margins-{key}.svg"


def calibration_panel(store: Any, run_dir: Path) -> dict[str, Any] | None:
    """The panel for :mod:`medibench.report._panels`, or ``None`` without calibration results
    or margin analyses."""
    rows = store.records(TABLE)
    margins = read_margin_analyses(store)
    if not rows and not margins:
        return None
    tables, figures = _score_tables(rows, run_dir) if rows else ([], [])
    for key, result in margins:
        tables.append(_margin_table(key, result))
        svg = margin_figure_path(run_dir, key)
        if svg.is_file():
            text = _inline(svg.read_text(encoding="utf-8"))
            figures.append({"title": f"top-two margins {key}", "svg": text})
    files = len({r["source"] for r in rows})
    summary = f"{files} prediction file(s), {len(tables) - len(margins)} protocol table(s)"
    if margins:
        summary += f", {len(margins)} margin analysis(es)"
    return {
        "id": "calibration",
        "title": "Calibration",
        "summary": summary,
        "tables": tables,
        "figures": figures,
    }


def _margin_table(key: str, result: dict[str, Any]) -> dict[str, Any]:
    settings = result["settings"]
    lines = [
        [g["group"] or "all", str(g["n"]), g["margin_source"],
         *(_number(v) for v in (g["accuracy"], g["ece"], g["margin"]["mean"],
                                g["margin"]["median"], g["margin_correct"],
                                g["margin_incorrect"]))]
        for g in result["groups"]
    ]  # fmt: skip
    notes = [
        f"Spearman, mean margin vs {name}: "
        + (f"rho {rel['rho']:.3f}, p {rel['pvalue']:.3g}, {rel['n']} groups"
           if rel.get("rho") is not None else f"not defined ({rel.get('why')})")
        for name, rel in result["relation"].items()
    ]  # fmt: skip
    by = settings["by"] or "file"
    notes.append(f"settings: protocol={settings['protocol']}, ECE bins={settings['ece_bins']}, "
                 f"margin bins={settings['margin_bins']}, by={by}")  # fmt: skip
    return {
        "title": f"top-two margins {key}: {', '.join(Path(s).name for s in settings['sources'])}",
        "columns": ["group", "n", "margin of", "accuracy", "ECE", "mean margin", "median",
                    "correct", "incorrect"],
        "rows": lines,
        "notes": notes,
    }  # fmt: skip


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _score_tables(
    rows: list[dict[str, Any]], run_dir: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``calibration_results`` tables and reliability diagrams."""
    grouped: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    settings: dict[tuple[str, str, str], str] = {}
    for r in rows:
        key = (r["source"], r["protocol"], r["protocol_version"])
        group = grouped[key].setdefault(r["group_key"], {"n": r["n"], "by": r["group_by"]})
        group[r["metric"]] = (r["value"], r["ci_low"], r["ci_high"])
        settings[key] = r["settings"]
    names = Counter(Path(s).name for s in {s for s, _, _ in grouped})
    label = {s: s if names[Path(s).name] > 1 else Path(s).name for s, _, _ in grouped}
    tables = []
    for (source, protocol, version), groups in sorted(grouped.items()):
        lines = [
            [key or "all", str(g["n"]), *(_cell(g.get(m)) for m in _SHOWN)]
            for key, g in sorted(groups.items(), key=lambda kv: (kv[0] != "", kv[0]))
        ]
        tables.append(
            {
                "title": f"{label[source]} · {protocol}@{version}",
                "columns": ["group", "n", *_SHOWN],
                "rows": lines,
                "notes": [f"settings: {_settings(settings[(source, protocol, version)])}",
                          "[low, high]: the protocol's bootstrap interval"],
            }
        )  # fmt: skip
    # One figure per diagram (overall, each group), every file's side by side in the order they
    # were scored: predictions before and after a calibrator (`calibration apply`) scored into
    # one run read as before | after.
    sources = list(dict.fromkeys(r["source"] for r in rows))
    drawn = {s: {p.stem: p for p in diagram_folder(run_dir, s).glob("*.svg")} for s in sources}
    figures: list[dict[str, Any]] = []
    for stem in sorted({stem for found in drawn.values() for stem in found}):
        parts = [
            {"title": label[s], "svg": _inline(drawn[s][stem].read_text(encoding="utf-8"))}
            for s in sources
            if stem in drawn[s]
        ]
        title = f"{stem}: " + " | ".join(p["title"] for p in parts)
        if len(parts) == 1:
            figures.append({"title": title, "svg": parts[0]["svg"]})
        else:
            figures.append({"title": f"{title} (side by side)", "parts": parts})
    return tables, figures


def _cell(value: tuple[float | None, float | None, float | None] | None) -> str:
    if value is None or value[0] is None:
        return "n/a"
    v, lo, hi = value
    return f"{v:.4f}" + (f" [{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else "")


def _settings(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict):
        return text
    return ", ".join(f"{k}={v}" for k, v in sorted(data.items()))


def _inline(svg: str) -> str:
    """An SVG file's ``<svg>`` element, without the XML prologue (invalid inside HTML)."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else ""
