"""Summary rows to CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from medibench.io import atomic_write_text

__all__ = ["write_rows_csv"]


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
