"""Protocols bind a benchmark to its metric settings; each has a name and a version.

``load_protocol("native@1")`` (or ``"native"`` for the latest version) returns a
:class:`ScoringProtocol`. The name and version go into every score record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from medibench._benchmark import declared_entries, registry_from_benchmarks
from medibench.io import AlphaPolicy
from medibench.protocols._base import (
    MEDIBENCH_SSIM,
    NOT_JUDGED,
    PSNR_CAP_DB,
    SKIMAGE_DEFAULT_SSIM,
    Aggregation,
    CorrectedReading,
    KReduction,
    PaperReading,
    ProtocolDefaults,
    ProtocolResult,
    ScoringProtocol,
    with_defaults,
)
from medibench.protocols._prepare import (
    ResizeMethod,
    as_rgb,
    read_pil_images,
    read_pil_rgb,
    read_rgba,
    resize_noted,
)
from medibench.registry import Registry

if TYPE_CHECKING:
    from medibench._benchmark import Benchmark

__all__ = [
    "MEDIBENCH_SSIM",
    "NOT_JUDGED",
    "PSNR_CAP_DB",
    "SKIMAGE_DEFAULT_SSIM",
    "PROTOCOLS",
    "Aggregation",
    "AlphaPolicy",
    "CorrectedReading",
    "KReduction",
    "PaperReading",
    "ProtocolDefaults",
    "ProtocolResult",
    "ResizeMethod",
    "ScoringProtocol",
    "as_rgb",
    "latest",
    "load_protocol",
    "read_pil_images",
    "read_pil_rgb",
    "read_rgba",
    "resize_noted",
    "with_defaults",
]


def _declared(bench: Benchmark) -> Iterator[tuple[str, Callable[[], ScoringProtocol], str]]:
    """A benchmark's scoring protocols as registry entries; notes which spec each bare name
    resolves to (its ``latest``, by default the last one listed under that name)."""
    for obj, factory in declared_entries(bench.protocols):
        spec = f"{obj.name}@{obj.version}"
        _LATEST.setdefault(bench.name, {})[obj.name] = bench.latest.get(obj.name, spec)
        yield spec, factory, obj.description


_LATEST: dict[str, dict[str, str]] = {}

#: Every scoring protocol, ``name@version``; filled from the benchmarks on first use.
PROTOCOLS: Registry[ScoringProtocol] = registry_from_benchmarks("protocol", _declared)


def latest(name: str) -> str:
    """The ``name@version`` a bare protocol name resolves to (``"miedb"`` -> ``"miedb@1"``);
    a spec that already has a version is returned as it is."""
    if "@" in name:
        return name
    PROTOCOLS.names()  # fills _LATEST
    for by_name in _LATEST.values():
        if name in by_name:
            return by_name[name]
    return name


def load_protocol(spec: str) -> ScoringProtocol:
    """The protocol named ``"name@version"``, or the latest version of ``"name"``."""
    return PROTOCOLS.create(latest(spec))
