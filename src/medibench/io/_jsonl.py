"""JSON Lines, line by line: what each reader of a JSONL file (a dataset manifest, a benchmark's
records, a model's answer file, an edit-task file) decides about a line that is not JSON is its
own; finding the lines and parsing them is this one function. And :func:`finite_or_null`, what a
writer of results does to the floats JSON has no words for.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["finite_or_null", "json_lines"]


def finite_or_null(value: Any) -> Any:
    """``value`` with each NaN or infinite float (in nested dicts, lists, tuples) as ``None``.

    Example:
        >>> finite_or_null({"a": [1.0, float("nan")], "b": (float("inf"),)})
        {'a': [1.0, None], 'b': [None]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


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
