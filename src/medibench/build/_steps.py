"""The chat-model steps of a build: which a build asks, and their call counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench.build._source import SourceSpec

__all__ = ["add_counts", "chat_steps"]


def chat_steps(source: SourceSpec, perspective: str, folder: Path) -> dict[str, Any]:
    """The chat-model steps of a build, each holding its :class:`~medibench.build._calls.ChatStep`
    as ``step``: the rephrasing (``rephrase:``), and in modification builds the VLM verifier
    (``verify:``)."""
    steps: dict[str, Any] = {}
    if source.rephrase is not None:
        from medibench.build._rephrase import Rephraser

        steps["rephrase"] = Rephraser(source.rephrase, folder)
    if source.verify is not None and perspective == "modification":
        from medibench.build._vlm import VLMVerifier

        steps["verify"] = VLMVerifier(source.verify, folder)
    return steps


def add_counts(total: dict[str, dict[str, int]], kind: str, counts: dict[str, int]) -> None:
    """Add one step's counts (``made``, ``cached``, ...) to ``total[kind]``."""
    mine = total.setdefault(kind, {})
    for name, value in counts.items():
        mine[name] = mine.get(name, 0) + int(value)
