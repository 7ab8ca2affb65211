"""The report's calibration panel: the stored ``calibration_results`` of a run, one table per
(predictions source, protocol), and the reliability diagrams ``calibration score --run`` drew
beside them (:func:`diagram_folder`)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from medibench.calibration.store import TABLE

__all__ = ["calibration_panel", "diagram_folder"]

_SHOWN = ("accuracy", "ece", "mce", "ace", "brier", "nll")


def diagram_folder(run_dir: str | Path, source: str) -> Path:
    """Where the reliability diagrams of predictions ``source`` go in a run folder: the file's
    name (for the reader) and a hash of its whole path (its identity: two files of one name
    scored into one run keep their own diagrams)."""
    safe = "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in Path(source).name) or "_"
    identity = hashlib.sha256(str(source).encode("utf-8")).hexdigest()[:10]
    return Path(run_dir) / "calibration" / f"{safe}-{identity}"


def calibration_panel(store: Any, run_dir: Path) -> dict[str, Any] | None:
    """The panel for :mod:`medibench.report._panels`, or ``None`` without calibration results."""
    rows = store.records(TABLE)
    if not rows:
        return None
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
    figures = []
    for source in sorted({s for s, _, _ in grouped}):
        for svg in sorted(diagram_folder(run_dir, source).glob("*.svg")):
            text = svg.read_text(encoding="utf-8")
            figures.append({"title": f"{label[source]}: {svg.stem}", "svg": _inline(text)})
    files = len({s for s, _, _ in grouped})
    summary = f"{files} prediction file(s), {len(tables)} protocol table(s)"
    return {
        "id": "calibration",
        "title": "Calibration",
        "summary": summary,
        "tables": tables,
        "figures": figures,
    }


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
