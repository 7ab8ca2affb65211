"""Calibration results in a run store: the ``calibration_results`` table of ``run.sqlite``.

One row per (predictions source, protocol, protocol version, group, metric) with its value, its
bootstrap interval and the protocol's settings, declared through
:meth:`medibench.runs.RunStore.declare_table` (stage ``calibration``), so ``medibench merge`` and
``medibench export`` carry it. Storing the same result again replaces its rows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

__all__ = [
    "MARGIN_TABLE",
    "TABLE",
    "read_margin_analyses",
    "read_results",
    "store_margin_analysis",
    "store_results",
]

TABLE = "calibration_results"
_COLUMNS = (
    "source TEXT NOT NULL, protocol TEXT NOT NULL, protocol_version TEXT NOT NULL, "
    "group_key TEXT NOT NULL, group_by TEXT NOT NULL, n INTEGER NOT NULL, metric TEXT NOT NULL, "
    "value REAL, ci_low REAL, ci_high REAL, settings TEXT NOT NULL, created_at REAL NOT NULL, "
    "PRIMARY KEY (source, protocol, protocol_version, group_key, metric)"
)
_KEY = ("source", "protocol", "protocol_version", "group_key", "metric")
#: ``medibench calibration analyze --out RUN``: one row per analysis (its predictions files and
#: settings), the whole :func:`medibench.calibration.margins.margin_analysis` result as JSON.
MARGIN_TABLE = "calibration_margins"
_MARGIN_COLUMNS = (
    "analysis TEXT NOT NULL PRIMARY KEY, sources TEXT NOT NULL, settings TEXT NOT NULL, "
    "result TEXT NOT NULL, created_at REAL NOT NULL"
)


def store_results(run_dir: str | Path, result: dict[str, Any]) -> int:
    """Write a :func:`medibench.calibration.score` result into ``run_dir``; the rows written."""
    from medibench.calibration.protocols import METRIC_NAMES
    from medibench.runs import RunStore

    parts = [("", {}, result)] + [
        (key, part["by"], part) for key, part in result.get("groups", {}).items()
    ]
    now = time.time()
    settings = json.dumps(result["settings"], sort_keys=True)
    rows = []
    for key, by, part in parts:
        for metric in METRIC_NAMES:
            ci = part.get("ci", {}).get(metric) or [None, None]
            rows.append(
                (
                    result["source"],
                    result["protocol_name"],
                    result["protocol_version"],
                    key,
                    json.dumps(by, sort_keys=True),
                    part["n"],
                    metric,
                    part[metric],
                    ci[0],
                    ci[1],
                    settings,
                    now,
                )
            )
    with RunStore(run_dir) as store:
        store.declare_table(TABLE, _COLUMNS, _KEY, stage="calibration")
        with store.transaction():
            store.connection.executemany(
                f"INSERT OR REPLACE INTO {TABLE} VALUES ({', '.join('?' * 12)})", rows
            )
    return len(rows)


def read_results(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every stored calibration row of ``run_dir`` as a dict."""
    from medibench.runs import RunStore

    with RunStore.open_existing(run_dir) as store:
        names, rows = store.table_rows(TABLE)
    return [dict(zip(names, row, strict=True)) for row in rows]


def store_margin_analysis(run_dir: str | Path, result: dict[str, Any]) -> str:
    """Keep a margin analysis in ``run_dir``'s ``calibration_margins`` table; returns its key
    (16 hex digits of its settings, which name its files): the same analysis again replaces it."""
    import hashlib

    from medibench.io import finite_or_null
    from medibench.runs import RunStore

    settings = json.dumps(result["settings"], sort_keys=True)
    key = hashlib.sha256(settings.encode("utf-8")).hexdigest()[:16]
    row = (key, json.dumps(result["settings"]["sources"]), settings,
           json.dumps(finite_or_null(result)), time.time())  # fmt: skip
    with RunStore(run_dir) as store:
        store.declare_table(MARGIN_TABLE, _MARGIN_COLUMNS, ("analysis",), stage="calibration")
        with store.transaction():
            store.connection.execute(
                f"INSERT OR REPLACE INTO {MARGIN_TABLE} VALUES (?, ?, ?, ?, ?)", row
            )
    return key


def read_margin_analyses(store: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(key, result)`` of every margin analysis kept in an open run store, by key."""
    rows = store.records(MARGIN_TABLE)
    return [
        (r["analysis"], json.loads(r["result"])) for r in sorted(rows, key=lambda r: r["analysis"])
    ]
