"""Which text-encoder positions hold a word of the instruction (sub-word tokens merged)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["TokenChoice", "WordNotInInstructionError", "instruction_words", "select_word"]

_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")
Occurrence = Literal["first", "all"]


class WordNotInInstructionError(ValueError):
    """The word asked for is not a word of the instruction (the message lists its words)."""


@dataclass(frozen=True)
class TokenChoice:
    """The positions (in the encoder's padded sequence, start token at 0) of ``word``'s tokens,
    the tokens themselves, which ``occurrence`` was taken, and how the word was chosen
    (``given`` on the command line, ``region`` of the sample, ``longest`` word)."""

    word: str
    positions: tuple[int, ...]
    tokens: tuple[str, ...]
    occurrence: Occurrence
    how: str = "given"

    def record(self) -> dict[str, Any]:
        return {
            "word": self.word,
            "positions": list(self.positions),
            "tokens": list(self.tokens),
            "occurrence": self.occurrence,
            "how": self.how,
        }


def instruction_words(instruction: str) -> list[str]:
    """The instruction's words (letters and digits, with inner hyphens and apostrophes)."""
    return [m.group(0) for m in _WORD.finditer(instruction)]


def select_word(
    tokenizer: Any,
    instruction: str,
    word: str,
    *,
    occurrence: Occurrence = "first",
    how: str = "given",
) -> TokenChoice:
    """The positions of ``word`` (case-insensitive) in ``tokenizer(instruction)``.

    A word split into sub-word tokens gives all of them (the capture merges their maps).
    ``occurrence="first"`` takes the word's first occurrence, ``"all"`` every one.

    Raises:
        WordNotInInstructionError: ``word`` is not one of the instruction's words; the message
            lists them.
        ValueError: the word lies past the tokenizer's ``model_max_length`` (truncated away).
    """
    spans = [m.span() for m in _WORD.finditer(instruction) if m.group(0).lower() == word.lower()]
    if not spans:
        words = ", ".join(dict.fromkeys(instruction_words(instruction))) or "(none)"
        raise WordNotInInstructionError(
            f"word {word!r} is not in the instruction {instruction!r}; its words: {words}"
        )
    if occurrence == "first":
        spans = spans[:1]
    elif occurrence != "all":
        raise ValueError(f"occurrence must be 'first' or 'all', not {occurrence!r}")
    ids, offsets = _ids_and_offsets(tokenizer, instruction)
    positions = [
        i
        for i, (start, end) in enumerate(offsets)
        if end > start and any(start < s_end and end > s_start for s_start, s_end in spans)
    ]
    limit = int(getattr(tokenizer, "model_max_length", len(ids)))
    if not positions or max(positions) >= limit - 1:
        raise ValueError(
            f"word {word!r} of {instruction!r} lies past the text encoder's {limit} tokens "
            "(truncated away): shorten the instruction or pick an earlier word"
        )
    tokens = tuple(tokenizer.convert_ids_to_tokens([ids[i] for i in positions]))
    return TokenChoice(word, tuple(positions), tokens, occurrence, how)


def _ids_and_offsets(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    try:
        enc = tokenizer(text, return_offsets_mapping=True)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
    except (NotImplementedError, KeyError, TypeError):
        pass
    # Slow tokenizers: a token's span from the token counts of growing word-boundary prefixes.
    ids = list(tokenizer(text)["input_ids"])
    offsets: list[tuple[int, int]] = [(0, 0)] * len(ids)
    count = lambda s: len(tokenizer(s, add_special_tokens=False)["input_ids"])  # noqa: E731
    first = 1 if ids and ids[0] == getattr(tokenizer, "bos_token_id", None) else 0
    for m in _WORD.finditer(text):
        before, upto = count(text[: m.start()]), count(text[: m.end()])
        for i in range(before, upto):
            if first + i < len(offsets):
                offsets[first + i] = m.span()
    return ids, offsets
