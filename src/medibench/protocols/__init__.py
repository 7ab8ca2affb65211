"""Protocols bind a benchmark to its metric settings; each has a name and a version.

``load_protocol("native@1")`` (or ``"native"`` for the latest version) returns a
:class:`ScoringProtocol`. The name and version go into every score record.
"""

from __future__ import annotations

from medibench.protocols._base import (
    NOT_JUDGED,
    Aggregation,
    KReduction,
    ProtocolResult,
    ScoringProtocol,
)
from medibench.registry import Registry

__all__ = [
    "NOT_JUDGED",
    "PROTOCOLS",
    "Aggregation",
    "KReduction",
    "ProtocolResult",
    "ScoringProtocol",
    "load_protocol",
]

PROTOCOLS: Registry[ScoringProtocol] = Registry("protocol")
PROTOCOLS.register(
    "native@1",
    "medibench.protocols.native:NativeProtocol",
    help="medibench corrected metrics: SSIM/PSNR vs target, CP outside the ROI, ROI SSIM, Dice",
)

#: The version a bare name resolves to.
LATEST = {"native": "native@1"}


def load_protocol(spec: str) -> ScoringProtocol:
    """The protocol named ``"name@version"``, or the latest version of ``"name"``."""
    return PROTOCOLS.create(LATEST.get(spec, spec))
