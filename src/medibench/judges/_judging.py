"""Judging a run: plan the calls, reuse the cache, call within a budget, fill the score rows.

:func:`judge_run` takes a run directory, one or more judge protocols and a judge config:

1. **Plan.** Every (model, sample, k) with an ``ok`` score row under a scoring protocol the judge
   fills gets one call per pass; its cache key comes from file hashes and texts only (no image is
   decoded for a cache hit).
2. **Cache.** A :class:`CachePolicy` decides per key: reuse the stored judgement, call, or skip
   (``--only-failed`` calls only stored failures).
3. **Call.** ``concurrency`` workers; a call starts only while the spent cost plus the estimates
   of the calls in flight stays within ``max_cost``; past that the run stops cleanly and a
   later run resumes (what was judged stays judged).
4. **Fill.** Each score row gets the mean over passes of the judge's scores (scaled per the
   protocol); a score no pass produced is ``None`` with the reason (``refused: ...``,
   ``unparsable: ...``, ``out_of_range: ...``, ``error: ...``), never 0.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from medibench.io import sha256_file
from medibench.judges._client import JudgeClient
from medibench.judges._config import JudgeConfig
from medibench.judges._parsing import parse_answer
from medibench.judges._protocols import JudgeProtocol, load_judge
from medibench.judges._records import CachePolicy, Judgement, JudgementStore, cache_key
from medibench.runs import RunStore

__all__ = ["JudgeReport", "judge_run", "judge_run_async"]

#: Judgement records are flushed to the run store every _FLUSH_N answers or _FLUSH_S seconds.
_FLUSH_N, _FLUSH_S = 64, 0.25


@dataclass
class JudgeReport:
    """What one judge protocol did to a run.

    Attributes:
        judge, judge_model: the judge protocol spec and the judge model id.
        items: predictions the judge applies to; ``skipped``: reason -> predictions it does not.
        planned: calls the run needed (after the cache); ``cached``: keys answered from it.
        counts: status -> new judgements stored this time (``ok``, ``refused``,
            ``unparsable``, ``error``).
        not_started: planned calls not made because the budget was reached.
        requests: HTTP attempts made (retries included).
        cost_usd: cost of this run's calls (``None`` when the config has no prices);
            ``estimated_cost_usd``: the estimate of the planned calls.
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
    not_started: int = 0
    requests: int = 0
    cost_usd: float | None = None
    estimated_cost_usd: float | None = None
    stopped_by_budget: bool = False
    dry_run: bool = False
    filled: int = 0
    missing: Counter = field(default_factory=Counter)
    spread: dict[str, float] = field(default_factory=dict)


def judge_run(
    run: str | Path | RunStore,
    judges: Sequence[str | JudgeProtocol],
    config: JudgeConfig,
    *,
    passes: int = 1,
    policy: CachePolicy | None = None,
    max_cost: float | None = None,
    dry_run: bool = False,
    client: JudgeClient | None = None,
    on_progress: Callable[[], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> list[JudgeReport]:
    """Judge a run with each of ``judges`` (specs or objects); one report per judge.

    Raises:
        MissingApiKeyError: calls are needed and the key's variable is not set.
        JudgeSetupError: the endpoint rejects every call (bad key, unknown model).
        ValueError: ``max_cost`` without prices in the config, or ``passes < 1``.
    """
    return asyncio.run(
        judge_run_async(
            run,
            judges,
            config,
            passes=passes,
            policy=policy,
            max_cost=max_cost,
            dry_run=dry_run,
            client=client,
            on_progress=on_progress,
            on_plan=on_plan,
        )
    )


async def judge_run_async(
    run: str | Path | RunStore,
    judges: Sequence[str | JudgeProtocol],
    config: JudgeConfig,
    *,
    passes: int = 1,
    policy: CachePolicy | None = None,
    max_cost: float | None = None,
    dry_run: bool = False,
    client: JudgeClient | None = None,
    on_progress: Callable[[], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> list[JudgeReport]:
    """:func:`judge_run` inside a running event loop."""
    if passes < 1:
        raise ValueError(f"passes must be >= 1, got {passes}")
    if max_cost is not None and not config.has_prices:
        raise ValueError(
            "--max-cost needs the judge's prices: set price_input_per_mtok and "
            "price_output_per_mtok (USD per million tokens) in the judge config"
        )
    store = run if isinstance(run, RunStore) else RunStore.open_existing(run)
    policy = policy or CachePolicy()
    protos = [j if isinstance(j, JudgeProtocol) else load_judge(j) for j in judges]
    budget = _Budget(max_cost)
    own_client = False
    reports = []
    try:
        jstore = JudgementStore(store)
        hashes: dict[Path, str] = {}
        plans = [_plan(store, jstore, p, config, passes, policy, hashes) for p in protos]
        for plan in plans:
            plan.report.dry_run = dry_run
            plan.report.estimated_cost_usd = _estimate(plan, jstore, config)
            if not dry_run:
                for judgement, links in plan.cached:
                    jstore.link(judgement, links)
        if on_plan is not None:
            on_plan(sum(len(plan.calls) for plan in plans))
        if not dry_run and any(plan.calls for plan in plans):
            if client is None:
                client, own_client = JudgeClient(config), True
        for plan in plans:
            if not dry_run:
                filler = _Filler(store, jstore, plan, passes)
                if plan.calls:
                    before = client.calls
                    await _execute(plan, client, jstore, config, budget, on_progress, filler)
                    plan.report.requests = client.calls - before
                filler.finish()
                store.set_meta(f"judge:{plan.judge.spec}", _describe(plan.judge, config, passes))
            reports.append(plan.report)
    finally:
        if own_client:
            await client.aclose()
        if store is not run:
            store.close()
    return reports


# -- planning ---------------------------------------------------------------------------------
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


def _plan(store, jstore, judge, config, passes, policy, hashes) -> _Plan:
    report = JudgeReport(judge=judge.spec, judge_model=config.model)
    samples = {s.sample_id: s for s in store.samples()}
    preds = {(p.model, p.sample_id, p.k): p for p in store.predictions(status="ok")}
    targets: dict[tuple[str, str, int], list[tuple[str, str]]] = defaultdict(list)
    for s in store.scores():
        if f"{s.protocol}@{s.protocol_version}" in judge.targets and s.status == "ok":
            targets[(s.model or "", s.sample_id, s.k)].append((s.protocol, s.protocol_version))
    items: dict = {}
    calls: dict[str, _Call] = {}
    for item, tgts in targets.items():
        model, sid, k = item
        sample, pred = samples.get(sid), preds.get(item)
        why = None
        if sample is None or pred is None or pred.path is None:
            why = "error: the run has no sample or prediction for this score row"
        else:
            why = judge.skip_reason(sample)
            why = f"not judged: {why}" if why else None
        if why is None:
            path = Path(pred.path)
            path = path if path.is_absolute() else store.run_dir / path
            roles = judge.images(sample, path)
            try:
                digests = [[role, _hash(p, hashes)] for role, p in roles]
            except OSError as exc:
                why = f"error: cannot read {exc.filename}: {exc.strerror}"
        if why is not None:
            report.skipped[why] += 1
            items[item] = (tgts, why)
            continue
        report.items += 1
        keys = []
        for p in range(passes):
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
            if key in calls:
                calls[key].links.append(item)
            else:
                calls[key] = _Call(key, material, p, seed, sample, [p_ for _, p_ in roles], [item])
        items[item] = (tgts, keys)
    stored = jstore.get_many(list(calls))
    todo, cached = [], []
    for key, call in calls.items():
        action = policy.action(stored.get(key))
        if action == "call":
            todo.append(call)
        elif action == "cached":
            report.cached += 1
            cached.append((stored[key], call.links))
    report.planned = len(todo)
    return _Plan(judge, report, items, todo, cached)


def _hash(path: Path, cache: dict[Path, str]) -> str:
    if path not in cache:
        cache[path] = sha256_file(path)
    return cache[path]


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
        if not self.config.has_prices:
            return 0.0
        if self.n:
            return self.config.cost(round(self.tin / self.n), round(self.tout / self.n))
        chars = self.prompt_chars + sum(len(t) for t in call.material["texts"].values())
        tokens_in = chars // 4 + len(call.paths) * self.config.est_image_tokens
        return self.config.cost(tokens_in, self.config.est_output_tokens)


# -- calling ----------------------------------------------------------------------------------
class _Budget:
    def __init__(self, max_cost: float | None) -> None:
        self.max_cost, self.spent, self.reserved, self.stopped = max_cost, 0.0, 0.0, False

    def reserve(self, estimate: float) -> bool:
        if self.max_cost is None:
            return True
        if self.stopped or self.spent + self.reserved + estimate > self.max_cost:
            self.stopped = True
            return False
        self.reserved += estimate
        return True

    def settle(self, estimate: float, cost: float | None) -> None:
        if self.max_cost is not None:
            self.reserved -= estimate
        self.spent += cost or 0.0


async def _execute(plan, client, jstore, config, budget, on_progress, filler) -> None:
    judge, report = plan.judge, plan.report
    queue = iter(plan.calls)
    spent: list[float] = []
    estimate = _Estimator(judge, jstore, config)
    fmt = judge.response_format(config.structured_output)
    structured = config.structured_output != "none"

    pending: list[tuple[Judgement, list]] = []
    last_flush = [time.monotonic()]

    def flush() -> None:
        # Judgements are written in small batches (one transaction, one fsync each): a crash
        # loses at most the answers of the last _FLUSH_S seconds, never a finished batch.
        jstore.put_many(pending)
        pending.clear()
        last_flush[0] = time.monotonic()

    async def worker() -> None:
        for call in queue:
            est = estimate(call) if budget.max_cost is not None else 0.0
            if not budget.reserve(est):
                report.not_started += 1
                report.stopped_by_budget = True
                continue
            j = _record(judge, config, call)
            try:
                body, notes = await asyncio.to_thread(
                    _request, client, judge, call, config, structured, fmt
                )
            except Exception as exc:  # unreadable image, image too large with oversize=refuse
                j.status, j.problems = "error", {f.key: f"error: {exc}" for f in judge.fields}
                body = None
            if body is not None:
                j.notes = notes
                done = await client.complete_body(body)
                _read_completion(j, done, judge, config)
            budget.settle(est, j.cost_usd)
            estimate.observe(j.input_tokens, j.output_tokens)
            if j.cost_usd is not None:
                spent.append(j.cost_usd)
            pending.append((j, call.links))
            filler.answered(j)
            if len(pending) >= _FLUSH_N or time.monotonic() - last_flush[0] >= _FLUSH_S:
                flush()
            report.counts[j.status] += 1
            if on_progress:
                on_progress()

    try:
        await asyncio.gather(*(worker() for _ in range(min(config.concurrency, len(plan.calls)))))
    finally:
        flush()
    report.cost_usd = sum(spent) if config.has_prices else None


def _request(client, judge, call, config, structured, fmt) -> tuple[bytes, list[str]]:
    """Read the images, build the messages and encode the request body (in a worker thread)."""
    messages, notes = judge.messages(
        call.sample,
        call.paths,
        structured=structured,
        max_side=config.max_image_side,
        oversize=config.oversize,
    )
    return client.request_body(messages, call.seed, fmt), notes


def _record(judge: JudgeProtocol, config: JudgeConfig, call: _Call) -> Judgement:
    return Judgement(
        key=call.key,
        judge=judge.spec,
        judge_model=config.model,
        endpoint=config.endpoint,
        prompt_file=judge.prompt.filename,
        prompt_version=judge.prompt.version,
        prompt_sha256=judge.prompt.sha256,
        pass_index=call.pass_index,
        seed=call.seed,
        material=call.material,
        status="error",
    )


def _read_completion(j: Judgement, done, judge: JudgeProtocol, config: JudgeConfig) -> None:
    j.raw, j.finish_reason = done.text, done.finish_reason
    j.input_tokens, j.output_tokens = done.input_tokens, done.output_tokens
    j.cost_usd = config.cost(done.input_tokens, done.output_tokens)
    j.latency_s, j.attempts = done.latency_s, done.attempts
    required = [f.key for f in judge.fields if f.required]
    if done.error is not None:
        j.status, j.problems = "error", {k: f"error: {done.error}" for k in required}
    elif done.refused is not None:
        j.raw = j.raw or done.refused
        j.status = "refused"
        j.problems = {k: f"refused: {done.refused}" for k in required}
    else:
        parsed = parse_answer(done.text, judge.fields)
        j.status, j.scores, j.problems = parsed.status, parsed.scores, parsed.problems


# -- filling the score rows -------------------------------------------------------------------
class _Filler:
    """Writes judged values into score rows: per prediction as soon as its last pass is
    answered, the rest at the end of the run. The writes (one transaction and fsync per row,
    through ``RunStore.put_judged_metrics``) run on one writer thread with its own connection,
    so they overlap the calls instead of stalling the event loop."""

    def __init__(self, store: RunStore, jstore: JudgementStore, plan: _Plan, passes: int):
        self.store, self.plan, self.passes = store, plan, passes
        self.items = plan.items
        keys = [k for _, v in self.items.values() if isinstance(v, list) for k in v]
        self.known: dict[str, Judgement] = jstore.get_many(keys)
        self.current = {
            (s.model or "", s.sample_id, s.k, s.protocol, s.protocol_version): s.metrics
            for s in store.scores()
        }
        called = {c.key for c in plan.calls}
        self.waiting: dict[tuple, set[str]] = {}
        self.by_key: dict[str, list[tuple]] = defaultdict(list)
        for item, (_, keys_) in self.items.items():
            if isinstance(keys_, list) and called & set(keys_):
                self.waiting[item] = called & set(keys_)
                for k in self.waiting[item]:
                    self.by_key[k].append(item)
        self.done: set[tuple] = set()
        self.spreads: dict[str, list[float]] = defaultdict(list)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medibench-judge-fill")
        self._local = threading.local()
        self._writes: list[Future] = []

    def _put(self, kwargs: dict) -> None:  # on the writer thread
        st = getattr(self._local, "store", None)
        if st is None:
            st = self._local.store = RunStore(self.store.run_dir)
        st.put_judged_metrics(**kwargs)

    def _close(self) -> None:  # on the writer thread
        st = getattr(self._local, "store", None)
        if st is not None:
            st.close()

    def answered(self, j: Judgement) -> None:
        self.known[j.key] = j
        for item in self.by_key.pop(j.key, ()):
            left = self.waiting[item]
            left.discard(j.key)
            if not left:
                self.fill(item)

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
        if self.passes > 1:
            for f in judge.fields:
                vals = [j.scores[f.key] for j in got if f.key in j.scores]
                if len(vals) > 1:
                    self.spreads[f.key].append(_std(vals))
        for proto, version in targets:
            values: dict[str, float | None] = {}
            reasons: dict[str, str] = {}
            for fill in (f for f in judge.fills if f.protocol == f"{proto}@{version}"):
                if isinstance(keys, str):
                    values[fill.metric], reasons[fill.metric] = None, f"{keys} [{judge.spec}]"
                    continue
                vals = [j.scores[fill.field] for j in got if fill.field in j.scores]
                if vals:
                    values[fill.metric] = sum(vals) / len(vals) / fill.divide_by
                else:
                    j = got[0]
                    why = j.problems.get(fill.field) or f"{j.status}: no score"
                    values[fill.metric] = None
                    reasons[fill.metric] = (
                        f"{why} [{judge.spec}, {j.judge_model}, judgement {j.key[:12]}]"
                    )
                    report.missing[fill.metric] += 1
            if not values:
                continue
            report.filled += 1
            now = self.current.get((model, sid, k, proto, version), {})
            if all(m in now and now[m] == v and v is not None for m, v in values.items()):
                continue  # already holds these values (a re-run): no write
            self._writes.append(
                self._pool.submit(
                    self._put,
                    dict(
                        model=model,
                        sample_id=sid,
                        k=k,
                        protocol=proto,
                        version=version,
                        values=values,
                        reasons=reasons,
                    ),
                )
            )


def _std(vals: list[float]) -> float:
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals))


def _describe(judge: JudgeProtocol, config: JudgeConfig, passes: int) -> dict:
    """What goes into the run's meta for a judge (never the key)."""
    return {
        "judge_model": config.model,
        "endpoint": config.endpoint,
        "prompt_file": judge.prompt.filename,
        "prompt_version": judge.prompt.version,
        "prompt_sha256": judge.prompt.sha256,
        "decoding": config.decoding(config.seed),
        "structured_output": config.structured_output,
        "passes": passes,
    }
