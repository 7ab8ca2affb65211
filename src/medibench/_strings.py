"""Text of a value read from a user's file."""

from __future__ import annotations

__all__ = ["text_of"]


def text_of(value: object) -> str:
    """``str(value)``, with ``None`` as ``""``. A gold answer ``0`` (a number in the JSON) or
    ``False`` stays ``"0"`` / ``"False"``, where ``str(value or "")`` would make it empty."""
    return "" if value is None else str(value)
