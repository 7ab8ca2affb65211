"""Filling the score rows of a run with a judge's values.

Each score row gets the mean over the ``ok`` passes of the judge's scores (scaled per the
protocol): a refused, unparsable or failed answer fills nothing, even the part of it that parsed
(unless the protocol declares its fields independent). A score no pass produced is ``None`` with
the reason (``refused: ...``, ``unparsable: ...``, ``out_of_range: ...``, ``error: ...``), never 0.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor

from medibench.judges._planning import _Plan
from medibench.judges._records import Judgement, JudgementStore
from medibench.runs import RunStore

#: The names of a score row's key (:attr:`_Filler.current`'s tuples) in a judged-metrics row.
_ROW_KEY = ("model", "sample_id", "k", "protocol", "version")


class _Filler:
    """Writes judged values into score rows: per prediction as soon as its last pass is
    answered, the rest at the end of the run. Answers and score-row fills go to one writer
    thread with its own connection, which commits whatever has queued since its last commit
    together (a group commit: the answers in one transaction, the fills in the next, an fsync
    each), so the writes overlap the calls and one fsync covers many of them instead of
    stalling the event loop or capping the rate (one fsync per score row cost 4 ms each)."""

    def __init__(self, store: RunStore, plan: _Plan, passes: int):
        self.store, self.plan, self.passes = store, plan, passes
        self.items = plan.items
        self.known: dict[str, Judgement] = {}
        self.current: dict[tuple, dict] = {}
        self.waiting: dict[tuple, set[str]] = {}
        self.by_key: dict[str, list[tuple]] = defaultdict(list)
        self.answered_keys: set[str] = set()  # answered in this run
        self.done: set[tuple] = set()
        self.spreads: dict[str, list[float]] = defaultdict(list)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medibench-judge-fill")
        self._local = threading.local()
        self._writes: list[Future] = []
        self._answers: list[tuple[Judgement, list[tuple[str, str, int]]]] = []
        self._fills: list[dict] = []
        self._queued_lock = threading.Lock()
        self.uncommitted = 0  # answers queued and not yet committed
        self._failed: BaseException | None = None  # a commit that failed fails every later one

    def begin(self, scores: list | None = None) -> None:
        """Read the score rows as they are now (``scores``: as just read), before this judge
        fills any: a row that already holds a judge's values is not written again. Called when
        this judge's calls start (an earlier judge of the run may have filled the same rows)."""
        self.current = {
            (s.model or "", s.sample_id, s.k, s.protocol, s.protocol_version): s.metrics
            for s in (self.store.scores() if scores is None else scores)
        }

    def add(self, items: list[tuple], stored: dict[str, Judgement], called: set[str]) -> None:
        """Predictions just planned (keys of ``self.items``): ``stored`` holds the judgements
        stored before for their keys, ``called`` the keys this run calls. A prediction is filled
        once every called key of it is answered (the others at :meth:`finish`)."""
        for item in items:
            keys = self.items[item][1]
            if not isinstance(keys, list):
                continue
            for k in keys:
                if k in stored and k not in self.known:
                    self.known[k] = stored[k]
            left = {k for k in keys if k in called and k not in self.answered_keys}
            if left:
                self.waiting[item] = left
                for k in left:
                    self.by_key[k].append(item)

    def store_answer(self, j: Judgement, links: list[tuple[str, str, int]]) -> Future:
        """Queue ``j`` for the writer thread; the future is done once it is committed (with
        whatever else queued meanwhile: one transaction and fsync for them all)."""
        with self._queued_lock:
            self._answers.append((j, links))
            self.uncommitted += 1
        return self._commit_soon()

    def check(self) -> None:
        """Raise the error of a commit that failed (a full disk): the run stops there."""
        if self._failed is not None:
            raise self._failed

    def _commit_soon(self) -> Future:
        future = self._pool.submit(self._commit)
        self._writes.append(future)
        return future

    def _commit(self) -> None:  # on the writer thread
        self.check()
        with self._queued_lock:
            answers, self._answers = self._answers, []
            fills, self._fills = self._fills, []
        try:
            stores = self._writer()
            if answers:
                stores.judgements.put_many(answers)
            if fills:  # after their answers: a filled row's judgement is always stored
                stores.store.put_judged_metrics_many(fills)
        except BaseException as exc:
            self._failed = exc
            raise
        finally:
            with self._queued_lock:
                self.uncommitted -= len(answers)

    def _writer(self) -> _WriterStores:  # on the writer thread: its own connection
        stores = getattr(self._local, "stores", None)
        if stores is None:
            stores = self._local.stores = _WriterStores(RunStore(self.store.run_dir))
        return stores

    def _close(self) -> None:  # on the writer thread
        stores = getattr(self._local, "stores", None)
        if stores is not None:
            stores.store.close()

    def answered(self, j: Judgement) -> None:
        self.known[j.key] = j
        self.answered_keys.add(j.key)
        for item in self.by_key.pop(j.key, ()):
            left = self.waiting[item]
            left.discard(j.key)
            if not left:
                self.fill(item)

    def abandon(self) -> None:
        """The run stopped early (a setup error, an interrupt): let the queued writes finish
        and close the writer's connection, filling nothing more."""
        self._pool.submit(self._close).result()
        self._pool.shutdown()

    def finish(self) -> None:
        try:
            for item in self.items:
                if item not in self.done:
                    self.fill(item)
            for f in self._writes:
                f.result()  # re-raises a failed write
        finally:
            self._pool.submit(self._close).result()
            self._pool.shutdown()
        report = self.plan.report
        report.spread = {k: sum(v) / len(v) for k, v in self.spreads.items()}

    def fill(self, item: tuple) -> None:
        self.done.add(item)
        judge, report = self.plan.judge, self.plan.report
        model, sid, k = item
        targets, keys = self.items[item]
        got = [] if isinstance(keys, str) else [self.known[x] for x in keys if x in self.known]
        if isinstance(keys, list) and not got:
            return  # not judged yet (budget, --only-failed): leave the row as it is
        # All or nothing: only an ``ok`` answer's scores fill (a stored judgement from before
        # this rule may hold the part of a failed answer that parsed: never used).
        usable = [j for j in got if j.status == "ok" or judge.independent_fields]
        if self.passes > 1:
            for f in judge.fields:
                vals = [j.scores[f.key] for j in usable if f.key in j.scores]
                if len(vals) > 1:
                    self.spreads[f.key].append(_std(vals))
        for proto, version in targets:
            values: dict[str, float | None] = {}
            reasons: dict[str, str] = {}
            for fill in (f for f in judge.fills if f.protocol == f"{proto}@{version}"):
                if isinstance(keys, str):
                    values[fill.metric], reasons[fill.metric] = None, f"{keys} [{judge.spec}]"
                    continue
                vals = [j.scores[fill.field] for j in usable if fill.field in j.scores]
                if vals:
                    values[fill.metric] = sum(vals) / len(vals) / fill.divide_by
                else:
                    j = next((x for x in got if x.status != "ok"), got[0])
                    why = j.problems.get(fill.field) or f"{j.status}: no score"
                    values[fill.metric] = None
                    reasons[fill.metric] = (
                        f"{why} [{judge.spec}, {j.judge_model}, judgement {j.key[:12]}]"
                    )
                    report.missing[fill.metric] += 1
            if not values:
                continue
            report.filled += 1
            key = (model, sid, k, proto, version)
            now = self.current.get(key, {})
            if all(m in now and now[m] == v and v is not None for m, v in values.items()):
                continue  # already holds these values (a re-run): no write
            row = {**dict(zip(_ROW_KEY, key, strict=True)), "values": values, "reasons": reasons}
            with self._queued_lock:
                self._fills.append(row)
            self._commit_soon()


def _std(vals: list[float]) -> float:
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals))


class _WriterStores:
    """The writer thread's run store and its judgement tables."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.judgements = JudgementStore(store)
