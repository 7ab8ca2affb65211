"""Summary rows to CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medibench.io import atomic_write_text, finite_or_null

__all__ = ["write_json", "write_rows_csv", "write_rows_json"]


def write_rows_csv(rows: Sequence[dict], path: str | Path) -> Path:
    """Write dict rows as CSV (atomically): the union of their keys, ``None`` as an empty cell."""
    if not rows:
        raise ValueError("no rows to write (were any predictions scored?)")
    cols = list(rows[0])
    for r in rows[1:]:
        cols += [c for c in r if c not in cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in cols})
    return atomic_write_text(path, buf.getvalue())


def write_rows_json(rows: Sequence[dict], path: str | Path) -> Path:
    """Write dict rows as a JSON list (atomically); NaN and infinities become ``null``."""
    return write_json(list(rows), path)


def write_json(data: Any, path: str | Path) -> Path:
    """Write ``data`` as JSON (atomically, indent 1); NaN and infinities at any depth become
    ``null`` (:func:`medibench.io.finite_or_null`), other non-JSON values their ``str``."""
    return atomic_write_text(path, json.dumps(finite_or_null(data), indent=1, default=str) + "\n")
