"""Planning a judge's calls over a run: what to judge, each call's cache key, what is cached.

Every (model, sample, k) with an ``ok`` score row under a scoring protocol the judge fills gets one
call per pass; its cache key comes from file hashes and texts only (no image is decoded for a cache
hit). :class:`_Planner` plans a chunk of predictions at a time (the calls of a chunk can go out
while the next is hashed, :class:`_Hasher`). :class:`JudgeReport` starts here and is completed
by the calling and filling steps.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medibench.io import sha256_file
from medibench.judges._config import JudgeConfig
from medibench.judges._protocols import JudgeProtocol
from medibench.judges._records import Judgement, JudgementStore, cache_key

__all__ = ["JudgeReport"]


@dataclass
class JudgeReport:
    """What one judge protocol did to a run.

    Attributes:
        judge, judge_model: the judge protocol spec and the judge model id.
        items: predictions the judge applies to; ``skipped``: reason -> predictions it does not.
        planned: calls the run needed (after the cache); ``cached``: keys answered from it.
        counts: status -> new judgements stored this time (``ok``, ``refused``,
            ``unparsable``, ``error``).
        failures: failure kind (``HTTP 503``, ``HTTP 200, body not JSON``, ``timeout``, ...) ->
            calls of this run that got no answer (stored as ``error``; a re-run asks again).
        not_started: planned calls not made because the budget was reached.
        requests: HTTP attempts made (retries included).
        cost_usd: cost of this run's calls (``None`` when the config has no prices);
            ``estimated_cost_usd``: the estimate of the planned calls.
        spent_before_usd, spent_after_usd: the run folder's judge spend (every invocation)
            before and after this run; ``max_cost``: the folder's budget, if one was given.
        filled: score rows updated; ``missing``: metric -> rows left ``None`` by a failure.
        spread: score field -> mean over predictions of the standard deviation across passes.
    """

    judge: str
    judge_model: str
    items: int = 0
    skipped: Counter = field(default_factory=Counter)
    planned: int = 0
    cached: int = 0
    counts: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    not_started: int = 0
    requests: int = 0
    cost_usd: float | None = None
    estimated_cost_usd: float | None = None
    spent_before_usd: float = 0.0
    spent_after_usd: float = 0.0
    max_cost: float | None = None
    stopped_by_budget: bool = False
    dry_run: bool = False
    filled: int = 0
    missing: Counter = field(default_factory=Counter)
    spread: dict[str, float] = field(default_factory=dict)


@dataclass
class _Call:
    key: str
    material: dict
    pass_index: int
    seed: int | None
    sample: object
    paths: list[Path]
    links: list[tuple[str, str, int]]


@dataclass
class _Plan:
    judge: JudgeProtocol
    report: JudgeReport
    #: (model, sample_id, k) -> (scoring protocol targets, keys per pass or a skip reason)
    items: dict[tuple[str, str, int], tuple[list[tuple[str, str]], list[str] | str]]
    calls: list[_Call]
    #: stored judgements reused, with the predictions that use them (linked unless dry run)
    cached: list[tuple[Judgement, list[tuple[str, str, int]]]]


def _describes(judge: JudgeProtocol, spec: str, sample, protocols: dict[str, Any]) -> bool:
    """Whether the scoring protocol ``spec`` counts any metric this judge fills as describing
    ``sample`` (its ``applicable_metrics``; protocols without one take every judged metric).
    ``protocols`` keeps each spec's loaded protocol for the next row."""
    from medibench.protocols import load_protocol

    if spec not in protocols:
        protocols[spec] = load_protocol(spec)
    applies = getattr(protocols[spec], "applicable_metrics", None)
    if applies is None:
        return True
    names = applies(sample)
    if names is None:  # the protocol declares every metric applicable
        return True
    wanted = {f.metric for f in judge.fills if f.protocol == spec}
    return bool(wanted & set(names))


class _Planner:
    """Plans one judge's calls over a run, a chunk of predictions at a time, in order.

    Made at once: which predictions the judge applies to and the image files of each.
    :meth:`step` then keys the next chunk (its files hashed on the :class:`_Hasher`'s threads,
    submitted ahead by the caller), looks its keys up in the store and decides per key: call,
    reuse or skip; the calls can start while the later chunks are hashed. A key met again in
    a later chunk (two models with byte-identical outputs) links its prediction to the same
    call; :attr:`late` lists those, to link again once the call is answered.
    """

    def __init__(self, store, jstore, judge, config, passes, policy, hasher: _Hasher) -> None:
        self.jstore, self.judge, self.config = jstore, judge, config
        self.passes, self.policy, self.hasher = passes, policy, hasher
        report = JudgeReport(judge=judge.spec, judge_model=config.model)
        self.plan = _Plan(judge, report, {}, [], [])
        samples = {s.sample_id: s for s in store.samples()}
        preds = {(p.model, p.sample_id, p.k): p for p in store.predictions(status="ok")}
        targets: dict[tuple[str, str, int], list[tuple[str, str]]] = defaultdict(list)
        self.scores = store.scores()  # the filler starts from them too
        protocols: dict[str, Any] = {}
        for s in self.scores:
            spec = f"{s.protocol}@{s.protocol_version}"
            if spec in judge.targets and s.status == "ok":
                sample = samples.get(s.sample_id)
                if sample is not None and not _describes(judge, spec, sample, protocols):
                    continue  # e.g. MieDB's rubric on a perception record: not its metric
                targets[(s.model or "", s.sample_id, s.k)].append((s.protocol, s.protocol_version))
        self.targets = targets
        self.order = list(targets)
        self.shown: dict[tuple[str, str, int], tuple[object, list[tuple[str, Path]]] | str] = {}
        for item in self.order:
            sample, pred = samples.get(item[1]), preds.get(item)
            if sample is None or pred is None or pred.path is None:
                self.shown[item] = "error: the run has no sample or prediction for this score row"
            elif skip := judge.skip_reason(sample):
                self.shown[item] = f"not judged: {skip}"
            else:
                path = Path(pred.path)
                path = path if path.is_absolute() else store.run_dir / path
                self.shown[item] = (sample, judge.images(sample, path))
        self.pos = 0
        self.keyed: dict[str, _Call] = {}  # every key planned so far
        self.called: set[str] = set()  # the keys this run calls
        self.stored: dict[str, Judgement] = {}  # what the store held for the keys planned
        self.late: set[str] = set()  # keys linked to a prediction after their decision
        self.action: dict[str, str] = {}  # key -> call, cached or skip

    @property
    def done(self) -> bool:
        return self.pos >= len(self.order)

    def paths(self, items: list[tuple[str, str, int]]) -> list[Path]:
        """The image files of ``items``."""
        return [p for i in items if not isinstance(v := self.shown[i], str) for _, p in v[1]]

    def next_items(self, n: int) -> list[tuple[str, str, int]]:
        return self.order[self.pos : self.pos + n]

    def step(self, n: int) -> tuple[list[tuple[str, str, int]], list[_Call]]:
        """Plan the next ``n`` predictions (hashing what is not hashed yet); returns them and
        the calls they add (also appended to ``plan.calls``; reuses to ``plan.cached``)."""
        judge, config, report = self.judge, self.config, self.plan.report
        chunk = self.next_items(n)
        self.pos += len(chunk)
        new: list[_Call] = []
        new_keys: set[str] = set()
        for item in chunk:
            tgts, got = self.targets[item], self.shown[item]
            why: str | None = None
            sample = None
            if isinstance(got, str):
                why = got
            else:
                sample, roles = got
                try:
                    digests = [[role, self.hasher.result(p)] for role, p in roles]
                except OSError as exc:
                    why = f"error: cannot read {exc.filename}: {exc.strerror}"
            if why is not None or sample is None:
                why = why or "error: no sample"
                report.skipped[why] += 1
                self.plan.items[item] = (tgts, why)
                continue
            report.items += 1
            keys = []
            for p in range(self.passes):
                seed = None if config.seed is None else config.seed + p
                material = {
                    "judge": judge.spec,
                    "prompt_file": judge.prompt.filename,
                    "prompt_version": judge.prompt.version,
                    "prompt_sha256": judge.prompt.sha256,
                    "judge_model": config.model,
                    "endpoint": config.endpoint,
                    "images": digests,
                    "texts": judge.texts(sample),
                    "decoding": config.decoding(seed),
                    "structured_output": config.structured_output,
                    "max_image_side": config.max_image_side,
                    "oversize": config.oversize,
                    "pass_index": p,
                }
                key = cache_key(material)
                keys.append(key)
                if key in self.keyed:
                    self.keyed[key].links.append(item)
                    if key not in new_keys:
                        self.late.add(key)
                else:
                    paths = [p_ for _, p_ in roles]
                    self.keyed[key] = call = _Call(key, material, p, seed, sample, paths, [item])
                    new.append(call)
                    new_keys.add(key)
            self.plan.items[item] = (tgts, keys)
        stored = self.jstore.get_many([c.key for c in new])
        self.stored.update(stored)
        todo = []
        for call in new:
            action = self.action[call.key] = self.policy.action(stored.get(call.key))
            if action == "call":
                todo.append(call)
                self.called.add(call.key)
            elif action == "cached":
                report.cached += 1
                self.plan.cached.append((stored[call.key], call.links))
        self.plan.calls.extend(todo)
        report.planned = len(self.plan.calls)
        return chunk, todo

    def relinks(self, answered: dict[str, Judgement]) -> list[tuple[Judgement, list]]:
        """The judgements (reused, or ``answered`` in this run) of the keys linked to more
        predictions after their decision, with all their predictions."""
        out = []
        for key in sorted(self.late):
            action = self.action[key]
            j = answered.get(key) if action == "call" else self.stored.get(key)
            if j is not None and action != "skip":
                out.append((j, self.keyed[key].links))
        return out


class _Hasher:
    """sha256 of image files on :data:`HASH_THREADS` threads (hashlib lets go of the GIL while
    it hashes; planning three 256x256 PNGs per call spent 0.4 of its 0.6 ms hashing), each file
    once per run, :data:`HASH_GROUP` files per task (a future per file cost the event loop
    0.1 ms each); the OSError of a file that cannot be read comes back from :meth:`result`."""

    def __init__(self) -> None:
        self.futures: dict[Path, tuple[Future[list[str | OSError]], int]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, paths: list[Path]) -> None:
        todo = list(dict.fromkeys(p for p in paths if p not in self.futures))
        if todo and self._pool is None:
            self._pool = ThreadPoolExecutor(HASH_THREADS, "medibench-judge-hash")
        for start in range(0, len(todo), HASH_GROUP):
            group = todo[start : start + HASH_GROUP]
            assert self._pool is not None
            future = self._pool.submit(_hash_group, group)
            self.futures.update((p, (future, i)) for i, p in enumerate(group))

    def futures_of(self, paths: list[Path]) -> list[Future]:
        """The distinct tasks hashing ``paths`` (submitted now if they were not)."""
        self.submit(paths)
        return list({id(f): f for f, _ in (self.futures[p] for p in paths)}.values())

    def result(self, path: Path) -> str:
        if path not in self.futures:
            self.submit([path])
        future, i = self.futures[path]
        got = future.result()[i]
        if isinstance(got, OSError):
            raise got
        return got

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _hash_group(paths: list[Path]) -> list[str | OSError]:
    out: list[str | OSError] = []
    for path in paths:
        try:
            out.append(sha256_file(path))
        except OSError as exc:
            out.append(exc)
    return out


#: Files hashed per task.
HASH_GROUP = 16
#: Threads hashing the image files of a plan.
HASH_THREADS = max(1, min(4, os.cpu_count() or 1))


def _estimate(plan: _Plan, jstore: JudgementStore, config: JudgeConfig) -> float | None:
    if not config.has_prices:
        return None
    est = _Estimator(plan.judge, jstore, config)
    return sum(est(c) for c in plan.calls)


class _Estimator:
    """Cost guess for one call: the mean usage of answers seen (this run, else stored ones),
    else prompt characters / 4 plus ``est_image_tokens`` per image and ``est_output_tokens``."""

    def __init__(self, judge: JudgeProtocol, jstore: JudgementStore, config: JudgeConfig):
        self.judge, self.config = judge, config
        seen = jstore.usage(judge.spec, config.model)
        self.n, self.tin, self.tout = (
            (seen[2], seen[0] * seen[2], seen[1] * seen[2]) if seen else (0, 0.0, 0.0)
        )
        self.prompt_chars = sum(len(t) for t in judge.prompt.sections.values())

    def observe(self, tokens_in: int | None, tokens_out: int | None) -> None:
        if tokens_in is not None and tokens_out is not None:
            self.n, self.tin, self.tout = self.n + 1, self.tin + tokens_in, self.tout + tokens_out

    def __call__(self, call: _Call) -> float:
        if self.n:
            cost = self.config.cost(round(self.tin / self.n), round(self.tout / self.n))
        else:
            chars = self.prompt_chars + sum(len(t) for t in call.material["texts"].values())
            tokens_in = chars // 4 + len(call.paths) * self.config.est_image_tokens
            cost = self.config.cost(tokens_in, self.config.est_output_tokens)
        return 0.0 if cost is None else cost  # no prices: nothing to budget
