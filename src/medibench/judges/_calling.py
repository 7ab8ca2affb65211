"""Calling the judge for a plan: ``concurrency`` workers within a cost budget, answers stored.

The budget is the call layer's (:class:`medibench.calls.CostBudget`); ``concurrency`` workers
take the calls from a queue the planner fills as it goes.

``max_cost`` is a budget for the run folder: a call starts only while the folder's spent cost
(every earlier invocation's included, from ``judge_spend``) plus this run's, plus the estimates of
the calls in flight, stays within it; past that the run stops cleanly and a later run resumes
(what was judged stays judged). Each answer is parsed into a :class:`Judgement` and stored as it
arrives (the filler's writer thread commits answers in groups, milliseconds after they come), so
a killed run pays again only for an answer that came in those last milliseconds; then it is
handed to the score-row filler. A call that fails in any
way (HTTP status, a body that is not an answer, an exception while preparing or sending it) is
that judgement's ``error``, never the run's: the run goes on and the report counts the failures
by kind.

Keeping ``concurrency`` requests in flight: the request bodies (read the images, base64, JSON)
are made on a thread ahead of need (:class:`medibench.calls.Ahead`), so a worker whose answer
came back sends its next request at once; and a worker does not wait for its answer's commit
before the next call (unless ``2 * concurrency`` answers wait for one; a failed commit stops
the run at the next call). A body made ahead of a call the budget then refuses is dropped unsent.
"""

from __future__ import annotations

import asyncio

from medibench.calls import Ahead, CostBudget, redact
from medibench.judges._client import JudgeSetupError
from medibench.judges._config import JudgeConfig
from medibench.judges._parsing import parse_answer
from medibench.judges._planning import _Call, _Estimator
from medibench.judges._protocols import JudgeProtocol
from medibench.judges._records import Judgement


async def _execute(
    plan, queue, get_client, jstore, config, budget: CostBudget, on_progress, filler
) -> None:
    """Call the judge for the indices into ``plan.calls`` that ``queue`` gives (until ``None``;
    the planner appends to ``plan.calls`` while this runs) with ``concurrency`` workers;
    ``get_client()`` is the client (made by the planner before the first call is queued)."""
    judge, report = plan.judge, plan.report
    spent: list[float] = []
    estimate = _Estimator(judge, jstore, config)
    fmt = judge.response_format(config.structured_output)
    structured = config.structured_output != "none"

    ahead = Ahead(
        plan.calls,
        lambda c: _request(get_client(), judge, c, config, structured, fmt),
        config.concurrency,
        max_bytes=AHEAD_BYTES,
        name="medibench-judge-body",
    )

    async def one(index: int) -> None:
        call = plan.calls[index]
        filler.check()  # a failed commit (a full disk) stops the run
        prepared = ahead.take(index)
        est = estimate(call) if budget.max_cost is not None else 0.0
        if not budget.reserve(est):
            report.not_started += 1
            report.stopped_by_budget = True
            return
        j = _record(judge, config, call)
        try:
            body, notes = (
                prepared.result() if prepared.done() else await asyncio.wrap_future(prepared)
            )
            ahead.account(len(body))
            j.notes = notes
            done = await get_client().complete_body(body)
        except JudgeSetupError:
            budget.settle(est, None)
            raise
        except Exception as exc:  # unreadable image, oversize=refuse, anything unforeseen
            why = redact(str(exc) if _is_input(exc) else f"{type(exc).__name__}: {exc}")
            j.status = "error"
            j.problems = {f.key: f"error: {why}" for f in judge.fields}
            report.failures[_input_kind(exc)] += 1
        else:
            _read_completion(j, done, judge, config)
            if done.failure is not None:
                report.failures[done.failure] += 1
        budget.settle(est, j.cost_usd)
        estimate.observe(j.input_tokens, j.output_tokens)
        if j.cost_usd is not None:
            spent.append(j.cost_usd)
        # Stored as it arrives (the writer thread's next group commit); this worker goes on to
        # its next call meanwhile unless the writer is two waves behind (a wave of answers lands
        # while a commit is under way: waiting at one wave stalled workers for a whole commit).
        committed = filler.store_answer(j, call.links)
        filler.answered(j)
        report.counts[j.status] += 1
        if on_progress:
            on_progress()
        if filler.uncommitted > 2 * config.concurrency:
            await asyncio.wrap_future(committed)

    async def worker() -> None:
        while (index := await queue.get()) is not None:
            await one(index)
        queue.put_nowait(None)  # the end, for the other workers too

    try:
        await asyncio.gather(*(worker() for _ in range(config.concurrency)))
    finally:
        ahead.close()
    report.cost_usd = sum(spent) if config.has_prices else None


#: Bytes of request bodies made ahead of need, at most (about: the mean size of those sent).
AHEAD_BYTES = 256 << 20


def _is_input(exc: Exception) -> bool:
    return isinstance(exc, OSError | ValueError) and not isinstance(exc, UnicodeError)


def _input_kind(exc: Exception) -> str:
    return "input image not sent" if _is_input(exc) else f"client error ({type(exc).__name__})"


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
    j.raw, j.finish_reason = redact(done.text), done.finish_reason
    j.input_tokens, j.output_tokens = done.input_tokens, done.output_tokens
    j.cost_usd = config.cost(done.input_tokens, done.output_tokens)
    j.latency_s, j.attempts = done.latency_s, done.attempts
    required = [f.key for f in judge.fields if f.required]
    if done.error is not None:
        j.status, j.problems = "error", {k: f"error: {redact(done.error)}" for k in required}
    elif done.refused is not None:
        j.raw = j.raw or redact(done.refused)
        j.status = "refused"
        j.problems = {k: f"refused: {done.refused}" for k in required}
    else:
        parsed = parse_answer(done.text, judge.fields, independent=judge.independent_fields)
        j.status, j.scores = parsed.status, parsed.scores
        j.problems = {k: redact(v) for k, v in parsed.problems.items()}
