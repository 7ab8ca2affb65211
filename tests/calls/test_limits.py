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


def test_call_slots_send_each_request_to_the_client_with_most_idle_connections(monkeypatch):
    from medibench.calls import _limits

    monkeypatch.setattr(_limits, "CONNECTIONS_PER_CLIENT", 2)
    slots = CallSlots(5, timeout=5.0)  # clients of 2, 2 and 1 connections
    gates: list[asyncio.Event] = []

    async def scenario():
        front, sem = slots.get()
        clients = slots._per_loop[id(asyncio.get_running_loop())].clients
        assert len(clients) == 3 and front.idle == [2, 2, 1]
        used = []
        for c in clients:

            async def request(method, url, _c=c, **kw):
                used.append(clients.index(_c))
                gate = asyncio.Event()
                gates.append(gate)
                await gate.wait()
                return url

            c.request = request
        tasks = [asyncio.create_task(front.request("GET", f"u{i}")) for i in range(4)]
        await asyncio.sleep(0)
        assert used == [0, 1, 0, 1]  # the most idle first (ties: the first)
        gates[1].set()  # a request of client 1 ends: idle connections 0, 1, 1
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(front.request("GET", "u4")))
        await asyncio.sleep(0)
        assert used[-1] == 1 and front.idle == [0, 0, 1]
        tasks.append(asyncio.create_task(front.request("GET", "u5")))
        await asyncio.sleep(0)
        assert used[-1] == 2  # the only one with an idle connection
        for g in gates:
            g.set()
        assert await asyncio.gather(*tasks) == [f"u{i}" for i in range(6)]
        assert sem._value == 5
        await slots.aclose()
        assert front.is_closed

    asyncio.run(scenario())
