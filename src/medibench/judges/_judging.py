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

This module runs the steps in order; planning lives in ``_planning``, calling in ``_calling`` and
filling in ``_filling``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from medibench.calls import CostBudget, preload_http
from medibench.judges._calling import _execute
from medibench.judges._client import JudgeClient
from medibench.judges._config import JudgeConfig
from medibench.judges._filling import _Filler
from medibench.judges._planning import JudgeReport, _estimate, _plan
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
    own_client = False
    reports = []
    try:
        jstore = JudgementStore(store)
        budget = CostBudget(max_cost, jstore.spent_usd())
        hashes: dict[Path, str | OSError] = {}
        plans = [_plan(store, jstore, p, config, passes, policy, hashes) for p in protos]
        for plan in plans:
            plan.report.dry_run = dry_run
            plan.report.estimated_cost_usd = _estimate(plan, jstore, config)
            if not dry_run:
                jstore.link_many(plan.cached)
        if on_plan is not None:
            on_plan(sum(len(plan.calls) for plan in plans))
        if not dry_run and any(plan.calls for plan in plans):
            if client is None:
                client, own_client = JudgeClient(config), True
        for plan in plans:
            if not dry_run:
                filler = _Filler(store, jstore, plan, passes)
                if plan.calls and client is not None:
                    active = client
                    before = active.calls
                    try:
                        await _execute(plan, active, jstore, config, budget, on_progress, filler)
                    except BaseException:
                        filler.abandon()
                        raise
                    plan.report.requests = active.calls - before
                filler.finish()
                store.set_meta(f"judge:{plan.judge.spec}", _describe(plan.judge, config, passes))
            plan.report.max_cost = max_cost
            plan.report.spent_before_usd = budget.before
            plan.report.spent_after_usd = jstore.spent_usd()
            reports.append(plan.report)
    finally:
        if own_client and client is not None:
            await client.aclose()
        if store is not run:
            store.close()
    return reports


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
