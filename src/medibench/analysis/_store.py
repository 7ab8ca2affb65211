"""The ``attention`` table of a run store and what the report reads from it (no torch here).

One row per (model, sample, k): the word and its tokens, the IoU (NaN stored as NULL with its
note), Otsu's threshold, the seed, the heat-map and overlay PNGs (paths relative to the run),
whether the captured edit equals the run's stored prediction, and the capture's settings (JSON).
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["ATTENTION_TABLE", "attach_attention", "declare_attention", "read_attention"]

ATTENTION_TABLE = "attention"
_COLUMNS = """
    model TEXT NOT NULL, sample_id TEXT NOT NULL, k INTEGER NOT NULL,
    status TEXT NOT NULL, error TEXT, word TEXT, iou REAL, note TEXT, otsu REAL,
    threshold REAL, alpha REAL, region TEXT, seed INTEGER, heatmap TEXT, overlay TEXT,
    matches_prediction INTEGER, details TEXT, created REAL,
    PRIMARY KEY (model, sample_id, k)
"""
_FIELDS = (
    "model",
    "sample_id",
    "k",
    "status",
    "error",
    "word",
    "iou",
    "note",
    "otsu",
    "threshold",
    "alpha",
    "region",
    "seed",
    "heatmap",
    "overlay",
    "matches_prediction",
    "details",
)


def declare_attention(store: Any) -> None:
    """Declare the table in ``store`` (a :class:`~medibench.runs.RunStore`)."""
    store.declare_table(
        ATTENTION_TABLE, _COLUMNS, ("model", "sample_id", "k"), stage="analyze", per_output=True
    )


def put_attention(store: Any, row: dict[str, Any]) -> None:
    """Insert or replace one row (``details`` a dict, ``iou`` NaN stored as NULL)."""
    values = dict(row)
    iou = values.get("iou")
    values["iou"] = None if iou is None or math.isnan(iou) else float(iou)
    values["details"] = json.dumps(values.get("details") or {})
    cols = [*_FIELDS, "created"]
    args = [values.get(c) for c in _FIELDS] + [time.time()]
    with store.transaction():
        store.connection.execute(
            f"INSERT OR REPLACE INTO {ATTENTION_TABLE} ({', '.join(cols)}) "
            f"VALUES ({', '.join('?' * len(cols))})",
            args,
        )


def read_attention(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every row of the run's ``attention`` table (``[]`` when it has none), ``details`` parsed."""
    try:
        cur = db.execute(f"SELECT * FROM {ATTENTION_TABLE} ORDER BY rowid")
    except sqlite3.Error:
        return []
    cols = [c[0] for c in cur.description]
    out = []
    for r in cur:
        rec = dict(zip(cols, r, strict=True))
        rec["details"] = json.loads(rec["details"]) if rec.get("details") else {}
        out.append(rec)
    return out


def attach_attention(
    blob: dict[str, Any], rows: list[dict[str, Any]], run_dir: Path, out_dir: Path
) -> int:
    """Add to each sample of the report's browser blob its ``attention`` list (``model, k, word,
    iou, note, status, error, overlay``), the overlays copied into ``out_dir/attention/``.
    Returns the number of rows attached."""
    by_sample: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        pic = None
        if r.get("overlay"):
            src = Path(run_dir) / r["overlay"]
            if src.is_file():
                dest = Path(out_dir) / "attention" / Path(r["overlay"]).parent.name / src.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
                rel = dest.relative_to(out_dir).as_posix()
                pic = {"thumb": rel, "full": rel}
            else:
                pic = {"missing": f"{src.name}: not found"}
        by_sample[str(r["sample_id"])].append(
            {
                "model": r["model"],
                "k": r["k"],
                "word": r.get("word"),
                "iou": r.get("iou"),
                "note": r.get("note"),
                "status": r.get("status"),
                "error": r.get("error"),
                "overlay": pic,
            }
        )
    n = 0
    for s in blob.get("samples", []):
        got = by_sample.get(s["id"])
        if got:
            s["attention"] = got
            n += len(got)
    return n
