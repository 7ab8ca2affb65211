"""One retry policy for every remote call: jittered exponential backoff honouring Retry-After.

:func:`send` makes one HTTP request with ``httpx``, retrying what is transient (429, 408, 409,
425, 5xx, timeouts, dropped connections) and returning everything else at once: the caller reads
the final :class:`Reply` (a response of any status, or the transport problem) and decides what it
means (a refusal, a setup error, a failed sample). It never raises for a bad answer.

The wait before retry ``attempt`` (0-based) is ``cap * uniform(0.5, 1)`` with
``cap = min(max_backoff_s, backoff_s * 2**attempt)``, and at least the server's ``Retry-After``
(seconds or an HTTP date, itself capped at ``max_backoff_s``).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from medibench.calls._redact import redact

__all__ = ["RETRY_STATUS", "Reply", "RetryPolicy", "body_excerpt", "is_transient", "send"]

#: Statuses below 500 that are worth another attempt.
RETRY_STATUS = frozenset({408, 409, 425, 429})


def is_transient(status: int) -> bool:
    """Whether an HTTP status is worth retrying (429, 408, 409, 425, any 5xx)."""
    return status in RETRY_STATUS or status >= 500


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts, and how long to wait between them.

    Attributes:
        attempts: attempts in all (1 = no retry).
        backoff_s: the first wait's cap; it doubles per attempt up to ``max_backoff_s``.
    """

    attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("attempts >= 1 and non-negative backoffs are required")

    def delay(
        self, attempt: int, retry_after: str | float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based)."""
        cap = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        delay = cap * (0.5 + 0.5 * (rng or random).random())
        wait = parse_retry_after(retry_after)
        if wait is not None:
            delay = max(delay, min(self.max_backoff_s, wait))
        return delay


def parse_retry_after(value: str | float | None) -> float | None:
    """A ``Retry-After`` value in seconds (a number or an HTTP date), ``None`` if unreadable."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time()) if when is not None else None


@dataclass(frozen=True)
class Reply:
    """The outcome of :func:`send`: the last response (any status) or, when none came, the
    transport ``problem``; ``attempts`` made; ``transient`` when retries ran out."""

    response: Any | None
    problem: str | None
    attempts: int
    transient: bool = False

    @property
    def status(self) -> int | None:
        return None if self.response is None else self.response.status_code


async def send(
    client: Any,
    method: str,
    url: str,
    *,
    policy: RetryPolicy,
    rng: random.Random | None = None,
    slots: asyncio.Semaphore | None = None,
    on_attempt: Callable[[], None] | None = None,
    **kwargs: Any,
) -> Reply:
    """Send ``method url`` with ``client`` (an ``httpx.AsyncClient``), retrying transient
    failures per ``policy``; ``slots`` bounds requests in flight (not held while waiting)."""
    import httpx

    for attempt in range(policy.attempts):
        retry_after = None
        response = None
        if on_attempt is not None:
            on_attempt()
        try:
            if slots is None:
                response = await client.request(method, url, **kwargs)
            else:
                async with slots:
                    response = await client.request(method, url, **kwargs)
        except httpx.TimeoutException as exc:
            problem = f"request timed out ({type(exc).__name__})"
        except httpx.TransportError as exc:
            problem = redact(f"connection error ({type(exc).__name__}: {exc})")
        else:
            if not is_transient(response.status_code):
                return Reply(response, None, attempt + 1)
            problem = f"HTTP {response.status_code}"
            retry_after = response.headers.get("retry-after")
        if attempt + 1 == policy.attempts:
            return Reply(response, problem, policy.attempts, transient=True)
        await asyncio.sleep(policy.delay(attempt, retry_after, rng))
    raise AssertionError("unreachable")


def body_excerpt(response: Any, chars: int = 200) -> str:
    """The first ``chars`` characters of a response body, redacted (``...`` when cut)."""
    try:
        text = response.text
    except Exception:  # undecodable bytes
        text = repr(response.content[:chars])
    text = redact(text) or ""
    return text if len(text) <= chars else text[:chars] + "..."
