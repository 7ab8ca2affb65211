"""The native format: a folder with ``samples.jsonl`` and its images (docs/datasets.md), or an
``hf-parquet`` export of any dataset (``medibench export-dataset``, docs/sources.md)."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="native",
    help="a folder with samples.jsonl, or an hf-parquet export: native:/path/to/folder",
    load="medibench.benchmarks.native.hf:read",
    detect="medibench.benchmarks.native.hf:detect",
    layout="native samples.jsonl or hf-parquet data/*.parquet",
    protocols=["medibench.benchmarks.native.protocols:NativeProtocol"],
)
