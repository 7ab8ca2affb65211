"""The one OpenAI-compatible chat client: judges, answering VLMs and the edit judge all use it.

:class:`ChatConfig` says how to reach and drive a chat model (model, endpoint, key variable,
decoding, retries, concurrency, timeout); the judges' :class:`~medibench.judges.JudgeConfig`
extends it with what judging adds. :class:`ChatClient` makes one chat-completions call with
retries and accounting.

Works with any server that speaks ``POST {base_url}/chat/completions`` (OpenAI, Azure OpenAI,
OpenRouter, vLLM, sglang, Ollama, Gemini's OpenAI endpoint); without a ``base_url`` the calls go
to ``$OPENAI_BASE_URL``, as the ``openai`` SDK's do, else to the OpenAI API. The request goes out
through :func:`medibench.calls.send` (``httpx``): up to ``max_attempts`` attempts on 429,
408/409/425, 5xx, timeouts and connection errors, waiting a jittered exponential backoff
(``cap * uniform(0.5, 1)``, ``cap = min(backoff_max_s, backoff_s * 2**attempt)``, at least the
server's ``Retry-After``). Calls in flight are bounded by :class:`medibench.calls.CallSlots`.

Every failure of one call comes back as a :class:`Completion` with ``error`` set (recorded as that
judgement's failure, counted as missing): any other HTTP status, a body that is not JSON (an HTML
page with status 200, truncated JSON), JSON of the wrong shape. The error names the endpoint, the
status and the first 200 characters of the body, redacted (:func:`medibench.calls.redact`).
Only failures that would fail every call (bad key, no permission, unknown model or endpoint)
raise :class:`ChatSetupError` and stop the run.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from medibench.calls._body import json_body
from medibench.calls._endpoints import openai_base_url
from medibench.calls._keys import MissingAPIKeyError
from medibench.calls._limits import CallSlots
from medibench.calls._redact import redact, register_secret
from medibench.calls._retry import RetryPolicy, body_excerpt, send

__all__ = ["ChatClient", "ChatConfig", "ChatSetupError", "Completion"]

#: Statuses that would fail every call of the run.
_SETUP_STATUS = {401, 403, 404}
#: Characters of a failed answer's body kept in its error.
_BODY_CHARS = 200


class ChatSetupError(RuntimeError):
    """The endpoint rejects every call (authentication, permission, unknown model or URL)."""


class ChatConfig(BaseModel):
    """How to reach and drive one chat model.

    Attributes:
        model: the model id, as the endpoint names it.
        base_url: the OpenAI-compatible endpoint, ending in ``/v1`` for most servers; ``None``
            means ``$OPENAI_BASE_URL``, else the OpenAI API (:func:`openai_base_url`).
        api_key_env: the environment variable holding the key.
        api_key_required: ``False`` for local servers (vLLM, sglang, Ollama) that take any key;
            then a missing variable sends the placeholder ``"EMPTY"``.
        temperature, seed, max_tokens, top_p: decoding parameters.
        concurrency: calls in flight at once.
        max_attempts: attempts per call (1 = no retry) on 429, 5xx, timeouts, connection errors.
        backoff_s, backoff_max_s: exponential backoff ``min(max, backoff_s * 2**attempt)``,
            jittered (a uniform draw in [half of that, that]); a ``Retry-After`` is honoured
            (:class:`medibench.calls.RetryPolicy`).
        timeout_s: per-attempt HTTP timeout.
        max_image_side: images with a longer side are resized (``oversize="resize"``, recorded)
            or refused with an error (``oversize="refuse"``) (:func:`png_data_url`).
    """

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    api_key_required: bool = True
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = Field(default=1024, ge=1)
    top_p: float | None = None
    concurrency: int = Field(default=8, ge=1)
    max_attempts: int = Field(default=5, ge=1)
    backoff_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=60.0, ge=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_image_side: int = Field(default=2048, ge=16)

    #: who needs the key, in the missing-key error ("the judge", "the chat model")
    _who: str = "the chat model"

    def api_key(self) -> str:
        """The key from the environment; :class:`MissingAPIKeyError` names the variable."""
        key = os.environ.get(self.api_key_env, "").strip()
        if key:
            register_secret(key)  # redacted from everything stored, logged or reported
            return key
        if not self.api_key_required:
            return "EMPTY"
        raise MissingAPIKeyError(
            f"{self._who} needs an API key in the environment variable {self.api_key_env} "
            f"(export {self.api_key_env}=...; for a local server that takes any key, set "
            "api_key_required: false)"
        )

    @property
    def endpoint(self) -> str:
        """The endpoint the calls go to, without a trailing slash: ``base_url``, else
        ``$OPENAI_BASE_URL``, else the OpenAI API (the judges' cache key and records hold it)."""
        return openai_base_url(self.base_url)

    def decoding(self, seed: int | None) -> dict[str, Any]:
        """The decoding parameters of one call (they go into the request, and the judges'
        cache key)."""
        d: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.top_p is not None:
            d["top_p"] = self.top_p
        if seed is not None:
            d["seed"] = seed
        return d


@dataclass(frozen=True)
class Completion:
    """The outcome of one call (after retries).

    ``refused`` is set when the server or model declined (a ``refusal`` message or the
    ``content_filter`` finish reason); ``error`` when no usable answer came back, with
    ``failure`` its short kind (``HTTP 503``, ``HTTP 200, body not JSON``, ...) for summaries.
    """

    text: str | None
    finish_reason: str | None = None
    refused: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None
    failure: str | None = None


class ChatClient:
    """Async chat-completions client for one :class:`ChatConfig` (or a judge config).

    Args:
        config: the config (model, endpoint, decoding, retries, limits).
        client: an ``httpx.AsyncClient`` to use instead of building one (tests, custom HTTP).
        rng: the jitter's random source (seed it for reproducible waits).

    Raises:
        MissingAPIKeyError: (at construction) the key's environment variable is not set.
    """

    def __init__(
        self,
        config: ChatConfig,
        *,
        client: Any | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._key = config.api_key()
        self._slots = CallSlots(config.concurrency, timeout=config.timeout_s, client=client)
        self._url = f"{config.endpoint}/chat/completions"
        self._policy = RetryPolicy(config.max_attempts, config.backoff_s, config.backoff_max_s)
        self._rng = rng or random.Random()
        self.calls = 0  # HTTP attempts made, retries included

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        seed: int | None,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """Send one chat request; retry what is transient; never raise for a per-call failure
        (only :class:`ChatSetupError`)."""
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
        return json_body(body)

    async def complete_body(self, body: bytes) -> Completion:
        """:meth:`complete` for a body made by :meth:`request_body`."""
        cfg = self.config
        t0 = time.perf_counter()

        def count() -> None:
            self.calls += 1

        client, slots = self._slots.get()
        reply = await send(
            client,
            "POST",
            self._url,
            policy=self._policy,
            rng=self._rng,
            slots=slots,
            on_attempt=count,
            content=body,
            headers={"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"},
        )
        latency = time.perf_counter() - t0
        resp, tries = reply.response, f" (after {reply.attempts} attempt(s))"

        def failed(kind: str, detail: str) -> Completion:
            error = redact(f"{cfg.endpoint}: {detail}") or ""
            return Completion(
                None, latency_s=latency, attempts=reply.attempts, error=error, failure=kind
            )

        if resp is None:
            kind = "timeout" if "timed out" in (reply.problem or "") else "connection error"
            return failed(kind, f"{reply.problem}{tries}")
        status = resp.status_code
        if status in _SETUP_STATUS:
            raise ChatSetupError(
                redact(
                    f"{cfg._who.removeprefix('the ')} endpoint {cfg.endpoint} rejected the "
                    f"call for model "
                    f"'{cfg.model}': HTTP {status} {body_excerpt(resp, _BODY_CHARS)}"
                )
            )
        if status >= 400:
            more = tries if reply.transient else ""
            return failed(f"HTTP {status}", f"HTTP {status}{more}: {body_excerpt(resp, 200)}")
        return _completion(resp, latency, reply.attempts, failed)

    async def aclose(self) -> None:
        await self._slots.aclose()


def _completion(resp: Any, latency: float, attempts: int, failed) -> Completion:
    """Read a 2xx chat-completions answer; any other body or shape is a failed call."""
    status = resp.status_code
    try:
        data = json.loads(resp.content)
    except (ValueError, UnicodeDecodeError) as exc:
        looks = "an HTML page" if resp.text.lstrip()[:1] == "<" else "not valid JSON"
        why = getattr(exc, "msg", str(exc))
        return failed(
            f"HTTP {status}, body not JSON",
            f"HTTP {status} with a body that is {looks} ({why}): {body_excerpt(resp, 200)}",
        )
    choice = _first_choice(data)
    if choice is None:
        return failed(
            f"HTTP {status}, no choices[0].message",
            f"HTTP {status} with JSON that has no choices[0].message: {body_excerpt(resp, 200)}",
        )
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    input_tokens = _int(usage.get("prompt_tokens"))
    output_tokens = _int(usage.get("completion_tokens"))
    msg = choice["message"]
    content = msg.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    elif content is not None and not isinstance(content, str):
        content = json.dumps(content)
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    refusal = msg.get("refusal") if isinstance(msg.get("refusal"), str) else None
    if not refusal and finish == "content_filter":
        refusal = "content_filter"
    return Completion(
        text=content,
        finish_reason=finish,
        refused=refusal or None,
        latency_s=latency,
        attempts=attempts,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def _first_choice(data: Any) -> dict | None:
    if not isinstance(data, dict):
        return None
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    return choices[0] if isinstance(choices[0].get("message"), dict) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
