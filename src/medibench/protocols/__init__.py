"""Protocols bind a benchmark to its metric settings; each has a name and a version.

``load_protocol("native@1")`` (or ``"native"`` for the latest version) returns a
:class:`ScoringProtocol`. The name and version go into every score record.
"""

from __future__ import annotations

from medibench.protocols._base import (
    MEDIBENCH_SSIM,
    NOT_JUDGED,
    PSNR_CAP_DB,
    SKIMAGE_DEFAULT_SSIM,
    Aggregation,
    KReduction,
    ProtocolResult,
    ScoringProtocol,
)
from medibench.registry import Registry

__all__ = [
    "MEDIBENCH_SSIM",
    "NOT_JUDGED",
    "PSNR_CAP_DB",
    "SKIMAGE_DEFAULT_SSIM",
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

for _spec, _target, _help in (
    (
        "medebench@paper",
        "medebench:MedEBenchPaperProtocol",
        "MedEBench as the official script computes CP (ROI zero-filled, skimage defaults)",
    ),
    (
        "medebench@1",
        "medebench:MedEBenchProtocol",
        "MedEBench corrected: CP = SSIM-map mean outside the ROI, masked PSNR, ROI fidelity",
    ),
    (
        "miedb@paper",
        "miedb:MieDBPaperProtocol",
        "MieDB-100k as the shipped scripts compute it (overlay Dice @1/@k, 'background' PSNR/SSIM)",
    ),
    (
        "miedb@1",
        "miedb:MieDBProtocol",
        "MieDB-100k corrected: background PSNR/SSIM vs input outside the label, stored masks",
    ),
    (
        "medgen@code",
        "medgen:MedGenCodeProtocol",
        "MedGEN-Bench image tier as its evaluation code computes it (Lanczos, PSNR cap 100)",
    ),
    (
        "paintbench@1",
        "paintbench:PaintBenchProtocol",
        "PaintBench DeltaE76 IoU over thresholds 0..10, macro over tasks then categories",
    ),
):
    PROTOCOLS.register(_spec, f"medibench.protocols.{_target}", help=_help)

#: The version a bare name resolves to.
LATEST = {
    "native": "native@1",
    "medebench": "medebench@1",
    "miedb": "miedb@1",
    "medgen": "medgen@code",
    "paintbench": "paintbench@1",
}


def load_protocol(spec: str) -> ScoringProtocol:
    """The protocol named ``"name@version"``, or the latest version of ``"name"``."""
    return PROTOCOLS.create(LATEST.get(spec, spec))
