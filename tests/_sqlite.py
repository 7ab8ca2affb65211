"""Reading a run store's tables from a test while another process writes them."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def count_rows(db: str | Path, table: str) -> int:
    """Rows in ``table`` of the SQLite file ``db``, read-only beside its writer (WAL); 0 while the
    file or the table does not exist yet."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    except sqlite3.OperationalError:
        return 0
    try:
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def table_rows(db: str | Path, table: str, *, drop: tuple[str, ...] = ()) -> list[tuple]:
    """Every row of ``table`` in ``db``, sorted, without the columns named in ``drop`` (times)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        cur = con.execute(f"SELECT * FROM {table}")
        keep = [i for i, d in enumerate(cur.description) if d[0] not in drop]
        return sorted((tuple(row[i] for i in keep) for row in cur), key=repr)
    finally:
        con.close()
