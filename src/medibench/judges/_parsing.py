"""Reading scores out of a judge's answer: all or nothing, from real score statements only.

Judges answer in many shapes: a JSON object (alone, fenced, or inside prose), ``Name: [7]/10``,
``**Editing Accuracy:** 7/10``, ``Editing Accuracy - 7 out of 10``, ``Score: [72]/100``. The
parser accepts all of them, and never invents a value:

* **A score statement is the one the prompt asks for**: a label followed by ``:``, ``=``, ``-``
  or ``is`` (or directly by ``N/10``) and the value, or a JSON key. A label and number inside a
  quotation (``'Editing Accuracy: [10]/10'``) or right after ``e.g.`` / ``for example`` / ``such
  as`` quotes the format and is not a score.
* **A refusal is refused even when it holds numbers** (``I'm sorry, I cannot ... Editing
  Accuracy: 0``; ``I cannot see the edited image``): status ``refused``, no scores.
* **All or nothing**: the status is ``ok`` only when every required field has a valid score;
  otherwise it is ``unparsable`` and ``scores`` is empty, each field's reason in ``problems``
  (the ones that did parse say so). A protocol whose fields are independent (each asked for on
  its own) passes ``independent=True``: then each valid score is kept on its own.
* A score outside the field's range, or given on another scale (``7/100`` for a 0-10 field),
  is missing with its reason.

Example:
    >>> f = [ScoreField("editing_accuracy", "Editing Accuracy", 0, 10)]
    >>> parse_answer("**Editing Accuracy:** [7]/10", f).scores
    {'editing_accuracy': 7.0}
    >>> parse_answer("Editing Accuracy: 12/10", f).problems
    {'editing_accuracy': 'out_of_range: 12 is not in [0, 10]'}
    >>> parse_answer("The format is e.g. 'Editing Accuracy: [10]/10'.", f).status
    'unparsable'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ParsedAnswer", "ScoreField", "parse_answer", "looks_like_refusal", "rationale"]

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
    """Scores found in one answer; ``problems`` holds the reason for each one not used."""

    status: Status
    scores: dict[str, float] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


def parse_answer(
    text: str | None, fields: Sequence[ScoreField], *, independent: bool = False
) -> ParsedAnswer:
    """Find each field's score in ``text``.

    Status: ``refused`` when the answer declines (whatever numbers it holds); ``ok`` when every
    required field has a valid score from a real score statement; ``unparsable`` otherwise, with
    no scores (all or nothing) unless ``independent`` (then the valid ones are kept).
    """
    text = text or ""
    required = [f.key for f in fields if f.required]
    if looks_like_refusal(text):
        refused = "refused: the judge declined to score (any number in the answer is not used)"
        return ParsedAnswer("refused", {}, {k: refused for k in required})
    scores: dict[str, float] = {}
    problems: dict[str, str] = {}
    obj = _json_object(text, fields)
    plain = _mask_quotes(_strip_markdown(text))
    for f in fields:
        raw, denom = _from_json(obj, f) if obj is not None else (None, None)
        if raw is None:
            raw, denom = _from_text(plain, f)
        if raw is None:
            if f.required:
                problems[f.key] = f"unparsable: no '{f.label}' score statement in the answer"
            continue
        value, why = _check(raw, denom, f)
        if why:
            problems[f.key] = why
        else:
            scores[f.key] = value
    if all(k in scores for k in required):
        return ParsedAnswer("ok", scores, problems)
    if independent:
        return ParsedAnswer("unparsable", scores, problems)
    lacking = ", ".join(k for k in required if k not in scores)
    for k, v in scores.items():
        problems[k] = (
            f"unparsable: {k} parsed as {_fmt(v)} but is not used: the answer lacks a valid "
            f"{lacking} (the scores are required together)"
        )
    return ParsedAnswer("unparsable", {}, problems)


def rationale(text: str | None, fields: Sequence[ScoreField]) -> str:
    """The judge's reasons in an answer: what it says besides its score statements.

    A JSON answer (:func:`parse_answer`'s choice of object): the prose around the object, then
    each free-text value in it (every string or list of strings under a key that is not a score
    field: MedEBench's ``differences``, the rubric's ``reason``, a field's own ``{"score": 7,
    "reason": ...}``), one per line, as ``key: text`` when there are several. A text answer: the
    text with every score statement that :func:`parse_answer` reads taken out and the lines left
    empty dropped. ``""`` when the answer holds nothing but scores.

    Example:
        >>> f = [ScoreField("rubric", "Rubric Score", 0, 100)]
        >>> rationale("The lesion is half gone.\\nRubric Score: [55]/100", f)
        'The lesion is half gone.'
        >>> rationale('{"reason": "Half gone.", "rubric": 55}', f)
        'Half gone.'
    """
    text = text or ""
    found = _answer_object(text, fields)
    if found is None:
        return _without_statements(text, fields)
    obj, start, end = found
    prose = _FENCE.sub("", text[:start] + "\n" + text[end:])
    names = {_norm(n): f for f in fields for n in f.names}
    parts = [(key, said) for key, said in _free_texts(obj, names) if said]
    # Several texts are named by their keys (a list under its key, on lines of its own).
    lines = [
        said if len(parts) == 1 else f"{key}:" + ("\n" if "\n" in said else " ") + said
        for key, said in parts
    ]
    return "\n".join(x for x in (_without_statements(prose, fields), *lines) if x)


# An answer that opens by apologising or declining, or says anywhere that it cannot see the
# images or give the scores, is a refusal.
_OPENS_APOLOGY = re.compile(
    r"^\W*(i'?m sorry|i am sorry|sorry\b|i apologi[sz]e|unfortunately)", re.I
)
_CANNOT = (
    r"(?:can(?:'|’|no)?t|cannot|am unable to|'m unable to|are unable to|unable to|"
    r"am not able to|not able to|won'?t|will not)"
)
_DECLINE = re.compile(
    rf"\b{_CANNOT}\s+(?:\w+\s+){{0,2}}?(?:help|assist|evaluate|assess|review|analy[sz]e|score|"
    r"rate|judge|grade|provide|comply|interpret|complete|perform|fulfil+|do that|do this)\b",
    re.I,
)
_OPENS_DECLINE = re.compile(rf"^\W*(?:i|we)\s*{_CANNOT}", re.I)
_CANNOT_SEE = re.compile(
    rf"\b{_CANNOT}\s+(?:see|view|access|open|process|load|display|read)\s+"
    r"(?:(?:the|these|this|that|those|your|any|an?)\s+)?(?:\w+\s+){0,2}?"
    r"(?:images?|pictures?|photos?|files?|attachments?|scans?)\b",
    re.I,
)
_NO_IMAGE = re.compile(
    r"\bno\s+(?:\w+\s+)?images?\s+(?:was|were|has been|have been|is|are)\s+"
    r"(?:provided|attached|included|shown|uploaded|visible)",
    re.I,
)
_DECLINE_SCORE = re.compile(
    rf"\b{_CANNOT}\s+(?:give|provide|assign|offer|produce|determine)\s+(?:\w+\s+){{0,2}}?"
    r"(?:scores?|ratings?|assessments?|evaluations?)\b",
    re.I,
)


def looks_like_refusal(text: str) -> bool:
    """An answer that declines: it opens with ``I'm sorry``/``I can't ...`` and declines, or
    says it cannot see the images or give the scores. Numbers in it do not make it a score."""
    t = text.strip()
    if not t:
        return False
    opens = bool(_OPENS_APOLOGY.match(t) or _OPENS_DECLINE.match(t))
    if opens and _DECLINE.search(t):
        return True
    return bool(_CANNOT_SEE.search(t) or _NO_IMAGE.search(t) or _DECLINE_SCORE.search(t))


# -- JSON -------------------------------------------------------------------------------------
def _json_object(text: str, fields: Sequence[ScoreField]) -> dict[str, Any] | None:
    """The last JSON object in ``text`` that holds one of the fields (whole, fenced, in prose)."""
    found = _answer_object(text, fields)
    return None if found is None else _flatten(found[0])


def _answer_object(
    text: str, fields: Sequence[ScoreField]
) -> tuple[dict[str, Any], int, int] | None:
    """The last JSON object in ``text`` that holds one of the fields, as written, and where it
    starts and ends in ``text``."""
    candidates: list[tuple[Any, int, int]] = []
    try:
        candidates.append((json.loads(text), 0, len(text)))
    except ValueError:
        candidates += _embedded_objects(text)
    wanted = {_norm(n) for f in fields for n in f.names}
    for obj, start, end in reversed(candidates):
        flat = _flatten(obj)
        if flat and wanted & set(flat):
            return obj, start, end
    return None


def _embedded_objects(text: str) -> list[tuple[Any, int, int]]:
    out = []
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        out.append((obj, i, end))
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


def _free_texts(
    obj: dict[str, Any], names: dict[str, ScoreField], within: ScoreField | None = None
) -> Iterator[tuple[str, str]]:
    """``(key, text)`` for each free-text value of a judge's JSON object: strings (and lists of
    strings) under keys that are not score fields, nested objects followed; a text inside a
    score field's own object (``{"score": 7, "reason": ...}``) is named after the field."""
    for key, value in obj.items():
        f = names.get(_norm(key))
        if isinstance(value, dict):
            yield from _free_texts(value, names, f or within)
        elif f is None and (said := _text_of(value)):
            yield (f"{within.label} {key}" if within is not None else str(key)), said


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "\n".join(f"- {v.strip()}" for v in value if v.strip())
    return ""


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


# A code fence around a JSON answer (```json ... ```).
_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)
# What a line is left with when its score statement is taken out: list marks, separators.
_LEFTOVER = re.compile(r"^[\s\-*#>|.,;:•–—]*$")


def _without_statements(text: str, fields: Sequence[ScoreField]) -> str:
    """``text`` without the score statements :func:`parse_answer` reads in it (found on a copy
    with markdown and quotations blanked, so positions stay), and without the lines that held
    nothing else."""
    blank = _mask_quotes(_MARKDOWN.sub(lambda m: " " * len(m.group()), text))
    spans = sorted(m.span() for f in fields for m in _statements(blank, f))
    kept, at = "", 0
    for start, end in [*spans, (len(text), len(text))]:
        if start >= at:  # overlapping statements (a label and its alias) are one cut
            left, right = kept.rstrip(" \t"), text[at:start].lstrip(" \t")
            joint = left[-1:] not in ("", "\n") and right[:1] not in ("", "\n")
            kept = left + " " * joint + right
        at = max(at, end)
    lines = [line.rstrip() for line in kept.splitlines()]
    lines = [line for line in lines if not _LEFTOVER.match(line) or not line.strip()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


# A quotation (an apostrophe inside a word, as in "lesion's", opens none) and the words that
# introduce an example: a label and number there quote the format, they are not a score.
_QUOTED = re.compile(
    r"(?<!\w)'[^'\n]{1,300}?'(?!\w)|\"[^\"\n]{1,300}?\"|“[^”\n]{1,300}?”|‘[^’\n]{1,300}?’"
)
_EXAMPLE = re.compile(
    r"(?:\be\.\s?g\.|\bi\.\s?e\.|\beg\b|\bfor (?:example|instance)\b|\bsuch as\b|"
    r"\bexample\b\s*:?|\blike this\b\s*:?)\W*$",
    re.IGNORECASE,
)


def _mask_quotes(text: str) -> str:
    """``text`` with quoted spans blanked out (same length, so positions stay)."""
    return _QUOTED.sub(lambda m: " " * len(m.group()), text)


def _from_text(text: str, f: ScoreField) -> tuple[Any, float | None]:
    """The last real ``Label[ (note)][ score]: value`` statement in the text (scores come
    after reasoning): a separator (``:``, ``=``, a dash, ``is``) or an ``/N`` after the value is
    required, and a statement right after ``e.g.``/``for example``/``such as`` is an example."""
    last = None
    for m in _statements(text, f):
        last = m  # scores come after reasoning: the last statement counts
    if last is None:
        return None, None
    if f.kind == "yes_no":
        return (1.0 if last.group("yn").lower() in ("yes", "true", "pass") else 0.0), None
    den = last.group("den")
    return float(last.group("num")), (float(den) if den else None)


def _statements(text: str, f: ScoreField) -> Iterator[re.Match[str]]:
    """Every real score statement of ``f`` in ``text`` (markdown and quotations blanked), in
    order: a separator or an ``/N`` after the value, and no ``e.g.`` right before it."""
    value = _YES_NO if f.kind == "yes_no" else _NUMBER
    labels = "|".join(re.escape(n).replace(r"\ ", r"[\s_\-]+") for n in f.names)
    pattern = re.compile(
        rf"(?<![\w])(?:{labels})(?:\s*\([^)\n]*\))?(?:\s+score)?\s*"
        rf"(?P<sep>:|=|-|–|—|\bis\b)?\s*{value}",
        re.IGNORECASE,
    )
    for m in pattern.finditer(text):
        has_den = f.kind == "number" and m.group("den") is not None
        if m.group("sep") is None and not has_den:
            continue  # "Editing Accuracy 2 regions": a number in a sentence, not a statement
        line_start = text.rfind("\n", 0, m.start()) + 1
        if _EXAMPLE.search(text[max(line_start, m.start() - 40) : m.start()]):
            continue
        yield m


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
