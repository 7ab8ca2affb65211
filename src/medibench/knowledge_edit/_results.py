"""The results format: JSONL, one probe outcome per line (docs/knowledge_edit.md).

Required keys: ``edit_id`` (str), ``probe_id`` (str), ``kind`` (``reliability`` |
``generality`` | ``locality``), ``task_type`` (``T0``..``T5``), ``stage`` (``immediate`` |
``final``), ``pre_correct`` and ``post_correct`` (bool, or ``null`` when the matcher could not
decide: a failed judge call, counted as missing). ``edit run`` adds ``matcher``, ``question``,
``gold``, ``pre_answer``, ``post_answer``, ``pre_score``, ``post_score``, ``model``, ``editor``,
``converged`` and ``edit_loss``; a reader keeps every other key it finds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medibench.calls._redact import redact_value
from medibench.datasets._base import read_jsonl
from medibench.knowledge_edit._tasks import KINDS, TASK_TYPES

__all__ = ["STAGES", "ResultLine", "ResultsFormatError", "read_results", "write_results"]

STAGES = ("immediate", "final")


class ResultsFormatError(ValueError):
    """A results line that breaks the format; the message names the file, the line and the key."""


@dataclass(frozen=True)
class ResultLine:
    """One probe's outcome at one stage, by one matcher."""

    edit_id: str
    probe_id: str
    kind: str
    task_type: str
    stage: str
    pre_correct: bool | None
    post_correct: bool | None
    matcher: str = "exact"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"edit_id": self.edit_id, "probe_id": self.probe_id, "kind": self.kind,
                "task_type": self.task_type, "stage": self.stage,
                "pre_correct": self.pre_correct, "post_correct": self.post_correct,
                "matcher": self.matcher, **self.extra}  # fmt: skip


_REQUIRED = ("edit_id", "probe_id", "kind", "task_type", "stage", "pre_correct", "post_correct")


def parse_line(d: Any, where: str) -> ResultLine:
    """A results line from its decoded JSON; :class:`ResultsFormatError` naming ``where``."""
    if not isinstance(d, dict):
        raise ResultsFormatError(f"{where}: expected a JSON object, got {type(d).__name__}")
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise ResultsFormatError(f"{where}: missing key(s) {', '.join(missing)}")
    for key in ("edit_id", "probe_id"):
        if not isinstance(d[key], str) or not d[key]:
            raise ResultsFormatError(f"{where}: {key} must be a non-empty string")
    checks = (("kind", KINDS), ("task_type", TASK_TYPES), ("stage", STAGES))
    for key, valid in checks:
        if d[key] not in valid:
            raise ResultsFormatError(
                f"{where}: unknown {key} {d[key]!r} (valid: {', '.join(valid)})"
            )
    for key in ("pre_correct", "post_correct"):
        if d[key] is not None and not isinstance(d[key], bool):
            raise ResultsFormatError(f"{where}: {key} must be true, false or null, got {d[key]!r}")
    matcher = d.get("matcher", "exact")
    if not isinstance(matcher, str):
        raise ResultsFormatError(f"{where}: matcher must be a string")
    extra = {k: v for k, v in d.items() if k not in (*_REQUIRED, "matcher")}
    return ResultLine(**{k: d[k] for k in _REQUIRED}, matcher=matcher, extra=extra)


def read_results(path: str | os.PathLike) -> list[ResultLine]:
    """Every line of a results file; the first bad line is a :class:`ResultsFormatError`."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"results file {p} does not exist")
    return list(_iter(p))


def _iter(p: Path) -> Iterator[ResultLine]:
    for n, d in read_jsonl(p, error=ResultsFormatError):
        yield parse_line(d, f"{p} line {n}")


def write_results(path: str | os.PathLike, lines: Iterable[ResultLine], *, append: bool = False
                  ) -> Path:  # fmt: skip
    """Write (or append) results lines as JSONL."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a" if append else "w", encoding="utf-8") as fh:
        for line in lines:
            record = redact_value(line.to_dict())  # answers may quote an echoed key
            fh.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    return p
