"""The built-in procedural suite (docs/suite.md), read as a native dataset."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="suite",
    load="medibench.synth.suite:load_suite",
    default_protocols=["native@1"],
    help="the built-in procedural suite (medibench-suite@1), generated on first use: "
    "suite[:/folder | :<frozen name>]",
)
