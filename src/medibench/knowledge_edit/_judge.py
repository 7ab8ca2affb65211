"""The optional LLM judge of answers: is the model's answer the gold answer? Cached.

One chat call per distinct (question, gold answer, model answer) through the one chat client
(:class:`medibench.calls.ChatClient`: OpenAI-compatible, retries, bounded concurrency, key
redaction), temperature 0. The cache key (:func:`medibench.judges.cache_key`) covers the judge
model, the endpoint, the prompt's version and text, the three strings and the decoding
parameters; answers are kept in the run store's ``edit_judgements`` table (or in memory), so the
same question is never paid for twice.

Parsing is all or nothing: the reply must be ``{"correct": true}`` / ``{"correct": false}``
(a JSON object, possibly in a code fence) or the single word ``correct`` / ``incorrect``.
Anything else (a refusal, a failed call, an explanation without a verdict) is stored with its
status and counts as missing (``post_correct`` null), never as wrong.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from medibench.calls._redact import redact
from medibench.knowledge_edit._experiment import Matcher
from medibench.knowledge_edit._matching import Match
from medibench.knowledge_edit._tasks import Probe

__all__ = ["JUDGE_PROMPT", "JudgeMatcher", "parse_verdict"]

JUDGE_PROMPT_VERSION = "1"
JUDGE_PROMPT = (
    "You grade answers to medical visual questions. Question: {question}\n"
    "Reference answer: {gold}\nModel answer: {answer}\n"
    "Does the model answer mean the same as the reference answer? Reply with JSON only: "
    '{{"correct": true}} or {{"correct": false}}.'
)
_TABLE = (
    "edit_judgements",
    "key TEXT PRIMARY KEY, judge_model TEXT NOT NULL, endpoint TEXT NOT NULL, "
    "status TEXT NOT NULL, raw TEXT, correct INTEGER, error TEXT, created_at REAL NOT NULL",
    ("key",),
)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def parse_verdict(text: str | None) -> bool | None:
    """``True`` / ``False`` from a strict verdict, ``None`` for anything else.

    >>> parse_verdict('{"correct": true}'), parse_verdict("Incorrect"), parse_verdict("maybe")
    (True, False, None)
    """
    if text is None:
        return None
    t = text.strip()
    m = _FENCE.match(t)
    if m:
        t = m.group(1)
    if t.lower().rstrip(".") in ("correct", "incorrect"):
        return t.lower().rstrip(".") == "correct"
    try:
        d = json.loads(t)
    except json.JSONDecodeError:
        return None
    if isinstance(d, dict) and set(d) == {"correct"} and isinstance(d["correct"], bool):
        return d["correct"]
    return None


class JudgeMatcher(Matcher):
    """An LLM judge as a matcher (``config``: a :class:`medibench.judges.JudgeConfig`;
    ``store``: a run store to keep the cache in)."""

    name = "judge"

    def __init__(self, config: Any, store: Any | None = None) -> None:
        self.config = config
        self.store = store
        self.memory: dict[str, tuple[str, bool | None]] = {}
        self.calls = 0
        if store is not None:
            store.declare_table(*_TABLE[:2], _TABLE[2], stage="knowledge_edit")

    def match_batch(self, items: Sequence[tuple[Probe, str, np.ndarray]]) -> list[Match]:
        from medibench.judges import cache_key

        keys = [cache_key(self._material(p.question, p.answer, a)) for p, a, _ in items]
        known = self._cached(set(keys))
        todo = {k: (p, a) for k, (p, a, _) in zip(keys, items, strict=True) if k not in known}
        if todo:
            known.update(asyncio.run(self._ask(todo)))
        out = []
        for k in keys:
            correct = known[k][1]
            out.append(Match(correct, None if correct is None else float(correct)))
        return out

    def _material(self, question: str, gold: str, answer: str) -> dict[str, Any]:
        return {"judge_model": self.config.model, "endpoint": self.config.endpoint,
                "prompt_version": JUDGE_PROMPT_VERSION, "prompt": JUDGE_PROMPT,
                "question": question, "gold": gold, "answer": answer,
                "decoding": self.config.decoding(self.config.seed)}  # fmt: skip

    def _cached(self, keys: set[str]) -> dict[str, tuple[str, bool | None]]:
        found = {k: v for k, v in self.memory.items() if k in keys and v[0] == "ok"}
        if self.store is not None:
            for key, status, correct in self.store.connection.execute(
                "SELECT key, status, correct FROM edit_judgements WHERE status = 'ok'"
            ):
                if key in keys:
                    found[key] = (status, bool(correct))
        return found

    async def _ask(self, todo: dict[str, tuple[Probe, str]]) -> dict[str, tuple[str, bool | None]]:
        from medibench.calls import ChatClient

        client = ChatClient(self.config)
        try:
            keys = list(todo)
            done = await asyncio.gather(*(client.complete(
                [{"role": "user", "content": JUDGE_PROMPT.format(
                    question=todo[k][0].question, gold=todo[k][0].answer, answer=todo[k][1])}],
                seed=self.config.seed) for k in keys))  # fmt: skip
        finally:
            self.calls += client.calls
            await client.aclose()
        out: dict[str, tuple[str, bool | None]] = {}
        rows = []
        for k, c in zip(keys, done, strict=True):
            verdict = parse_verdict(c.text) if c.error is None and not c.refused else None
            status = ("error" if c.error else "refused" if c.refused
                      else "ok" if verdict is not None else "unparsable")  # fmt: skip
            out[k] = (status, verdict)
            self.memory[k] = out[k]
            rows.append(
                (
                    k,
                    self.config.model,
                    self.config.endpoint,
                    status,
                    redact(c.text),  # a judge server may echo the key in its answer
                    None if verdict is None else int(verdict),
                    redact(c.error),
                    time.time(),
                )
            )
        if self.store is not None:
            with self.store.transaction():
                self.store.connection.executemany(
                    "INSERT OR REPLACE INTO edit_judgements VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
                )
        return out
