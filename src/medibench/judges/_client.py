"""The judge client: one OpenAI-compatible chat-completions call, with retries and accounting.

Works with any server that speaks ``POST {base_url}/chat/completions`` (OpenAI, Azure OpenAI,
OpenRouter, vLLM, sglang, Ollama, Gemini's OpenAI endpoint). The ``openai`` package does the
HTTP; its own retries are off so that this module owns the policy: up to ``max_attempts``
attempts on 429, 408/409, 5xx, timeouts and connection errors, waiting a jittered exponential
backoff (``uniform(0, min(backoff_max_s, backoff_s * 2**attempt))``, at least the server's
``Retry-After`` when it sends one). Calls in flight are bounded by an ``asyncio.Semaphore``.

Failures come back as a :class:`Completion` with ``error`` set (recorded, counted as missing),
except those that would fail every call (bad key, no permission, unknown model or endpoint):
they raise :class:`JudgeSetupError` and stop the run.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from medibench.judges._config import JudgeConfig

__all__ = ["Completion", "JudgeClient", "JudgeSetupError"]

_RETRY_STATUS = {408, 409, 429}


class JudgeSetupError(RuntimeError):
    """The endpoint rejects every call (authentication, permission, unknown model or URL)."""


@dataclass(frozen=True)
class Completion:
    """The outcome of one call (after retries).

    ``refused`` is set when the server or model declined (a ``refusal`` message or the
    ``content_filter`` finish reason); ``error`` when no answer came back.
    """

    text: str | None
    finish_reason: str | None = None
    refused: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None


class JudgeClient:
    """Async chat-completions client for one judge config.

    Args:
        config: the judge config (model, endpoint, decoding, retries, limits).
        client: an ``openai.AsyncOpenAI`` to use instead of building one (tests, custom HTTP).
        rng: the jitter's random source (seed it for reproducible waits).

    Raises:
        MissingApiKeyError: (at construction) the key's environment variable is not set.
    """

    def __init__(
        self,
        config: JudgeConfig,
        *,
        client: openai.AsyncOpenAI | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._client = client or openai.AsyncOpenAI(
            api_key=config.api_key(),
            base_url=config.base_url,
            timeout=config.timeout_s,
            max_retries=0,
        )
        self._rng = rng or random.Random()
        self._slots = asyncio.Semaphore(config.concurrency)
        self.calls = 0  # HTTP attempts made, retries included

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        seed: int | None,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """Send one chat request; retry what is transient; never raise for a per-call failure
        (only :class:`JudgeSetupError`)."""
        return await self.complete_body(self.request_body(messages, seed, response_format))

    def request_body(
        self,
        messages: list[dict[str, Any]],
        seed: int | None,
        response_format: dict[str, Any] | None = None,
    ) -> bytes:
        """The JSON request body (encode it off the event loop: images make it large)."""
        body: dict[str, Any] = dict(
            model=self.config.model, messages=messages, **self.config.decoding(seed)
        )
        if response_format is not None:
            body["response_format"] = response_format
        return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")

    async def complete_body(self, body: bytes) -> Completion:
        """:meth:`complete` for a body made by :meth:`request_body`."""
        cfg = self.config
        t0 = time.perf_counter()
        last = "no attempt made"
        for attempt in range(cfg.max_attempts):
            async with self._slots:
                self.calls += 1
                try:
                    # The body is sent as made (the package's own request transform walks
                    # every message part, which costs more than the rest of the call).
                    resp = await self._client.post(
                        "/chat/completions",
                        cast_to=ChatCompletion,
                        content=body,
                        options={"headers": {"Content-Type": "application/json"}},
                    )
                except (
                    openai.AuthenticationError,
                    openai.PermissionDeniedError,
                    openai.NotFoundError,
                ) as exc:
                    raise JudgeSetupError(
                        f"judge endpoint {cfg.endpoint} rejected the call for model "
                        f"'{cfg.model}': HTTP {exc.status_code} {_short(exc)}"
                    ) from None
                except openai.APIStatusError as exc:
                    last = f"HTTP {exc.status_code} {_short(exc)}"
                    if exc.status_code not in _RETRY_STATUS and exc.status_code < 500:
                        return Completion(
                            None,
                            latency_s=time.perf_counter() - t0,
                            attempts=attempt + 1,
                            error=last,
                        )
                    wait = _retry_after(exc)
                except openai.APITimeoutError:
                    last, wait = f"timed out after {cfg.timeout_s:g} s", None
                except openai.APIConnectionError as exc:
                    last, wait = f"connection error ({exc.__cause__ or exc})", None
                else:
                    return _completion(resp, time.perf_counter() - t0, attempt + 1)
            if attempt + 1 < cfg.max_attempts:
                cap = min(cfg.backoff_max_s, cfg.backoff_s * 2**attempt)
                delay = self._rng.uniform(0, cap)
                if wait is not None:
                    delay = max(delay, min(wait, cfg.backoff_max_s))
                await asyncio.sleep(delay)
        return Completion(
            None,
            latency_s=time.perf_counter() - t0,
            attempts=cfg.max_attempts,
            error=f"{last} (after {cfg.max_attempts} attempt(s))",
        )

    async def aclose(self) -> None:
        await self._client.close()


def _completion(resp: Any, latency: float, attempts: int) -> Completion:
    usage = getattr(resp, "usage", None)
    tokens = dict(
        input_tokens=getattr(usage, "prompt_tokens", None),
        output_tokens=getattr(usage, "completion_tokens", None),
    )
    if not resp.choices:
        return Completion(None, latency_s=latency, attempts=attempts, error="no choices", **tokens)
    choice = resp.choices[0]
    msg = choice.message
    refusal = getattr(msg, "refusal", None)
    if not refusal and choice.finish_reason == "content_filter":
        refusal = "content_filter"
    return Completion(
        text=msg.content,
        finish_reason=choice.finish_reason,
        refused=refusal or None,
        latency_s=latency,
        attempts=attempts,
        **tokens,
    )


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, ValueError):
        return None


def _short(exc: Exception) -> str:
    msg = getattr(exc, "message", None) or str(exc)
    return msg if len(msg) <= 300 else msg[:297] + "..."
