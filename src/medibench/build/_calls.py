"""The build's chat-model steps: their SOURCE.yaml settings, their calls and their cache.

``rephrase:`` and ``verify:`` of SOURCE.yaml each name a chat model and how to reach it, with the
fields of :class:`medibench.calls.ChatConfig` (``model``, ``base_url``, ``api_key_env``,
``temperature``, ``seed``, ...; ``rephrase`` adds ``n``). :func:`model_call` checks them.

Every call goes through the one chat client (:class:`medibench.calls.ChatClient`: retries,
bounded concurrency, key redaction) and is cached in the build folder (``.build/calls/``, one
JSON file per call, keyed by the sha256 of the model, endpoint, prompt file (name, version,
sha256), the texts and images shown and the decoding parameters, seed included), so re-running
a build asks nothing it asked before. Only answers that parsed are cached: a failed or
unparsable answer is an error, and the next run asks again.

An endpoint that cannot answer (down, timing out, failing with 5xx after the retries, rejecting
the key or the model) stops the build with :class:`CallFailed`; finished items are kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medibench.build._errors import BuildError
from medibench.calls._redact import redact

__all__ = ["CALL_FIELDS", "CallFailed", "ChatStep", "ModelCall", "model_call", "strict_json"]

#: The ChatConfig fields a ``rephrase:`` or ``verify:`` block may set.
CALL_FIELDS = (
    "model", "base_url", "api_key_env", "api_key_required", "temperature", "seed", "max_tokens",
    "top_p", "concurrency", "max_attempts", "backoff_s", "backoff_max_s", "timeout_s",
    "max_image_side",
)  # fmt: skip
#: Failures that mean the endpoint cannot answer at all (after the client's retries).
_DOWN = ("timeout", "connection error")
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
#: ``parse(text, refused, i)``: the parsed answer to request ``i``, or ValueError.
Parse = Callable[[str | None, str | None, int], Any]


class CallFailed(BuildError):
    """The endpoint of a build step cannot answer; the build stops (finished items are kept)."""


@dataclass(frozen=True)
class ModelCall:
    """``rephrase:`` or ``verify:`` of SOURCE.yaml: ``chat`` holds the
    :class:`~medibench.calls.ChatConfig` fields given; ``n`` the rephrasings per instruction."""

    chat: dict[str, Any]
    n: int = 1

    @property
    def model(self) -> str:
        return str(self.chat["model"])


def model_call(value: Any, key: str, where: str) -> ModelCall | None:
    """Check the ``key`` block (``rephrase`` or ``verify``) of a source ``where``.

    Raises:
        BuildError: not a mapping, an unknown key, no ``model``, or a value the chat config
            refuses (the message names the file, the block and the key).
    """
    if value is None:
        return None
    at = f"{where}: {key}"
    if not isinstance(value, dict):
        raise BuildError(f"{at} must be a mapping like {{model: NAME}}, got {value!r}")
    known = CALL_FIELDS + (("n",) if key == "rephrase" else ())
    unknown = [k for k in value if k not in known]
    if unknown:
        raise BuildError(
            f"{at}: unknown key(s) {', '.join(map(repr, unknown))}; known keys: {', '.join(known)}"
        )
    if not isinstance(value.get("model"), str) or not value["model"].strip():
        raise BuildError(f"{at} needs 'model': the chat model's id, as its endpoint names it")
    chat = {k: v for k, v in value.items() if k != "n"}
    _chat_config(chat, at)  # every value checked now, not at the first call
    n = value.get("n", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 20:
        raise BuildError(f"{at}.n must be an integer from 1 to 20, got {n!r}")
    return ModelCall(chat, n)


def _chat_config(chat: dict[str, Any], at: str) -> Any:
    from pydantic import ValidationError

    from medibench.calls import ChatConfig

    try:
        return ChatConfig(**chat)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"])
        raise BuildError(f"{at}.{name}: {first['msg']}, got {first.get('input')!r}") from None


def strict_json(text: str | None, keys: Sequence[str]) -> dict[str, Any]:
    """The one JSON object a whole answer is (a code fence around it allowed) with exactly
    ``keys``; :class:`ValueError` saying why for anything else."""
    t = (text or "").strip()
    fenced = _FENCE.match(t)
    if fenced:
        t = fenced.group(1)
    try:
        data = json.loads(t)
    except json.JSONDecodeError:
        raise ValueError("the answer is not one JSON object") from None
    if not isinstance(data, dict) or set(data) != set(keys):
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"the answer must be a JSON object with exactly {list(keys)}, got {got}")
    return data


@dataclass
class _Asked:
    """One call to make: its cache key, messages, and who asked (for errors)."""

    key: str
    messages: list[dict[str, Any]]
    where: str


@dataclass
class ChatStep:
    """One build step's chat model (``rephrase`` or ``verify``), its prompt file and its cache.

    ``ask`` returns, per request, the parsed answer and a record of the call (model, endpoint,
    prompt, seed, cache key, the full answer); ``made`` counts the HTTP calls made (retries
    included) and ``cached`` the answers taken from the cache.
    """

    kind: str
    call: ModelCall
    prompt_file: str
    cache: Path
    made: int = 0
    cached: int = 0
    _prompt: Any = field(default=None, repr=False)
    _config: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        from medibench.judges._prompts import load_prompt

        self._prompt = load_prompt(self.prompt_file, package="medibench.build")
        self._config = _chat_config(self.call.chat, self.kind)

    @property
    def prompt(self) -> Any:
        return self._prompt

    @property
    def config(self) -> Any:
        return self._config

    def check_key(self, where: str) -> None:
        """Fail before building when the key's variable is unset (naming it)."""
        from medibench.calls import MissingAPIKeyError

        try:
            self._config.api_key()
        except MissingAPIKeyError as exc:
            raise BuildError(f"{where}: {self.kind} ({self.call.model}): {exc}") from None

    def provenance(self) -> dict[str, Any]:
        """What every stored answer records about how it was asked."""
        cfg, p = self._config, self._prompt
        return {"model": cfg.model, "endpoint": cfg.endpoint,
                "prompt": f"{p.name}@{p.version}", "prompt_sha256": p.sha256, "seed": cfg.seed,
                "temperature": cfg.temperature}  # fmt: skip

    def key(self, material: dict[str, Any]) -> str:
        """The cache key of a call showing ``material`` (texts, image hashes)."""
        cfg = self._config
        full = {**self.provenance(), "kind": self.kind, "decoding": cfg.decoding(cfg.seed),
                "material": material}  # fmt: skip
        blob = json.dumps(full, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def ask(
        self, requests: Sequence[tuple[str, list[dict[str, Any]], str]], parse: Parse
    ) -> list[tuple[Any, dict[str, Any]]]:
        """``[(parsed, record)]`` for ``requests`` = ``[(key, messages, where)]``.

        ``parse(text, refused, i)`` reads the answer to request ``i`` (``refused``: the
        model's refusal, else None) and raises :class:`ValueError` for one it cannot read.
        ``record``: :meth:`provenance`, the cache key, the full answer and any refusal.

        Raises:
            CallFailed: the endpoint cannot answer.
            BuildError: a call failed or its answer did not parse (naming ``where``); the
                answers that parsed are cached first, so the next run does not pay again.
        """
        asked = [_Asked(k, m, w) for k, m, w in requests]
        first = {a.key: i for i, a in reversed(list(enumerate(asked)))}
        answers: dict[str, tuple[dict[str, Any], bool]] = {}  # key -> (answer, from the cache)
        for a in asked:
            stored = self._read(a.key)
            if stored is not None and _parses(parse, stored, first[a.key]):
                answers[a.key] = (stored, True)
        todo = [asked[i] for k, i in first.items() if k not in answers]
        problems: list[str] = []
        down: CallFailed | None = None
        for a, c in zip(todo, asyncio.run(self._complete(todo)) if todo else [], strict=True):
            try:
                problem = self._problem(a, c)
            except CallFailed as exc:  # the answers that came are still cached
                down = down or exc
                continue
            answer = {"answer": redact(c.text), "refused": c.refused}
            if problem is None:
                try:
                    parse(answer["answer"], c.refused, first[a.key])
                except ValueError as exc:
                    problem = (f"{a.where}: the {self.kind} answer of {self.call.model}: {exc}; "
                               f"{_excerpt(answer['answer'])}")  # fmt: skip
            if problem is not None:
                problems.append(problem)
                continue
            self._write(a.key, answer, c)
            answers[a.key] = (answer, False)
        if down is not None:
            raise down
        self.cached += sum(1 for a in asked if a.key in answers and answers[a.key][1])
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise BuildError(problems[0] + more)
        out = []
        for i, a in enumerate(asked):
            answer = answers[a.key][0]
            record = {**self.provenance(), "key": a.key, "answer": answer["answer"],
                      "refused": answer["refused"]}  # fmt: skip
            out.append((parse(answer["answer"], answer["refused"], i), record))
        return out

    async def _complete(self, asked: list[_Asked]) -> list[Any]:
        from medibench.calls import ChatClient, ChatSetupError

        client = ChatClient(self._config)
        try:
            return await asyncio.gather(
                *(client.complete(a.messages, seed=self._config.seed) for a in asked)
            )
        except ChatSetupError as exc:
            raise CallFailed(f"{self.kind}: {exc}") from None
        finally:
            self.made += client.calls
            await client.aclose()

    def _problem(self, a: _Asked, c: Any) -> str | None:
        if c.error is not None and (c.failure in _DOWN or str(c.failure).startswith("HTTP 5")):
            raise CallFailed(
                f"{self.kind}: the endpoint {self._config.endpoint} cannot answer "
                f"({c.error}); finished items are kept, re-run the same command when it is up"
            )
        if c.error is not None:
            return f"{a.where}: the {self.kind} call to {self.call.model} failed: {c.error}"
        return None

    def _path(self, key: str) -> Path:
        return self.cache / key[:2] / f"{key}.json"

    def _read(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise BuildError(
                f"{self.kind}: the cached answer {path} is damaged; delete it to ask again"
            ) from None

    def _write(self, key: str, answer: dict[str, Any], c: Any) -> None:
        from medibench.io import atomic_write_text

        record = {**self.provenance(), "key": key, "kind": self.kind, **answer,
                  "input_tokens": c.input_tokens, "output_tokens": c.output_tokens}  # fmt: skip
        atomic_write_text(self._path(key), json.dumps(record, indent=1) + "\n")


def _parses(parse: Parse, stored: dict[str, Any], index: int) -> bool:
    try:
        parse(stored["answer"], stored.get("refused"), index)
    except ValueError:
        return False
    return True


def _excerpt(text: str | None, chars: int = 300) -> str:
    if text is None:
        return "the answer had no text"
    shown = text if len(text) <= chars else text[:chars] + "..."
    return f"the answer was {redact(shown)!r}"
