"""The tables of a run store: declared by the stages that write them, known to merge and export.

A stage (generate, score, judge, analysis, calibration) declares each table it keeps in
``run.sqlite`` through :meth:`medibench.runs.RunStore.declare_table`: its column definitions,
the columns that identify a row, and whether a row belongs to one output (``model``,
``sample_id``, ``k`` columns). The declaration is stored in the run itself (``stage_tables``), so
``medibench merge`` and ``medibench export`` cover every table of a run without importing the
stage that wrote it. Declaring a table that exists with fewer columns adds the missing ones
(``ALTER TABLE ... ADD COLUMN``): an older ``run.sqlite`` opens and gains them. A table from
before declarations existed is described from its own schema (its primary key) by
:func:`describe_table`.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["OUTPUT_COLUMNS", "StageTable", "declare", "declared", "describe_table", "table_names"]

#: The columns that name one output of a model: rows with them follow that output in a merge.
OUTPUT_COLUMNS = ("model", "sample_id", "k")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONSTRAINTS = {"PRIMARY", "UNIQUE", "CHECK", "FOREIGN", "CONSTRAINT"}

_REGISTRY = """
CREATE TABLE IF NOT EXISTS stage_tables (
    name TEXT PRIMARY KEY, stage TEXT NOT NULL, key_columns TEXT NOT NULL,
    per_output INTEGER NOT NULL);
"""


@dataclass(frozen=True)
class StageTable:
    """One declared table of a run store.

    Attributes:
        name: the SQLite table name.
        stage: the stage that writes it (``generate``, ``score``, ``judge``, ...).
        key: the columns that identify a row (a merge keeps the first row of each key); ``()``
            for a ledger whose every row counts (a merge drops only exact duplicates).
        per_output: rows name an output through :data:`OUTPUT_COLUMNS`; a merge takes them only
            from the run whose output it kept, as it does for scores.
    """

    name: str
    stage: str
    key: tuple[str, ...] = ()
    per_output: bool = False


def declare(
    db: sqlite3.Connection,
    name: str,
    columns: str,
    key: Sequence[str],
    *,
    stage: str,
    per_output: bool | None = None,
) -> StageTable:
    """Create ``name`` (``CREATE TABLE name (columns)``) or add its missing columns; record it.

    Raises ``ValueError`` for a bad name, a key or output column that is not declared, or a
    missing column that cannot be added to existing rows (``NOT NULL`` without ``DEFAULT``).
    """
    if not _NAME.match(name):
        raise ValueError(f"table name {name!r} is not a plain SQL identifier")
    defs = column_definitions(columns)
    names = [d.split()[0].strip('"') for d in defs]
    missing_key = [c for c in key if c not in names]
    if missing_key:
        raise ValueError(f"table {name}: key column(s) {missing_key} are not declared")
    if per_output is None:
        per_output = all(c in names for c in OUTPUT_COLUMNS)
    elif per_output and not all(c in names for c in OUTPUT_COLUMNS):
        raise ValueError(f"table {name}: per_output needs columns {', '.join(OUTPUT_COLUMNS)}")
    # Nothing is written when the run already holds this declaration (readers open it too).
    existing = table_names(db)
    if "stage_tables" not in existing:
        db.executescript(_REGISTRY)
    if name not in existing:
        db.execute(f"CREATE TABLE {name} ({columns})")
    have = set(_columns(db, name))
    for d, col in zip(defs, names, strict=True):
        if col not in have:
            upper = d.upper()
            if "NOT NULL" in upper and "DEFAULT" not in upper or "PRIMARY KEY" in upper:
                raise ValueError(
                    f"table {name}: column {col} cannot be added to an existing table "
                    "(give it a DEFAULT or let it be NULL)"
                )
            db.execute(f"ALTER TABLE {name} ADD COLUMN {d}")
    table = StageTable(name, stage, tuple(key), per_output)
    row = (name, stage, json.dumps(list(table.key)), int(per_output))
    stored = db.execute("SELECT * FROM stage_tables WHERE name = ?", (name,)).fetchone()
    if stored != row:
        db.execute("INSERT OR REPLACE INTO stage_tables VALUES (?, ?, ?, ?)", row)
    return table


def declared(db: sqlite3.Connection) -> list[StageTable]:
    """Every table of the store: the declared ones, then any other (described from its schema)."""
    names = table_names(db)
    out: dict[str, StageTable] = {}
    if "stage_tables" in names:
        for name, stage, key, per_output in db.execute(
            "SELECT name, stage, key_columns, per_output FROM stage_tables ORDER BY rowid"
        ):
            if name in names:
                out[name] = StageTable(name, stage, tuple(json.loads(key)), bool(per_output))
    for name in sorted(names - set(out) - {"stage_tables"}):
        out[name] = describe_table(db, name)
    return list(out.values())


def describe_table(db: sqlite3.Connection, name: str) -> StageTable:
    """An undeclared table (written before declarations existed): its primary key is its key,
    and it is per output when it has the output columns."""
    info = list(db.execute(f"PRAGMA table_info({name})"))
    key = tuple(row[1] for row in sorted(info, key=lambda r: r[5]) if row[5])
    cols = {row[1] for row in info}
    return StageTable(name, "unknown", key, all(c in cols for c in OUTPUT_COLUMNS))


def table_names(db: sqlite3.Connection) -> set[str]:
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {r[0] for r in rows if not r[0].startswith("sqlite_")}


def table_sql(db: sqlite3.Connection, name: str) -> str:
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row.fetchone()[0]


def _columns(db: sqlite3.Connection, name: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({name})")]


def rows(db: sqlite3.Connection, name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The column names and every row of ``name``, in insertion order."""
    cols = _columns(db, name)
    return cols, list(db.execute(f"SELECT {', '.join(cols)} FROM {name} ORDER BY rowid"))


def copy_rows(
    db: sqlite3.Connection,
    table: StageTable,
    cols: Sequence[str],
    source_rows: Iterable[tuple[Any, ...]],
) -> int:
    """Insert the rows whose key the table does not hold yet (the whole row for a ledger);
    returns how many were inserted. Columns the target lacks are dropped."""
    mine = _columns(db, table.name)
    keep = [i for i, c in enumerate(cols) if c in mine]
    names = [cols[i] for i in keep]
    ident = list(table.key) or names
    pos = [names.index(c) for c in ident]
    have = {tuple(r) for r in db.execute(f"SELECT {', '.join(ident)} FROM {table.name}")}
    new = []
    for row in source_rows:
        values = tuple(row[i] for i in keep)
        k = tuple(values[p] for p in pos)
        if k not in have:
            have.add(k)
            new.append(values)
    db.executemany(
        f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
        new,
    )
    return len(new)


def column_definitions(columns: str) -> list[str]:
    """The column definitions in a ``CREATE TABLE`` body (table constraints left out)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(columns):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(columns[start:i])
            start = i + 1
    parts.append(columns[start:])
    defs = [" ".join(p.split()) for p in parts if p.strip()]
    return [d for d in defs if d.split()[0].upper() not in _CONSTRAINTS]
