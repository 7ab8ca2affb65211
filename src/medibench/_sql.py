"""SQL text shared by the run store and the judge records."""

from __future__ import annotations

from typing import Any

__all__ = ["where_equal"]


def where_equal(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    """``(" WHERE a = ? AND b = ?", [va, vb])`` for the filters whose value is not ``None``
    (``("", [])`` when there are none); the column names are the caller's, never user input."""
    given = {column: value for column, value in filters.items() if value is not None}
    if not given:
        return "", []
    return " WHERE " + " AND ".join(f"{c} = ?" for c in given), list(given.values())
