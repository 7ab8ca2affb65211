"""Calling the judge for a plan: ``concurrency`` workers within a cost budget, answers stored.

A call starts only while the spent cost plus the estimates of the calls in flight stays within
``max_cost``; past that the run stops cleanly and a later run resumes (what was judged stays
judged). Each answer is parsed into a :class:`Judgement`, stored in small batches and handed to the
score-row filler.
"""

from __future__ import annotations

import asyncio
import time

from medibench.judges._config import JudgeConfig
from medibench.judges._parsing import parse_answer
from medibench.judges._planning import _Call, _Estimator
from medibench.judges._protocols import JudgeProtocol
from medibench.judges._records import Judgement

#: Judgement records are flushed to the run store every _FLUSH_N answers or _FLUSH_S seconds.
_FLUSH_N, _FLUSH_S = 64, 0.25


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
