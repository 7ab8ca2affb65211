"""JSON Lines, line by line: what each reader of a JSONL file (a dataset manifest, a benchmark's
records, a model's answer file, an edit-task file) decides about a line that is not JSON is its
own; finding the lines and parsing them is this one function.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["json_lines"]


def json_lines(
    lines: Iterable[str],
) -> Iterator[tuple[int, str, Any, json.JSONDecodeError | None]]:
    """``(line number from 1, text, value, error)`` of each non-blank line: the parsed value and
    ``None``, or ``None`` and the :class:`json.JSONDecodeError` of a line that is not JSON.

    Example:
        >>> [(n, v, e) for n, _, v, e in json_lines(['{"a": 1}', "", "[2]"])]
        [(1, {'a': 1}, None), (3, [2], None)]
    """
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, line, json.loads(line), None
        except json.JSONDecodeError as exc:
            yield number, line, None, exc
