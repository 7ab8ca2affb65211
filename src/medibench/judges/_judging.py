"""Judging a run: plan the calls, reuse the cache, call within a budget, fill the score rows.

:func:`judge_run` takes a run directory, one or more judge protocols and a judge config:

1. **Plan.** Every (model, sample, k) with an ``ok`` score row under a scoring protocol the judge
   fills gets one call per pass; its cache key comes from file hashes and texts only (no image is
   decoded for a cache hit).
2. **Cache.** A :class:`CachePolicy` decides per key: reuse the stored judgement, call, or skip
   (``--only-failed`` calls only stored failures).
3. **Call.** ``concurrency`` workers; a call starts only while the run folder's spent cost
   (earlier invocations included) plus the estimates of the calls in flight stays within
   ``max_cost``; past that the run stops cleanly and a later run resumes (what was judged stays
   judged). Each answer is stored as it arrives; a failed call is that judgement's ``error``.
4. **Fill.** Each score row gets the mean over the ``ok`` passes of the judge's scores (scaled
   per the protocol); an answer that is not ``ok`` fills nothing (all or nothing), and a score
   no pass produced is ``None`` with the reason (``refused: ...``, ``unparsable: ...``,
   ``out_of_range: ...``, ``error: ...``), never 0.

Steps 1-3 overlap: the plan is made a chunk of predictions at a time on the event loop (the
next chunk's files hashed on threads meanwhile), and each chunk's calls go out as soon as it is
planned, so the first requests do not wait for every image of the run to be hashed (a dry run
plans everything first). Planning lives in ``_planning``, calling in ``_calling`` and filling in
``_filling``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from medibench.calls import CostBudget, preload_http
from medibench.judges._calling import _execute
from medibench.judges._client import JudgeClient
from medibench.judges._config import JudgeConfig
from medibench.judges._filling import _Filler
from medibench.judges._planning import JudgeReport, _Estimator, _Hasher, _Planner
from medibench.judges._protocols import JudgeProtocol, load_judge
from medibench.judges._records import CachePolicy, JudgementStore
from medibench.runs import RunStore

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["JudgeReport", "judge_run", "judge_run_async"]


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
    """Judge a run with each of ``judges`` (specs or objects); one report per judge.

    :func:`judge_run` is the same call outside an event loop.

    Raises:
        MissingApiKeyError: calls are needed and the key's variable is not set.
        JudgeSetupError: the endpoint rejects every call (bad key, unknown model).
        ValueError: ``max_cost`` without prices in the config, or ``passes < 1``.
    """
    if passes < 1:
        raise ValueError(f"passes must be >= 1, got {passes}")
    if max_cost is not None and not config.has_prices:
        raise ValueError(
            "--max-cost needs the judge's prices: set price_input_per_mtok and "
            "price_output_per_mtok (USD per million tokens) in the judge config"
        )
    store = run if isinstance(run, RunStore) else RunStore.open_existing(run)
    if not dry_run and client is None:
        preload_http()  # imported while the plan hashes the images
    policy = policy or CachePolicy()
    protos = [j if isinstance(j, JudgeProtocol) else load_judge(j) for j in judges]
    hasher = _Hasher()
    try:
        jstore = JudgementStore(store)
        budget = CostBudget(max_cost, jstore.spent_usd())
        planners = [_Planner(store, jstore, p, config, passes, policy, hasher) for p in protos]
        estimators = [_Estimator(p, jstore, config) if config.has_prices else None for p in protos]
        if dry_run:
            for planner, est in zip(planners, estimators, strict=True):
                hasher.submit(planner.paths(planner.order))
                planner.step(len(planner.order))
                _finish_plan(planner, est, dry_run)
            if on_plan is not None:
                on_plan(sum(len(p.plan.calls) for p in planners))
            return [_report(p.plan, max_cost, budget, jstore) for p in planners]
        return await _plan_and_call(
            store, jstore, planners, estimators, config, passes, budget, max_cost, client,
            on_progress, on_plan,
        )  # fmt: skip
    finally:
        hasher.close()
        if store is not run:
            store.close()


async def _plan_and_call(
    store, jstore, planners, estimators, config, passes, budget, max_cost, client, on_progress,
    on_plan,
) -> list[JudgeReport]:  # fmt: skip
    """Plan each judge chunk by chunk on this loop while the calls planned so far go out (the
    first requests leave once the first chunk's files are hashed, not all of them), then fill.

    A client is made once the first call is planned (a run with nothing to call needs no key);
    progress is held back until every plan is complete and ``on_plan`` has the total."""
    fillers = [_Filler(store, p.plan, passes) for p in planners]
    queues: list[asyncio.Queue] = [asyncio.Queue() for _ in planners]
    made: list[JudgeClient] = []
    held = [0]  # progress before the total is known
    total: list[int] = []

    def get_client() -> JudgeClient:
        return client if client is not None else made[0]

    def progress() -> None:
        if on_progress is None:
            return
        if total:
            on_progress()
        else:
            held[0] += 1

    async def planning() -> None:
        try:
            for planner, filler, queue, est in zip(
                planners, fillers, queues, estimators, strict=True
            ):
                size = PLAN_CHUNK
                while not planner.done:
                    # This chunk's files, and the next chunk's hashed meanwhile (not the whole
                    # run's at once: that took both cores from the first requests).
                    paths = planner.paths(planner.next_items(size))
                    futures = [asyncio.wrap_future(f) for f in planner.hasher.futures_of(paths)]
                    planner.hasher.submit(planner.paths(planner.next_items(3 * size))[len(paths) :])
                    await asyncio.gather(*futures, return_exceptions=True)
                    cached_before = len(planner.plan.cached)
                    chunk, todo = planner.step(size)
                    jstore.link_many(planner.plan.cached[cached_before:])
                    filler.add(chunk, planner.stored, planner.called)
                    if todo and client is None and not made:
                        made.append(JudgeClient(config))
                    start = len(planner.plan.calls) - len(todo)
                    for index in range(start, len(planner.plan.calls)):
                        queue.put_nowait(index)
                    size = min(MAX_PLAN_CHUNK, 2 * size)
                    await asyncio.sleep(0)  # let answers in between chunks
                queue.put_nowait(None)
                _finish_plan(planner, est, False)
        except BaseException:
            for queue in queues:
                queue.put_nowait(None)  # the workers stop; the error is raised below
            raise
        total.append(sum(len(p.plan.calls) for p in planners))
        if on_plan is not None:
            on_plan(total[0])
        for _ in range(held[0]):
            progress()

    plan_task = asyncio.create_task(planning())
    reports = []
    try:
        for i, (planner, filler, queue) in enumerate(zip(planners, fillers, queues, strict=True)):
            plan = planner.plan
            filler.begin(planner.scores if i == 0 else None)  # after the earlier judges' fills
            before = get_client().calls if (client is not None or made) else 0
            try:
                await _execute(plan, queue, get_client, jstore, config, budget, progress, filler)
                if plan_task.done() and plan_task.exception() is not None:
                    raise plan_task.exception()  # type: ignore[misc]
            except BaseException:
                filler.abandon()
                raise
            if client is not None or made:
                plan.report.requests = get_client().calls - before
            filler.finish()
            answered = {k: filler.known[k] for k in filler.answered_keys}
            jstore.link_many(planner.relinks(answered))
            store.set_meta(f"judge:{plan.judge.spec}", _describe(plan.judge, config, passes))
            reports.append(_report(plan, max_cost, budget, jstore))
        await plan_task
    finally:
        if not plan_task.done():
            plan_task.cancel()
            with contextlib.suppress(BaseException):
                await plan_task
        if made:
            await made[0].aclose()
    return reports


#: Predictions keyed in the first chunk of a plan (its calls start then); each next chunk is
#: twice as large, up to MAX_PLAN_CHUNK (keying one blocks the event loop a few milliseconds).
PLAN_CHUNK = 32
MAX_PLAN_CHUNK = 256


def _finish_plan(planner: _Planner, est: _Estimator | None, dry_run: bool) -> None:
    report = planner.plan.report
    report.dry_run = dry_run
    report.estimated_cost_usd = None if est is None else sum(est(c) for c in planner.plan.calls)


def _report(plan, max_cost, budget: CostBudget, jstore: JudgementStore) -> JudgeReport:
    plan.report.max_cost = max_cost
    plan.report.spent_before_usd = budget.before
    plan.report.spent_after_usd = jstore.spent_usd()
    return plan.report


def _blocking(fn: Callable[P, Coroutine[Any, Any, R]], name: str, doc: str) -> Callable[P, R]:
    """``fn`` run to completion in a new event loop: the same parameters, called without await."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return asyncio.run(fn(*args, **kwargs))

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run


judge_run = _blocking(
    judge_run_async,
    "judge_run",
    """Judge a run with each of ``judges`` (specs or objects); one report per judge.

    Takes the arguments of :func:`judge_run_async` (run here in a new event loop) and raises what
    it raises.
    """,
)


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
