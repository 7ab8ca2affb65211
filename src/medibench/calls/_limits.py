"""Bounded concurrency and the cost budget, shared by every remote client.

* :class:`CallSlots`: ``httpx.AsyncClient`` objects and one ``asyncio.Semaphore`` of
  ``concurrency`` slots per event loop (both belong to the loop that made them), so a client
  used from the blocking form and from the runner's loop never shares either across loops.
  Each client pools at most ``CONNECTIONS_PER_CLIENT`` connections and a request goes to the
  client with the most idle ones (never waiting in a busy pool while another has room):
  httpcore's pool scans every connection (a socket poll each) on every request and reply, so one
  pool of 64 connections spent more CPU than the requests themselves (profiled in bench/judge.py:
  18 of 30 CPU seconds, 15 ms per judged sample at 64 in flight).
* :func:`run_bounded`: ``concurrency`` workers over one shared iterator, each item to one worker
  (the image-editing runner's outputs; the judges' workers take theirs from the plan's queue).
* :class:`CostBudget`: a run folder's ``max_cost``: a call starts only while what was spent before,
  plus this run's spend, plus the estimates of the calls in flight, stays within it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

__all__ = ["CallSlots", "CostBudget", "preload_http", "run_bounded"]

T = TypeVar("T")


class CallSlots:
    """Per event loop: an HTTP client and ``concurrency`` slots for requests in flight.

    Args:
        concurrency: requests in flight at once (read when a loop first asks; it may be raised
            before that, as the runner does for ``--workers``).
        timeout: seconds per request of the clients made here.
        client: an ``httpx.AsyncClient`` to use in every loop instead (tests, custom HTTP).
    """

    def __init__(self, concurrency: int, *, timeout: float, client: Any | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.concurrency = int(concurrency)
        self.timeout = float(timeout)
        self._given = client
        self._per_loop: dict[int, _LoopState] = {}

    def get(self) -> tuple[Any, asyncio.Semaphore]:
        """The running loop's client and its semaphore (made on first use). With more than
        ``CONNECTIONS_PER_CLIENT`` slots the client is a :class:`_Balanced` set of clients whose
        ``request`` goes to the one with the most idle connections, so a request admitted by
        the semaphore never queues in a pool whose connections are all busy."""
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(id(loop))
        if state is None or state.loop is not loop:
            n, per = self.concurrency, CONNECTIONS_PER_CLIENT
            caps = [min(per, n - i) for i in range(0, n, per)]
            if self._given is not None:
                clients = [self._given]
            else:
                ssl = _ssl_context()  # one CA bundle load for all the clients
                clients = [self._new_client(cap, ssl) for cap in caps]
            front = clients[0] if len(clients) == 1 else _Balanced(clients, caps)
            state = _LoopState(loop, clients, front, asyncio.Semaphore(self.concurrency))
            self._per_loop[id(loop)] = state
        return state.front, state.slots

    async def aclose(self) -> None:
        """Close the running loop's clients (a given client is closed too)."""
        state = self._per_loop.pop(id(asyncio.get_running_loop()), None)
        if state is not None:
            for client in state.clients:
                await client.aclose()
        elif self._given is not None:
            await self._given.aclose()

    def _new_client(self, connections: int, ssl: Any) -> Any:
        import httpx

        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        return httpx.AsyncClient(timeout=self.timeout, limits=limits, verify=ssl)


#: Connections pooled by one ``httpx.AsyncClient`` of :class:`CallSlots`.
CONNECTIONS_PER_CLIENT = 8

_ssl_lock = threading.Lock()
_ssl: list[Any] = []


def _ssl_context() -> Any:
    """httpx's default SSL context, made once per process (loading the CA bundle takes about
    30 ms; a context is safe to share between clients, threads and event loops)."""
    with _ssl_lock:
        if not _ssl:
            import httpx

            _ssl.append(httpx.create_ssl_context())
        return _ssl[0]


def preload_http() -> threading.Thread:
    """Import the HTTP stack (httpx, httpcore and its async backends) and make the shared SSL
    context on a daemon thread, started now: a caller about to plan (hash files, read the
    store) overlaps the 0.2-0.3 s this takes before the first request with its own work."""

    def load() -> None:
        import anyio._backends._asyncio  # noqa: F401  (what httpcore's pool runs on)
        import httpcore  # noqa: F401

        _ssl_context()

    thread = threading.Thread(target=load, name="medibench-http-preload", daemon=True)
    thread.start()
    return thread


class _LoopState:
    """One event loop's clients, what requests go through (a client or :class:`_Balanced`)
    and the slots."""

    __slots__ = ("clients", "front", "loop", "slots")

    def __init__(self, loop, clients: list, front: Any, slots: asyncio.Semaphore) -> None:
        self.loop, self.clients, self.front, self.slots = loop, clients, front, slots


class _Balanced:
    """Several ``httpx.AsyncClient`` as one: each request goes to the client with the most idle
    connections (round-robin sent a request to a client whose connections were all busy while
    another had idle ones: it waited in that pool, a latency the semaphore does not see)."""

    def __init__(self, clients: list, caps: list[int]) -> None:
        self.clients, self.idle = clients, list(caps)

    async def request(self, method: str, url: str, **kwargs: Any) -> Any:
        i = max(range(len(self.clients)), key=self.idle.__getitem__)
        self.idle[i] -= 1
        try:
            return await self.clients[i].request(method, url, **kwargs)
        finally:
            self.idle[i] += 1

    @property
    def is_closed(self) -> bool:
        return all(c.is_closed for c in self.clients)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


async def run_bounded(
    items: Iterable[T], work: Callable[[T], Awaitable[None]], concurrency: int
) -> None:
    """Run ``work(item)`` for every item, ``concurrency`` at a time (an exception stops all)."""
    todo = list(items) if not isinstance(items, list) else items
    queue = iter(todo)

    async def worker() -> None:
        for item in queue:  # a shared iterator: each item goes to one worker
            await work(item)

    await asyncio.gather(*(worker() for _ in range(max(0, min(concurrency, len(todo))))))


class CostBudget:
    """``max_cost`` (USD, ``None``: no limit) for a run folder; ``before`` is what earlier
    invocations spent there. :meth:`reserve` an estimate before a call, :meth:`settle` it with
    the real cost after; once a reservation is refused, every later one is (``stopped``)."""

    def __init__(self, max_cost: float | None, before: float = 0.0) -> None:
        self.max_cost, self.spent, self.reserved, self.stopped = max_cost, 0.0, 0.0, False
        self.before = before

    def reserve(self, estimate: float) -> bool:
        """Whether a call estimated at ``estimate`` may start (it is then held in flight)."""
        if self.max_cost is None:
            return True
        total = self.before + self.spent + self.reserved + estimate
        if self.stopped or total > self.max_cost:
            self.stopped = True
            return False
        self.reserved += estimate
        return True

    def settle(self, estimate: float, cost: float | None) -> None:
        """Release a reservation and count what the call really cost."""
        if self.max_cost is not None:
            self.reserved -= estimate
        self.spent += cost or 0.0
