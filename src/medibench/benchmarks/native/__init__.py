"""The native format: a folder with ``samples.jsonl`` and its images (docs/datasets.md)."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="native",
    load="medibench.datasets.native:read_native_path",
    detect="medibench.datasets.native:detect",
    layout="native samples.jsonl",
    protocols=["medibench.benchmarks.native.protocols:NativeProtocol"],
    default_protocols=["native@1"],
    help="a folder with samples.jsonl: native:/path/to/folder",
)
