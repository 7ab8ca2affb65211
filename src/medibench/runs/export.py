"""Export a run as JSONL, CSV or Parquet: its score records, and every table of its stages.

Score records (:func:`export_scores`): JSONL is the schema itself (one ``Score.to_json()`` per
line). CSV and Parquet are flat: the record fields, then one ``metric.<name>`` column per metric
(empty / null when not computed), ``notes`` joined with `` | ``.

Tables (:func:`export_tables`): every table the run store holds (the declared tables of every
stage: predictions, scores with their ``reasons`` column, judgements, judge spend, ...), one file
each, one row per stored row with the stored columns (JSON columns stay JSON text).
:func:`export_run` writes both: the score records at ``out`` and each table beside it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medibench.io import atomic_write_bytes, atomic_write_text
from medibench.samples import Score

if TYPE_CHECKING:
    from medibench.runs._store import RunStore

__all__ = ["FORMATS", "export_run", "export_scores", "export_tables"]

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
    _write_rows(rows, list(rows[0]) if rows else list(_FIELDS), out, format)
    return len(rows)


def export_tables(store: RunStore, out_dir: str | Path, *, format: str = "jsonl") -> dict[str, int]:
    """Write every table of ``store`` to ``out_dir/<table>.<format>``; rows per table."""
    return _export_tables(store, lambda name: Path(out_dir) / f"{name}.{format}", format)


def export_run(store: RunStore, out: str | Path, *, format: str = "jsonl") -> dict[str, int]:
    """The score records at ``out`` (:func:`export_scores`) and every table of the run beside
    it as ``<out stem>.<table>.<format>`` (:func:`export_tables`); rows per file, the score
    records under ``"records"``."""
    out = Path(out)
    counts = {"records": export_scores(store.scores(), out, format=format)}
    counts.update(
        _export_tables(store, lambda name: out.with_name(f"{out.stem}.{name}.{format}"), format)
    )
    return counts


def _export_tables(store: RunStore, path_for: Callable[[str], Path], format: str) -> dict[str, int]:
    _check(format)
    counts = {}
    for table in store.tables():
        cols, rows = store.table_rows(table.name)
        records = [dict(zip(cols, r, strict=True)) for r in rows]
        _write_rows(records, cols, path_for(table.name), format)
        counts[table.name] = len(records)
    return counts


def _check(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")


def _write_rows(rows: list[dict[str, Any]], cols: list[str], out: str | Path, format: str) -> None:
    if format == "jsonl":
        atomic_write_text(out, "".join(json.dumps(r) + "\n" for r in rows))
        return
    if format == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: "" if r[c] is None else r[c] for c in cols})
        atomic_write_text(out, buf.getvalue())
        return
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(
            "Parquet export needs pyarrow: pip install 'medibench[parquet]' (or pyarrow)"
        ) from exc
    table = pa.Table.from_pylist(rows) if rows else pa.table({c: [] for c in cols})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(out, sink.getvalue().to_pybytes())


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
