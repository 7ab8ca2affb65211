"""The run store: one SQLite file, the source of truth of a run.

The store owns every table: its own ``meta`` (config, protocol versions, package versions,
seeds), ``samples``, ``predictions`` and ``scores`` (the record's ``error`` text and, as data, its
per-metric ``reasons``), and those each later stage declares through :meth:`RunStore.declare_table`
(judgements, ...; :mod:`medibench.runs._tables`), which ``merge`` and ``export`` cover. An older
``run.sqlite`` opens and gains the columns added since. Each prediction or score is one row keyed by
(model, sample, k[, protocol, version]) and written in its own transaction *after* its files are
atomically in place, so a crash loses at most the sample in flight and a re-run never duplicates
a row. WAL journalling keeps readers (``export``, reports) off the writer's back. A full disk
is a :class:`~medibench.io.DiskFullError` naming ``run.sqlite``; the failed transaction is rolled
back and every committed row stays.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from medibench._packed import MadeWhenLookedUp
from medibench._sql import where_equal
from medibench.calls._redact import redact, redact_value
from medibench.runs import _tables
from medibench.runs._schema import (
    CORE_TABLES,
    SCHEMA_VERSION,
    SCORE_COLUMNS,
    Transaction,
    declare_core,
    decode_metric,
    disk_full_names,
    encode_metric,
)
from medibench.runs._tables import StageTable
from medibench.samples import Prediction, Sample, Score, join_reasons

__all__ = ["CORE_TABLES", "RunStore", "RunStoreError", "StageTable"]


class RunStoreError(RuntimeError):
    """The run directory is not a medibench run, or its config conflicts with the request."""


class StoredSamples(MadeWhenLookedUp[Sample]):
    """A run's samples by id (:meth:`RunStore.sample_map`): their JSON records, compressed,
    each made a :class:`~medibench.samples.Sample` when looked up."""

    def __init__(self, records: dict[str, bytes]) -> None:
        self._stored = records

    def _make(self, key: str, stored: bytes) -> Sample:
        return Sample.model_validate_json(zlib.decompress(stored))


class RunStore:
    """Read and write one run's ``run.sqlite``."""

    FILENAME = "run.sqlite"

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / self.FILENAME
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        with disk_full_names(self.path):
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            declare_core(self._db, self.path)
        stored = self.get_meta("schema_version")
        if stored is None:
            self.set_meta("schema_version", SCHEMA_VERSION)
        elif stored != SCHEMA_VERSION:
            raise RunStoreError(
                f"{self.path}: run store schema {stored}, this medibench writes {SCHEMA_VERSION}"
            )

    @classmethod
    def open_existing(cls, run_dir: str | Path) -> RunStore:
        """Open a run that must already exist (for export and reports)."""
        if not (Path(run_dir) / cls.FILENAME).is_file():
            raise RunStoreError(f"{run_dir}: not a medibench run (no {cls.FILENAME})")
        return cls(run_dir)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tables -------------------------------------------------------------------------------
    def declare_table(
        self,
        name: str,
        columns: str,
        key_columns: Sequence[str],
        *,
        stage: str,
        per_output: bool | None = None,
    ) -> StageTable:
        """Declare a stage's table (create it, or add the columns an older run lacks).

        ``columns`` is the body of ``CREATE TABLE name (...)``; ``key_columns`` identify a row
        (``()`` for a ledger whose every row counts); ``per_output`` (default: the table has
        ``model``, ``sample_id`` and ``k`` columns) makes a merge take its rows with the output
        they belong to. ``merge`` and ``export`` cover every declared table
        (:mod:`medibench.runs._tables`).
        """
        with disk_full_names(self.path):
            return _tables.declare(
                self._db, name, columns, key_columns, stage=stage, per_output=per_output
            )

    def tables(self) -> list[StageTable]:
        """Every table of this run: the store's own, then the stages' (declared order)."""
        return _tables.declared(self._db)

    def table_rows(self, name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The column names and rows of table ``name`` (as stored: JSON columns are text)."""
        if name not in _tables.table_names(self._db):
            raise KeyError(f"{self.path}: no table {name!r}")
        return _tables.rows(self._db, name)

    def records(self, name: str) -> list[dict[str, Any]]:
        """The rows of table ``name`` as ``{column: value}`` dicts (JSON columns as text);
        empty when the run has no such table (the stage that writes it never ran here)."""
        if name not in _tables.table_names(self._db):
            return []
        names, rows = _tables.rows(self._db, name)
        return [dict(zip(names, row, strict=True)) for row in rows]

    # -- meta ---------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        with disk_full_names(self.path):
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value))
            )

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    # -- samples ------------------------------------------------------------------------------
    def put_samples(self, samples: Iterable[Sample]) -> None:
        """Store ``samples`` (in one transaction), one at a time as they come."""
        with self._tx():
            self._db.executemany(
                "INSERT OR REPLACE INTO samples (sample_id, record) VALUES (?, ?)",
                ((s.sample_id, s.to_json()) for s in samples),
            )

    def samples(self) -> list[Sample]:
        rows = self._db.execute("SELECT record FROM samples ORDER BY rowid")
        return [Sample.from_json(r[0]) for r in rows]

    def sample_map(self) -> Mapping[str, Sample]:
        """The run's samples by id, in stored order, each rebuilt from its JSON record when
        looked up: a run of 100,000 samples holds their text compressed (about 250 bytes
        each), not 100,000 live records."""
        rows = self._db.execute("SELECT sample_id, record FROM samples ORDER BY rowid")
        return StoredSamples({sid: zlib.compress(text.encode("utf-8"), 1) for sid, text in rows})

    # -- predictions --------------------------------------------------------------------------
    def put_prediction(self, p: Prediction) -> None:
        """Insert or replace a prediction; its old scores go with it (they scored other pixels)."""
        with self._tx():
            self._db.execute(
                "DELETE FROM scores WHERE model = ? AND sample_id = ? AND k = ?",
                (p.model, p.sample_id, p.k),
            )
            self._db.execute(
                "INSERT OR REPLACE INTO predictions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    p.model,
                    p.sample_id,
                    p.k,
                    p.seed,
                    p.path,
                    p.status,
                    redact(p.error),  # an error may quote a server that echoed the key
                    p.elapsed_s,
                    time.time(),
                ),
            )

    def predictions(
        self, model: str | None = None, *, status: str | None = None
    ) -> list[Prediction]:
        return list(self._iter_predictions(model, status))

    def iter_predictions(
        self, model: str | None = None, *, status: str | None = None
    ) -> Iterator[Prediction]:
        """:meth:`predictions`, one at a time (the rows are read as they are taken)."""
        return self._iter_predictions(model, status)

    def prediction_keys(self, model: str, *, status: str | None = "ok") -> set[tuple[str, int]]:
        """(sample_id, k) pairs that already have a prediction (with ``status``, if given)."""
        return {(p.sample_id, p.k) for p in self._iter_predictions(model, status)}

    def _iter_predictions(self, model: str | None, status: str | None) -> Iterator[Prediction]:
        where, args = where_equal({"model": model, "status": status})
        return self._predictions(f"{where} ORDER BY model, rowid", args)

    def _predictions(self, tail: str, args: Sequence[Any]) -> Iterator[Prediction]:
        columns = ("model", "sample_id", "k", "seed", "path", "status", "error", "elapsed_s")
        for row in self._db.execute(f"SELECT {', '.join(columns)} FROM predictions{tail}", args):
            yield Prediction(**dict(zip(columns, row, strict=True)))

    # -- scores -------------------------------------------------------------------------------
    def put_score(self, s: Score) -> None:
        """Insert or replace a score row; its per-metric reasons (``s.reasons``) go to the
        ``reasons`` column, the record's ``error`` text beside them."""
        reasons = redact_value(dict(s.reasons))  # notes and reasons may quote an answer
        with self._tx():
            self._db.execute(
                f"INSERT OR REPLACE INTO scores ({SCORE_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    s.model or "",
                    s.sample_id,
                    s.k,
                    s.protocol,
                    s.protocol_version,
                    json.dumps({k: encode_metric(v) for k, v in s.metrics.items()}),
                    s.status,
                    redact(s.error),
                    json.dumps(redact_value(list(s.notes))),
                    time.time(),
                    json.dumps(reasons) if reasons else None,
                ),
            )

    def put_judged_metrics(
        self,
        *,
        model: str,
        sample_id: str,
        k: int,
        protocol: str,
        version: str,
        values: dict[str, float | None],
        reasons: dict[str, str] | None = None,
    ) -> None:
        """Fill judge-based metrics into an existing score row (in one transaction).

        ``values`` replace those metrics; a ``None`` value needs its reason in ``reasons`` (a
        failed, refused or unparsable judgement: missing, never 0). The row's ``error`` keeps the
        reasons of its other metrics and gets the new ones.
        """
        self.put_judged_metrics_many(
            [
                dict(
                    model=model,
                    sample_id=sample_id,
                    k=k,
                    protocol=protocol,
                    version=version,
                    values=values,
                    reasons=reasons,
                )
            ]
        )

    def put_judged_metrics_many(self, rows: Sequence[dict[str, Any]]) -> None:
        """:meth:`put_judged_metrics` for several rows (each a dict of its keyword arguments),
        in one transaction: all are written or, if one fails, none."""
        for row in rows:
            values, reasons = row["values"], row.get("reasons") or {}
            unexplained = [m for m, v in values.items() if v is None and m not in reasons]
            if unexplained:
                raise ValueError(f"judged metric(s) {unexplained} are None without a reason")
        if not rows:
            return
        with self._tx():
            for row in rows:
                self._fill_judged(row)

    def _fill_judged(self, fill: dict[str, Any]) -> None:
        model, sample_id, k = fill["model"], fill["sample_id"], fill["k"]
        protocol, version, values = fill["protocol"], fill["version"], fill["values"]
        reasons = redact_value(fill.get("reasons") or {})
        row = self._db.execute(
            "SELECT metrics, error, reasons FROM scores WHERE model = ? AND sample_id = ? "
            "AND k = ? AND protocol = ? AND protocol_version = ?",
            (model, sample_id, k, protocol, version),
        ).fetchone()
        if row is None:
            raise KeyError(
                f"no score row for {model}/{sample_id}_{k} under {protocol}@{version}: "
                "score before judging"
            )
        metrics = json.loads(row[0])
        metrics.update({m: encode_metric(v) for m, v in values.items()})
        had = json.loads(row[2]) if row[2] else {}
        kept = {m: why for m, why in had.items() if m not in values}
        kept.update({m: reasons[m] for m, v in values.items() if v is None})
        if had or not row[1]:
            error = join_reasons(kept)
        else:  # an error that is not per-metric reasons stays, the new reasons follow it
            new = join_reasons({m: reasons[m] for m, v in values.items() if v is None})
            error = "; ".join(filter(None, (row[1], new)))
        self._db.execute(
            "UPDATE scores SET metrics = ?, error = ?, reasons = ? WHERE model = ? "
            "AND sample_id = ? AND k = ? AND protocol = ? AND protocol_version = ?",
            (
                json.dumps(metrics),
                error,
                json.dumps(kept) if kept else None,
                model,
                sample_id,
                k,
                protocol,
                version,
            ),
        )

    @property
    def connection(self) -> sqlite3.Connection:
        """The SQLite connection, for stages that keep their own tables in the run store
        (judgements, for instance). Use ``with store.transaction():`` around writes."""
        return self._db

    def transaction(self):
        """A ``BEGIN IMMEDIATE`` ... ``COMMIT`` (or ``ROLLBACK`` on error) context."""
        return self._tx()

    def score_keys(
        self, protocol: str, version: str, *, status: str | None = None
    ) -> set[tuple[str, str, int]]:
        """(model, sample_id, k) triples already scored by ``protocol@version``."""
        sql = "SELECT model, sample_id, k FROM scores WHERE protocol = ? AND protocol_version = ?"
        args: list[Any] = [protocol, version]
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        return {(m, sid, k) for m, sid, k in self._db.execute(sql, args)}

    def scores(self, protocol: str | None = None) -> list[Score]:
        return list(self.iter_scores(protocol))

    def iter_scores(
        self, protocol: str | None = None, version: str | None = None
    ) -> Iterator[Score]:
        """:meth:`scores`, one at a time (the rows are read as they are taken); ``version``:
        only that version of ``protocol``."""
        where, args = where_equal({"protocol": protocol, "protocol_version": version})
        yield from self._scores(f"{where} ORDER BY model, rowid", args)

    def models(self) -> list[str]:
        """The models with a prediction or a score in the run, in name order (``""``: scores
        without a model)."""
        sql = "SELECT DISTINCT model FROM predictions UNION SELECT DISTINCT model FROM scores"
        return sorted(m or "" for (m,) in self._db.execute(sql))

    def scores_of(self, models: Sequence[str], sample_ids: Sequence[str]) -> list[Score]:
        """The scores of these models for these samples (every protocol), in stored order (one
        look-up per model: the table's key starts with the model)."""
        marks = ", ".join("?" * len(sample_ids))
        tail = f" WHERE model = ? AND sample_id IN ({marks}) ORDER BY rowid"
        return [s for m in models for s in self._scores(tail, [m, *sample_ids])]

    def _scores(self, tail: str, args: Sequence[Any]) -> Iterator[Score]:
        sql = (
            "SELECT model, sample_id, k, protocol, protocol_version, metrics, status, error, "
            "notes, reasons FROM scores" + tail
        )
        for m, sid, k, proto, ver, metrics, st, err, notes, why in self._db.execute(sql, args):
            yield (
                Score(
                    sample_id=sid,
                    model=m or None,
                    k=k,
                    protocol=proto,
                    protocol_version=ver,
                    metrics={n: decode_metric(v) for n, v in json.loads(metrics).items()},
                    status=st,
                    error=err,
                    notes=tuple(json.loads(notes)),
                    reasons=json.loads(why) if why else {},
                )
            )

    def predictions_of(self, models: Sequence[str], sample_ids: Sequence[str]) -> list[Prediction]:
        """The predictions of these models for these samples, in stored order."""
        marks = ", ".join("?" * len(sample_ids))
        tail = f" WHERE model = ? AND sample_id IN ({marks}) ORDER BY rowid"
        return [p for m in models for p in self._predictions(tail, [m, *sample_ids])]

    def samples_of(self, sample_ids: Sequence[str]) -> dict[str, Sample]:
        """These samples by id (those the run has)."""
        marks = ", ".join("?" * len(sample_ids))
        sql = f"SELECT sample_id, record FROM samples WHERE sample_id IN ({marks})"
        return {sid: Sample.from_json(r) for sid, r in self._db.execute(sql, list(sample_ids))}

    def count(self, table: str) -> int:
        """Rows of one of the run's core tables (samples, predictions, scores)."""
        if table not in ("samples", "predictions", "scores"):
            raise ValueError(f"count: {table!r} is not a core table of the run store")
        return int(self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def _tx(self):
        return Transaction(self._db, self.path)
