"""The error of a build that cannot go on: a bad source description or a bad source item."""

from __future__ import annotations

__all__ = ["BuildError"]


class BuildError(ValueError):
    """A source or item that cannot be built; the message names the file, the item and the
    problem."""
