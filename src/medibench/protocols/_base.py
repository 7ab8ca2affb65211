"""What a protocol is: metric names + settings + resize policy, with a version.

A protocol scores one prediction of one sample and returns metric values, with a reason for each
value it could not compute (never a 0 in its place) and notes for what it did to the inputs
(a resize, for instance). Its ``name`` and ``version`` go into every score record; changing what a
protocol computes means a new version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol as _Protocol
from typing import runtime_checkable

import numpy as np

from medibench.datasets import SampleImages
from medibench.samples import Sample

__all__ = ["ScoringProtocol", "ProtocolResult"]


@dataclass
class ProtocolResult:
    """Metric values for one prediction; ``None`` values have their reason in ``reasons``."""

    metrics: dict[str, float | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def missing(self, name: str, reason: str) -> None:
        self.metrics[name] = None
        self.reasons[name] = reason

    @property
    def error(self) -> str | None:
        """All reasons as one string (``"cp: no ROI mask; dice: ..."``), or ``None``."""
        if not self.reasons:
            return None
        return "; ".join(f"{k}: {v}" for k, v in self.reasons.items())


@runtime_checkable
class ScoringProtocol(_Protocol):
    """A benchmark's scoring rules."""

    name: str
    version: str
    description: str
    metric_names: tuple[str, ...]

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        """Score ``prediction`` (uint8 RGB, any size) for ``sample`` given its decoded images."""
        ...
