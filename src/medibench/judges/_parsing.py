"""Reading scores out of a judge's answer: JSON first, then tolerant text patterns.

Judges answer in many shapes: a JSON object (alone, fenced, or inside prose), ``Name: [7]/10``,
``**Editing Accuracy:** 7/10``, ``Editing Accuracy - 7 out of 10``, ``Score: [72]/100``. The
parser accepts all of them, and never invents a value: a score it cannot find, or that lies
outside the field's range, or that is given on another scale (``7/100`` for a 0-10 field), is
missing with its reason, and the other scores are kept.

Example:
    >>> f = [ScoreField("editing_accuracy", "Editing Accuracy", 0, 10)]
    >>> parse_answer("**Editing Accuracy:** [7]/10", f).scores
    {'editing_accuracy': 7.0}
    >>> parse_answer("Editing Accuracy: 12/10", f).problems
    {'editing_accuracy': 'out_of_range: 12 is not in [0, 10]'}
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ParsedAnswer", "ScoreField", "parse_answer", "looks_like_refusal"]

Status = Literal["ok", "refused", "unparsable", "error"]


@dataclass(frozen=True)
class ScoreField:
    """One score a judge must give.

    Attributes:
        key: the JSON key and the name in the records (``editing_accuracy``).
        label: how the prompt names it (``Editing Accuracy``); text answers are matched on it.
        lo, hi: the allowed range, inclusive; ``hi`` is also the expected ``/N`` denominator.
        aliases: other labels accepted in text and JSON (``EA``, ``Score``).
        required: a missing optional field (a checklist item) does not make the answer
            unparsable.
        kind: ``"number"``, or ``"yes_no"`` for checklist items (stored as 1.0 / 0.0).
    """

    key: str
    label: str
    lo: float
    hi: float
    aliases: tuple[str, ...] = ()
    required: bool = True
    kind: Literal["number", "yes_no"] = "number"

    @property
    def names(self) -> tuple[str, ...]:
        return (self.label, self.key, *self.aliases)


@dataclass
class ParsedAnswer:
    """Scores found in one answer; ``problems`` holds the reason for each one not found."""

    status: Status
    scores: dict[str, float] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


def parse_answer(text: str | None, fields: Sequence[ScoreField]) -> ParsedAnswer:
    """Find each field's score in ``text``.

    Status: ``ok`` when every required field has a valid score; ``refused`` when the answer
    has no score and reads as a refusal; ``unparsable`` otherwise (the valid scores are kept).
    """
    text = text or ""
    scores: dict[str, float] = {}
    problems: dict[str, str] = {}
    obj = _json_object(text, fields)
    plain = _strip_markdown(text)
    for f in fields:
        raw, denom = _from_json(obj, f) if obj is not None else (None, None)
        if raw is None:
            raw, denom = _from_text(plain, f)
        if raw is None:
            if f.required:
                problems[f.key] = f"unparsable: no '{f.label}' score in the answer"
            continue
        value, why = _check(raw, denom, f)
        if why:
            problems[f.key] = why
        else:
            scores[f.key] = value
    required = [f.key for f in fields if f.required]
    if all(k in scores for k in required):
        return ParsedAnswer("ok", scores, problems)
    if not scores and looks_like_refusal(text):
        return ParsedAnswer(
            "refused", {}, {k: "refused: the judge declined to score" for k in required}
        )
    return ParsedAnswer("unparsable", scores, problems)


_REFUSAL = re.compile(
    r"^\W*(i'?m sorry|i am sorry|sorry,|i can(?:no|')t|i cannot|i am unable|i'?m unable|"
    r"i won'?t|unfortunately,? i can)",
    re.IGNORECASE,
)


def looks_like_refusal(text: str) -> bool:
    """An answer that opens by declining (``I'm sorry, I can't ...``)."""
    return bool(_REFUSAL.match(text.strip()))


# -- JSON -------------------------------------------------------------------------------------
def _json_object(text: str, fields: Sequence[ScoreField]) -> dict[str, Any] | None:
    """The last JSON object in ``text`` that holds one of the fields (whole, fenced, in prose)."""
    candidates: list[Any] = []
    try:
        candidates.append(json.loads(text))
    except ValueError:
        candidates += _embedded_objects(text)
    wanted = {_norm(n) for f in fields for n in f.names}
    for obj in reversed(candidates):
        flat = _flatten(obj)
        if flat and wanted & set(flat):
            return flat
    return None


def _embedded_objects(text: str) -> list[Any]:
    out = []
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        out.append(obj)
        i = text.find("{", end)
    return out


def _flatten(obj: Any) -> dict[str, Any] | None:
    """Normalised keys of a JSON object, one level of nesting lifted (``{"scores": {...}}``)."""
    if not isinstance(obj, dict):
        return None
    flat: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                flat.setdefault(_norm(k2), v2)
        else:
            flat[_norm(k)] = v
    return flat


def _from_json(obj: dict[str, Any], f: ScoreField) -> tuple[Any, float | None]:
    for name in f.names:
        v = obj.get(_norm(name))
        if isinstance(v, dict):  # {"editing_accuracy": {"score": 7, "reason": ...}}
            v = v.get("score", v.get("value"))
        if v is None:
            continue
        if isinstance(v, bool):
            return (1.0 if v else 0.0), None
        if isinstance(v, int | float):
            return float(v), None
        if isinstance(v, str):
            got = _number_in(v, f)
            if got[0] is not None:
                return got
    return None, None


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-/]+", "", str(name)).lower()


# -- text -------------------------------------------------------------------------------------
_MARKDOWN = re.compile(r"\*\*|__|\*|`|^#+\s*", re.MULTILINE)
_NUMBER = (
    r"\[?\s*\(?\s*(?P<num>[-+]?\d+(?:\.\d+)?)\s*\)?\s*\]?"
    r"(?:\s*(?:/|out\s+of|of)\s*\[?(?P<den>\d+(?:\.\d+)?)\]?)?"
)
_YES_NO = r"\[?\s*(?P<yn>yes|no|true|false|pass|fail)\b"


def _strip_markdown(text: str) -> str:
    return _MARKDOWN.sub("", text)


def _from_text(text: str, f: ScoreField) -> tuple[Any, float | None]:
    """The last ``Label[ (note)][ score]: value`` in the text (scores come after reasoning)."""
    value = _YES_NO if f.kind == "yes_no" else _NUMBER
    labels = "|".join(re.escape(n).replace(r"\ ", r"[\s_\-]+") for n in f.names)
    pattern = re.compile(
        rf"(?<![\w])(?:{labels})(?:\s*\([^)\n]*\))?(?:\s+score)?\s*(?::|=|-|–|—|\bis\b)?\s*{value}",
        re.IGNORECASE,
    )
    last = None
    for m in pattern.finditer(text):
        last = m
    if last is None:
        return None, None
    if f.kind == "yes_no":
        return (1.0 if last.group("yn").lower() in ("yes", "true", "pass") else 0.0), None
    den = last.group("den")
    return float(last.group("num")), (float(den) if den else None)


def _number_in(s: str, f: ScoreField) -> tuple[Any, float | None]:
    if f.kind == "yes_no":
        m = re.match(r"\s*" + _YES_NO, s, re.IGNORECASE)
        return (
            ((1.0 if m.group("yn").lower() in ("yes", "true", "pass") else 0.0), None)
            if m
            else (
                None,
                None,
            )
        )
    m = re.match(r"\s*" + _NUMBER, s, re.IGNORECASE)
    if not m:
        return None, None
    den = m.group("den")
    return float(m.group("num")), (float(den) if den else None)


def _check(value: float, denom: float | None, f: ScoreField) -> tuple[float, str | None]:
    if denom is not None and f.kind == "number" and denom != f.hi:
        return (
            value,
            f"unparsable: '{f.label}' given as {_fmt(value)}/{_fmt(denom)}, expected /{_fmt(f.hi)}",
        )
    if not (f.lo <= value <= f.hi):
        return value, f"out_of_range: {_fmt(value)} is not in [{_fmt(f.lo)}, {_fmt(f.hi)}]"
    return float(value), None


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
