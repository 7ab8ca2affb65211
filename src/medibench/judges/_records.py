"""Judgement records and the judge cache, kept in the run's ``run.sqlite``.

Three tables beside the run store's own, declared through it
(:meth:`medibench.runs.RunStore.declare_table`) so that ``merge`` and ``export`` cover them:

* ``judgements``: one row per cache key (:func:`cache_key`): the raw answer, the parsed scores,
  the per-score problems, the status (``ok``, ``refused``, ``unparsable``, ``error``), token
  usage, cost, latency, attempts, notes (resizes), the prompt file, version and sha256, and the
  key material (no image bytes, no secrets).
* ``judgement_links``: which (model, sample, k, judge protocol, judge model, endpoint, pass)
  uses which key: two models with byte-identical outputs share one judgement.
* ``judge_spend``: one row per paid answer (its cost), never replaced: the run folder's
  cumulative judge spend, which ``--max-cost`` budgets across invocations.

Raw answers, problems and notes are redacted (:func:`medibench.calls.redact`) as they are stored.

The key is the sha256 of the judge model id, the endpoint, the prompt file's sha256, the judge
protocol and its version, the images' content hashes (in the order shown), the texts shown, the
decoding parameters and seed, the answer format, the image limits and the pass index. Same key,
same answer: it is never paid for twice. :class:`CachePolicy` says which stored judgements
are reused.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from medibench._sql import where_equal
from medibench.calls import redact, redact_value

__all__ = [
    "CachePolicy",
    "Judgement",
    "JudgementStore",
    "cache_key",
    "linked_judgements",
    "FAILED",
    "SUMMARY_FILE",
]

#: The statuses that count as missing (``--only-failed`` re-judges them).
FAILED = frozenset({"refused", "unparsable", "error"})

#: ``medibench judge`` writes :meth:`JudgementStore.summary` here, in the run folder.
SUMMARY_FILE = "judge_summary.json"

# (name, columns, key columns): declared through the run store, so merge and export cover them.
_TABLES = (
    (
        "judgements",
        "key TEXT PRIMARY KEY, judge TEXT NOT NULL, judge_model TEXT NOT NULL, "
        "endpoint TEXT NOT NULL, prompt_file TEXT NOT NULL, prompt_version TEXT NOT NULL, "
        "prompt_sha256 TEXT NOT NULL, pass_index INTEGER NOT NULL, seed INTEGER, "
        "material TEXT NOT NULL, status TEXT NOT NULL, raw TEXT, scores TEXT NOT NULL, "
        "problems TEXT NOT NULL, finish_reason TEXT, input_tokens INTEGER, "
        "output_tokens INTEGER, cost_usd REAL, latency_s REAL, attempts INTEGER, "
        "notes TEXT NOT NULL, created_at REAL NOT NULL",
        ("key",),
    ),
    # A ledger: every paid answer counts (a merge drops only exact duplicates).
    (
        "judge_spend",
        "key TEXT NOT NULL, judge TEXT NOT NULL, judge_model TEXT NOT NULL, "
        "cost_usd REAL NOT NULL, at REAL NOT NULL",
        (),
    ),
    # Per output (model, sample_id, k): a merge takes a link with the output it judged.
    (
        "judgement_links",
        "model TEXT NOT NULL, sample_id TEXT NOT NULL, k INTEGER NOT NULL, judge TEXT NOT NULL, "
        "judge_model TEXT NOT NULL, endpoint TEXT NOT NULL, pass_index INTEGER NOT NULL, "
        "key TEXT NOT NULL, "
        "PRIMARY KEY (model, sample_id, k, judge, judge_model, endpoint, pass_index)",
        ("model", "sample_id", "k", "judge", "judge_model", "endpoint", "pass_index"),
    ),
)


def cache_key(material: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the key material."""
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachePolicy:
    """Which stored judgements a judging run reuses (the inspect_ai idea: a policy object).

    Attributes:
        read: reuse stored judgements at all (``False``: call again for everything, replacing).
        retry: statuses that are called again instead of reused. By default ``error`` (no
            answer was received: an HTTP failure, a body that is not an answer, an unreadable
            image), so a plain re-run asks again only for those; refused and unparsable answers
            were paid for and are reused (``--only-failed`` asks again for them too).
        only_retry: call nothing that has no stored judgement (``--only-failed``).
    """

    read: bool = True
    retry: frozenset[str] = frozenset({"error"})
    only_retry: bool = False

    @classmethod
    def only_failed(cls) -> CachePolicy:
        """Re-judge stored failures (refused, unparsable, error), nothing else."""
        return cls(retry=FAILED, only_retry=True)

    def action(self, stored: Judgement | None) -> str:
        """``"call"``, ``"cached"`` or ``"skip"`` for a key with this stored judgement."""
        if stored is None:
            return "skip" if self.only_retry else "call"
        if not self.read or stored.status in self.retry:
            return "call"
        return "skip" if self.only_retry else "cached"


@dataclass
class Judgement:
    """One judge answer and what was made of it."""

    key: str
    judge: str
    judge_model: str
    endpoint: str
    prompt_file: str
    prompt_version: str
    prompt_sha256: str
    pass_index: int
    seed: int | None
    material: dict[str, Any]
    status: str
    raw: str | None = None
    scores: dict[str, float] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    attempts: int = 0
    notes: list[str] = field(default_factory=list)
    created_at: float = 0.0


_COLUMNS = (
    "key judge judge_model endpoint prompt_file prompt_version prompt_sha256 pass_index seed "
    "material status raw scores problems finish_reason input_tokens output_tokens cost_usd "
    "latency_s attempts notes created_at"
).split()
_JSON = {"material", "scores", "problems", "notes"}


class JudgementStore:
    """The judgement tables of one run store (``RunStore``)."""

    def __init__(self, store) -> None:
        self.store = store
        for name, columns, key in _TABLES:
            store.declare_table(name, columns, key, stage="judge")
        self.db = store.connection
        self._seed_spend()

    def _seed_spend(self) -> None:
        # A run judged before judge_spend existed: its stored costs start the tally.
        empty = self.db.execute("SELECT 1 FROM judge_spend LIMIT 1").fetchone() is None
        paid = self.db.execute("SELECT 1 FROM judgements WHERE cost_usd > 0 LIMIT 1").fetchone()
        if empty and paid is not None:
            with self.store.transaction():
                self.db.execute(
                    "INSERT INTO judge_spend SELECT key, judge, judge_model, cost_usd, created_at "
                    "FROM judgements WHERE cost_usd > 0"
                )

    def spent_usd(self) -> float:
        """USD spent on judge answers in this run folder, over every invocation."""
        row = self.db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM judge_spend").fetchone()
        return float(row[0])

    def get(self, key: str) -> Judgement | None:
        row = self.db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM judgements WHERE key = ?", (key,)
        ).fetchone()
        return None if row is None else _decode(row)

    def get_many(self, keys: list[str]) -> dict[str, Judgement]:
        out: dict[str, Judgement] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            rows = self.db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM judgements "
                f"WHERE key IN ({', '.join('?' * len(chunk))})",
                chunk,
            )
            out.update((j.key, j) for j in map(_decode, rows))
        return out

    def put(self, j: Judgement, links: list[tuple[str, str, int]]) -> None:
        """Store ``j`` (replacing an older answer to the same key) and link it to the
        ``(model, sample_id, k)`` that asked for it, in one transaction."""
        self.put_many([(j, links)])

    def put_many(self, items: list[tuple[Judgement, list[tuple[str, str, int]]]]) -> None:
        """:meth:`put` for several judgements, in one transaction."""
        if not items:
            return
        rows = []
        for j, _ in items:
            j.created_at = j.created_at or time.time()
            j.raw = redact(j.raw)
            j.problems = redact_value(j.problems)
            j.notes = redact_value(j.notes)
            rows.append(
                [
                    json.dumps(getattr(j, c), sort_keys=True) if c in _JSON else getattr(j, c)
                    for c in _COLUMNS
                ]
            )
        spend = [
            (j.key, j.judge, j.judge_model, j.cost_usd, j.created_at)
            for j, _ in items
            if j.cost_usd
        ]
        with self.store.transaction():
            self.db.executemany("INSERT INTO judge_spend VALUES (?, ?, ?, ?, ?)", spend)
            self.db.executemany(
                f"INSERT OR REPLACE INTO judgements ({', '.join(_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_COLUMNS))})",
                rows,
            )
            for j, links in items:
                self._link(j, links)

    def link(self, j: Judgement, links: list[tuple[str, str, int]]) -> None:
        """Record that ``links`` use the stored judgement ``j`` (a cache hit)."""
        self.link_many([(j, links)])

    def link_many(self, items: list[tuple[Judgement, list[tuple[str, str, int]]]]) -> None:
        """:meth:`link` for several cache hits, in one transaction (a re-run over a judged run
        links every prediction: one commit and fsync each took a millisecond per prediction)."""
        if not items:
            return
        with self.store.transaction():
            for j, links in items:
                self._link(j, links)

    def _link(self, j: Judgement, links: list[tuple[str, str, int]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO judgement_links VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (m, sid, k, j.judge, j.judge_model, j.endpoint, j.pass_index, j.key)
                for m, sid, k in links
            ],
        )

    def linked(
        self, *, judge: str | None = None, judge_model: str | None = None
    ) -> list[tuple[str, str, int, Judgement]]:
        """``(model, sample_id, k, judgement)`` for every link (filtered by judge protocol
        spec and/or judge model id)."""
        return linked_judgements(self.db, judge=judge, judge_model=judge_model)

    def summary(self) -> list[dict[str, Any]]:
        """Per judge protocol and judge model, everything judged in this run folder so far:
        ``items`` (model outputs x passes linked to a judgement), how many of them have each
        status (``ok``, ``refused``, ``unparsable``, ``error``) and ``cost_usd`` (the folder's
        spend on that judge, every invocation)."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        links = self.db.execute(
            "SELECT l.judge, l.judge_model, j.status, COUNT(*) FROM judgement_links l "
            "JOIN judgements j ON j.key = l.key GROUP BY l.judge, l.judge_model, j.status"
        )
        for judge, model, status, n in links:
            row = rows.setdefault((judge, model), _summary_row(judge, model))
            row[status] = row.get(status, 0) + n
            row["items"] += n
        spend = self.db.execute(
            "SELECT judge, judge_model, SUM(cost_usd) FROM judge_spend GROUP BY judge, judge_model"
        )
        for judge, model, cost in spend:
            rows.setdefault((judge, model), _summary_row(judge, model))["cost_usd"] = cost
        return [rows[key] for key in sorted(rows)]

    def usage(self, judge: str, judge_model: str) -> tuple[float, float, int] | None:
        """Mean (input, output) tokens of answered calls of this judge, and their count."""
        row = self.db.execute(
            "SELECT AVG(input_tokens), AVG(output_tokens), COUNT(*) FROM judgements "
            "WHERE judge = ? AND judge_model = ? AND input_tokens IS NOT NULL "
            "AND output_tokens IS NOT NULL",
            (judge, judge_model),
        ).fetchone()
        return None if not row or not row[2] else (row[0], row[1], row[2])


def linked_judgements(
    db: sqlite3.Connection, *, judge: str | None = None, judge_model: str | None = None
) -> list[tuple[str, str, int, Judgement]]:
    """``(model, sample_id, k, judgement)`` for every link of a run's ``run.sqlite``, in order
    of model, sample, k, judge protocol, judge model, endpoint and pass (filtered by judge
    protocol spec and/or judge model id); ``[]`` for a run never judged. Reads only: a report
    reads a run with it without adding the judge's tables."""
    have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"judgements", "judgement_links"} <= have:
        return []
    sql = (
        "SELECT l.model, l.sample_id, l.k, "
        + ", ".join(f"j.{c}" for c in _COLUMNS)
        + " FROM judgement_links l JOIN judgements j ON j.key = l.key"
    )
    where, args = where_equal({"l.judge": judge, "l.judge_model": judge_model})
    sql += where + " ORDER BY l.model, l.sample_id, l.k, l.judge, l.judge_model, l.endpoint, "
    sql += "l.pass_index"
    return [(r[0], r[1], r[2], _decode(r[3:])) for r in db.execute(sql, args)]


def _summary_row(judge: str, judge_model: str) -> dict[str, Any]:
    statuses = dict.fromkeys(("ok", "refused", "unparsable", "error"), 0)
    return {"judge": judge, "judge_model": judge_model, "items": 0, **statuses, "cost_usd": 0.0}


def _decode(row: Any) -> Judgement:
    d = {c: (json.loads(v) if c in _JSON else v) for c, v in zip(_COLUMNS, row, strict=True)}
    return Judgement(**d)
