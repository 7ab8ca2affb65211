"""Benchmarks: one package each, registered by one :class:`Benchmark` object.

``BENCHMARKS`` holds the built-in ones (``native``, ``medebench``, ``miedb``, ``medgen``,
``paintbench``, ``suite``, ``starter``) and those that installed packages add through the
``medibench.benchmarks`` entry-point group. The dataset, protocol and judge registries are
filled from it. See docs/benchmarks.md to write one.
"""

from __future__ import annotations

from medibench._benchmark import (
    BENCHMARKS,
    BUILTIN,
    ENTRY_POINT_GROUP,
    Benchmark,
    BenchmarkRegistry,
)

__all__ = ["BENCHMARKS", "BUILTIN", "ENTRY_POINT_GROUP", "Benchmark", "BenchmarkRegistry"]
