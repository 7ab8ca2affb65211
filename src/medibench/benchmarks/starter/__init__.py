"""The built-in starter benchmark, built from data that installed packages ship."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="starter",
    load="medibench.synth.starter:load_starter",
    default_protocols=["native@1"],
    help="the built-in starter benchmark (24 samples), built on first use: starter[:/folder]",
)
