"""Registering a Benchmark in this process makes it known to every registry, even those that
were filled before; removing it takes it out again."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from medibench.benchmarks import BENCHMARKS, Benchmark
from medibench.datasets import DATASETS, Dataset, load_dataset
from medibench.protocols import PROTOCOLS, Aggregation, ProtocolResult, load_protocol
from medibench.registry import UnknownNameError


@dataclass(frozen=True)
class InProcessProtocol:
    name: str = "inproc"
    version: str = "2"
    description: str = "a protocol registered in-process"
    metric_names: tuple[str, ...] = ("zero",)
    judged_metrics: tuple[str, ...] = ()
    aggregation: Aggregation = Aggregation()

    def score(self, sample, images, prediction) -> ProtocolResult:
        return ProtocolResult(metrics={"zero": 0.0})


def _load(path: str = "") -> Dataset:
    from pathlib import Path

    return Dataset("inproc", Path(path or "."), [])


def test_registering_in_process_reaches_registries_filled_before():
    assert "native@1" in PROTOCOLS.names() and "native" in DATASETS.names()  # filled now
    bench = Benchmark(
        name="inproc",
        load=_load,
        protocols=[InProcessProtocol],
        default_protocols=["inproc@2"],
        help="in-process test benchmark",
    )
    BENCHMARKS.register(bench)
    try:
        assert "inproc" in DATASETS.names() and DATASETS.help("inproc") == bench.help
        assert load_protocol("inproc") == InProcessProtocol()  # the bare name: the latest
        assert load_dataset("inproc:/tmp").default_protocols == ("inproc@2",)
        assert "native@1" in PROTOCOLS.names()  # the built-ins are still there
        with pytest.raises(ValueError, match="already registered"):
            BENCHMARKS.register(bench)
    finally:
        BENCHMARKS.unregister("inproc")
    assert "inproc" not in DATASETS.names() and "inproc@2" not in PROTOCOLS.names()
    with pytest.raises(UnknownNameError, match="unknown dataset kind 'inproc'"):
        BENCHMARKS.get("inproc")


def test_a_benchmark_name_must_be_usable_as_a_dataset_kind():
    with pytest.raises(ValueError, match="letters, digits"):
        Benchmark(name="two words", load=_load)


@dataclass(frozen=True)
class _Corrected(InProcessProtocol):
    version: str = "3"


def test_default_protocols_left_empty_are_every_declared_protocol():
    bench = Benchmark(name="inproc2", load=_load, protocols=[InProcessProtocol, _Corrected()])
    assert bench.default_specs() == ("inproc@2", "inproc@3")
    chosen = Benchmark(name="inproc3", load=_load, protocols=[InProcessProtocol, _Corrected()],
                       default_protocols=["inproc@3"])  # fmt: skip
    assert chosen.default_specs() == ("inproc@3",)
    # The built-ins that leave it empty get their one protocol, as their datasets say.
    assert BENCHMARKS.get("native").default_specs() == ("native@1",)
    assert BENCHMARKS.get("paintbench").default_specs() == ("paintbench@1",)
    assert BENCHMARKS.get("medgen").default_specs() == ("medgen@code", "medgen@1")
