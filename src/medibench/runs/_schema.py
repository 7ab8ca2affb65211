"""The run store's own schema and SQLite plumbing (:class:`~medibench.runs._store.RunStore`).

The store's core tables (``meta``, ``samples``, ``predictions``, ``scores``) and their migration
(:func:`declare_core`: an older ``run.sqlite`` gains the columns added since, and its score
reasons are recovered from the error text), the ``BEGIN IMMEDIATE`` transaction, the translation
of SQLite's "database or disk is full" into a :class:`~medibench.io.DiskFullError` naming the
file, and the JSON encoding of metric values (no inf in JSON text).
"""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path
from typing import Any

from medibench.io._write import DiskFullError
from medibench.runs import _tables
from medibench.samples import reasons_from_error

__all__ = [
    "CORE_TABLES",
    "SCHEMA_VERSION",
    "SCORE_COLUMNS",
    "Transaction",
    "decode_metric",
    "declare_core",
    "disk_full_names",
    "encode_metric",
]

SCHEMA_VERSION = "1"

# The tables the store's own stages keep (generate: samples, predictions; score: scores).
# A column added here later must be nullable or have a DEFAULT: older run.sqlite files gain it.
_CORE: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("meta", "key TEXT PRIMARY KEY, value TEXT NOT NULL", ("key",), "run"),
    ("samples", "sample_id TEXT PRIMARY KEY, record TEXT NOT NULL", ("sample_id",), "run"),
    (
        "predictions",
        "model TEXT NOT NULL, sample_id TEXT NOT NULL, k INTEGER NOT NULL, seed INTEGER, "
        "path TEXT, status TEXT NOT NULL, error TEXT, elapsed_s REAL, created_at REAL NOT NULL, "
        "PRIMARY KEY (model, sample_id, k)",
        ("model", "sample_id", "k"),
        "generate",
    ),
    (
        "scores",
        "model TEXT NOT NULL, sample_id TEXT NOT NULL, k INTEGER NOT NULL, "
        "protocol TEXT NOT NULL, protocol_version TEXT NOT NULL, metrics TEXT NOT NULL, "
        "status TEXT NOT NULL, error TEXT, notes TEXT NOT NULL, created_at REAL NOT NULL, "
        "reasons TEXT, "
        "PRIMARY KEY (model, sample_id, k, protocol, protocol_version)",
        ("model", "sample_id", "k", "protocol", "protocol_version"),
        "score",
    ),
)
#: The tables whose rows :func:`medibench.runs.merge` reconciles itself.
CORE_TABLES = frozenset(name for name, *_ in _CORE) | {"stage_tables"}
SCORE_COLUMNS = (
    "model, sample_id, k, protocol, protocol_version, metrics, status, error, notes, "
    "created_at, reasons"
)


def declare_core(db: sqlite3.Connection, path: Path) -> None:
    """Declare the store's own tables; an older run gains the columns added since, and its
    score reasons (then only in the joined error text) are filled in from that text."""
    had = _tables.table_names(db)
    old_scores = "scores" in had and "reasons" not in {
        r[1] for r in db.execute("PRAGMA table_info(scores)")
    }
    for name, columns, key, stage in _CORE:
        _tables.declare(db, name, columns, key, stage=stage, per_output=False)
    if old_scores:  # an older run: its reasons were only in the joined error text
        with Transaction(db, path):
            rows = db.execute("SELECT rowid, status, error FROM scores").fetchall()
            db.executemany(
                "UPDATE scores SET reasons = ? WHERE rowid = ?",
                [
                    (json.dumps(reasons_from_error(err)), rowid)
                    for rowid, status, err in rows
                    if status == "ok" and reasons_from_error(err)
                ],
            )


class Transaction:
    """A ``BEGIN IMMEDIATE`` ... ``COMMIT`` (or ``ROLLBACK`` on error) context on ``db``."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path

    def __enter__(self) -> None:
        with disk_full_names(self.path):
            self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc: BaseException | None, _tb: object) -> None:
        if exc_type is None:
            try:
                self.db.execute("COMMIT")
                return
            except sqlite3.Error as failed:  # a full disk shows here too
                exc = failed
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error) and _is_full(exc):
            raise _full_error(self.path) from exc
        if exc_type is None and exc is not None:
            raise exc


class disk_full_names:
    """Turn SQLite's "database or disk is full" into a DiskFullError naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        pass

    def __exit__(self, exc_type, exc: BaseException | None, _tb: object) -> None:
        if isinstance(exc, sqlite3.Error) and _is_full(exc):
            raise _full_error(self.path) from exc


def _is_full(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(
        exc
    )


def _full_error(path: Path) -> DiskFullError:
    return DiskFullError(errno.ENOSPC, "database or disk is full", str(path))


def encode_metric(v: float | None) -> float | str | None:
    """A metric value for JSON text: infinities as the strings ``"inf"`` / ``"-inf"``."""
    # SQLite JSON text has no inf: store it as a string, like the score records do.
    if v is not None and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v


def decode_metric(v: Any) -> float | None:
    """The inverse of :func:`encode_metric`."""
    return float(v) if isinstance(v, str) else v
