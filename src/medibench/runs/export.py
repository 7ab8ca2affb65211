"""Export score records as JSONL, CSV or Parquet, in the score-record schema.

JSONL is the schema itself (one ``Score.to_json()`` per line). CSV and Parquet are flat: the
record fields, then one ``metric.<name>`` column per metric (empty / null when not computed),
``notes`` joined with `` | ``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from medibench.io import atomic_write_bytes, atomic_write_text
from medibench.samples import Score

__all__ = ["export_scores", "FORMATS"]

FORMATS = ("jsonl", "csv", "parquet")
_FIELDS = ("sample_id", "model", "k", "protocol", "protocol_version", "status", "error", "notes")


def export_scores(scores: Sequence[Score], out: str | Path, *, format: str = "jsonl") -> int:
    """Write ``scores`` to ``out`` in ``format``; returns the number of records."""
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")
    if format == "jsonl":
        atomic_write_text(out, "".join(s.to_json() + "\n" for s in scores))
        return len(scores)
    rows = _flat_rows(scores)
    if format == "csv":
        buf = io.StringIO()
        cols = list(rows[0]) if rows else list(_FIELDS)
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: "" if r[c] is None else r[c] for c in cols})
        atomic_write_text(out, buf.getvalue())
        return len(rows)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(
            "Parquet export needs pyarrow: pip install 'medibench[parquet]' (or pyarrow)"
        ) from exc
    table = pa.Table.from_pylist(rows) if rows else pa.table({c: [] for c in _FIELDS})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(out, sink.getvalue().to_pybytes())
    return len(rows)


def _flat_rows(scores: Sequence[Score]) -> list[dict]:
    names = sorted({m for s in scores for m in s.metrics})
    rows = []
    for s in scores:
        row = {f: getattr(s, f) for f in _FIELDS}
        row["notes"] = " | ".join(s.notes) if s.notes else None
        for m in names:
            v = s.metrics.get(m)
            row[f"metric.{m}"] = None if v is None else float(v)
        rows.append(row)
    return rows
