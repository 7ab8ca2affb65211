"""What the perspectives make from one slice: triplets, filter counts and attempt logs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medibench.samples import Perspective

__all__ = ["BuildContext", "SliceOutput", "Triplet"]


@dataclass
class Triplet:
    """One sample before it is written. ``input``/``target`` may be the slice's own image
    object (written once per slice and shared)."""

    task: str
    perspective: Perspective
    name: str
    input: np.ndarray
    target: np.ndarray
    mask: np.ndarray | None
    instruction: str
    paraphrases: tuple[str, ...] = ()
    overlay_color: tuple[str, ...] = ()
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class SliceOutput:
    """The triplets of one slice, its filter counts and (modification) its attempts."""

    triplets: list[Triplet] = field(default_factory=list)
    filters: Counter = field(default_factory=Counter)
    attempts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BuildContext:
    """What every slice of a build shares: the seed, the options, plug-ins (``vlm``: the VLM
    verifier of ``verify:``, or None), the item's seen digests (exact duplicates)."""

    seed: int
    options: dict[str, Any] = field(default_factory=dict)
    inpainter: Any = None
    verifier: Any = None
    vlm: Any = None
    seen: set[str] = field(default_factory=set)
