"""MedGEN-Bench's text forms, as its evaluation code makes them: free text normalised, its word
tokens, and a reference answer (a string or report sections) as one text. :mod:`.text` scores
them; the model-based metrics of :mod:`._text_models` read them too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from medibench._strings import text_of

__all__ = ["REPORT_SECTIONS", "normalize_free_text", "report_text", "text_tokens"]

_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)?")
#: Report sections in the order the code writes a sectioned answer; others follow by name.
REPORT_SECTIONS = (
    "STUDY",
    "EXAMINATION",
    "MODALITY",
    "CLINICAL_HISTORY",
    "INDICATION",
    "HISTORY",
    "TECHNIQUE",
    "COMPARISON",
    "FINDINGS",
    "IMPRESSION",
    "RECOMMENDATION",
    "NOTIFICATION",
)


def normalize_free_text(text: object) -> str:
    """Lower case with runs of whitespace as one space, trimmed (the code's free-text form)."""
    return _SPACES.sub(" ", text_of(text).strip()).lower()


def text_tokens(text: object) -> list[str]:
    """The code's word tokens: ``[a-z0-9]+('[a-z0-9]+)?`` of the normalised text."""
    return _WORD.findall(normalize_free_text(text))


def report_text(answer: str | Mapping[str, object]) -> str:
    """A reference answer as the code serialises it: a string with whitespace collapsed, or
    report sections as ``KEY: text`` lines in :data:`REPORT_SECTIONS` order (others after,
    by name; nested sections indented two spaces; list values joined with ``"; "``)."""
    if isinstance(answer, str):
        return _collapse(answer)
    if not isinstance(answer, Mapping):
        return _collapse(str(answer))
    lines: list[str] = []
    for key in _section_order(answer):
        _section_lines(str(key), answer[key], lines, 0)
    return "\n".join(lines)


def _collapse(text: str) -> str:
    return _SPACES.sub(" ", text.strip())


def _section_order(sections: Mapping) -> list:
    def rank(key: object) -> tuple[int, str]:
        name = str(key)
        up = name.upper()
        return (
            REPORT_SECTIONS.index(up) if up in REPORT_SECTIONS else len(REPORT_SECTIONS),
            name.lower(),
        )

    return sorted(sections, key=rank)


def _section_lines(key: str, value: object, lines: list[str], depth: int) -> None:
    pad = "  " * depth
    if isinstance(value, Mapping):
        lines.append(f"{pad}{key}:")
        for child in _section_order(value):
            _section_lines(str(child), value[child], lines, depth + 1)
    elif isinstance(value, list):
        if value:
            lines.append(f"{pad}{key}: " + "; ".join(_collapse(str(v)) for v in value))
    elif text := _collapse(str(value)):
        lines.append(f"{pad}{key}: {text}")
