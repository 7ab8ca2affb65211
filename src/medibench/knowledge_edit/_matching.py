"""Is an answer right? The matchers, side by side on the same answers.

* ``exact``: normalised exact match. Normalising lower-cases, drops punctuation and the
  articles ``a``, ``an``, ``the``, and collapses white space (the SQuAD convention).
* ``fuzzy``: the normalised gold answer appears as a whole-word run inside the normalised
  answer, or ``difflib.SequenceMatcher`` ratio of the two is at least ``threshold`` (0.8);
  the score is 1 for containment, else the ratio.
* ``token_accuracy``: EasyEdit's reading: the gold answer is fed to the model after the prompt
  (teacher forcing) and the score is the fraction of its tokens that are the model's argmax
  prediction; right means every token is (score 1). Needs an answerer that exposes its
  logits (:class:`~medibench.knowledge_edit.TransformersAnswerer`).
* ``judge``: an LLM judge through :mod:`medibench.judges` (:mod:`._judge`), cached.
"""

from __future__ import annotations

import difflib
import re
import string
from typing import NamedTuple

__all__ = ["MATCHERS", "Match", "exact_match", "fuzzy_match", "normalise_answer"]

#: Matchers that need no model or endpoint, then those that do.
MATCHERS = ("exact", "fuzzy", "token_accuracy", "judge")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation})


class Match(NamedTuple):
    """``correct`` (``None`` when the matcher could not decide, e.g. a failed judge call) and
    the matcher's ``score`` in [0, 1]."""

    correct: bool | None
    score: float | None


def normalise_answer(text: str) -> str:
    """``"The Left lung."`` -> ``"left lung"``.

    >>> normalise_answer("  The LEFT, lung. ")
    'left lung'
    """
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(answer: str, gold: str) -> Match:
    """Normalised exact match (score 1 or 0)."""
    ok = normalise_answer(answer) == normalise_answer(gold)
    return Match(ok, 1.0 if ok else 0.0)


def fuzzy_match(answer: str, gold: str, *, threshold: float = 0.8) -> Match:
    """Containment of the gold answer's words, else a similarity ratio of at least
    ``threshold``.

    >>> fuzzy_match("it is on the left side", "left")
    Match(correct=True, score=1.0)
    >>> fuzzy_match("lefft", "left").correct
    True
    """
    a, g = normalise_answer(answer), normalise_answer(gold)
    if not g:
        raise ValueError("fuzzy_match: the gold answer is empty after normalising")
    if f" {g} " in f" {a} ":
        return Match(True, 1.0)
    ratio = difflib.SequenceMatcher(None, a, g).ratio()
    return Match(ratio >= threshold, ratio)
