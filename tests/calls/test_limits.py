"""The call layer: concurrency bound, cost budget and log redaction (models and judges)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from medibench.calls import (
    REDACTED,
    CallSlots,
    CostBudget,
    RedactingFilter,
    get_logger,
    install_redaction,
    register_secret,
    run_bounded,
)


def test_run_bounded_keeps_at_most_n_in_flight_and_does_every_item_once():
    seen, live, peak = [], 0, 0

    async def work(i: int) -> None:
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        await asyncio.sleep(0.01)
        seen.append(i)
        live -= 1

    asyncio.run(run_bounded(range(10), work, 3))
    assert sorted(seen) == list(range(10)) and peak == 3
    asyncio.run(run_bounded([], work, 3))  # nothing to do: no worker


def test_call_slots_give_one_client_and_semaphore_per_event_loop():
    slots = CallSlots(2, timeout=5.0)
    slots.concurrency = 5  # raised before first use (the runner's --workers)

    async def grab():
        client, sem = slots.get()
        again = slots.get()
        await slots.aclose()
        return client, sem, again

    c1, s1, again = asyncio.run(grab())
    c2, s2, _ = asyncio.run(grab())
    assert again == (c1, s1) and c1 is not c2 and s1 is not s2
    assert s1._value == 5 and c1.is_closed
    with pytest.raises(ValueError, match="concurrency"):
        CallSlots(0, timeout=1.0)


def test_cost_budget_reserves_estimates_and_stops_for_good():
    budget = CostBudget(1.0, before=0.25)
    assert budget.reserve(0.5)
    assert not budget.reserve(0.5)  # 0.25 before + 0.5 in flight + 0.5 > 1.0
    budget.settle(0.5, 0.1)
    assert budget.spent == pytest.approx(0.1) and budget.reserved == 0
    assert not budget.reserve(0.01) and budget.stopped  # once refused, always refused
    assert CostBudget(None).reserve(1e9)


def test_every_medibench_and_http_log_line_is_redacted(caplog):
    key = "zz-calls-log-secret-98765"
    register_secret(key)
    with caplog.at_level(logging.DEBUG):
        get_logger("medibench.models.test").warning("sending with key %s", key)
        logging.getLogger("httpx").info("HTTP Request: POST https://x/?api_key=%s", key)
        try:
            raise RuntimeError(f"server echoed {key}")
        except RuntimeError:
            get_logger("medibench.judges.test").exception("failed")
    text = caplog.text
    assert key not in text and text.count(REDACTED) >= 3
    handler = logging.StreamHandler()
    logging.getLogger("medibench").addHandler(handler)
    try:
        install_redaction("medibench")
        assert any(isinstance(f, RedactingFilter) for f in handler.filters)
        install_redaction("medibench")  # once each
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
    finally:
        logging.getLogger("medibench").removeHandler(handler)
