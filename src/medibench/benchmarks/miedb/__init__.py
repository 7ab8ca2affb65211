"""MieDB-100k (arXiv 2602.09587): the ``dataBenchmark/`` split, scored as its scripts do and
corrected."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="miedb",
    load="medibench.benchmarks.miedb.dataset:read_miedb",
    detect="medibench.benchmarks.miedb.dataset:detect",
    layout="MieDB dataBenchmark/metadata.json",
    protocols=[
        "medibench.benchmarks.miedb.protocols:MieDBPaperProtocol",
        "medibench.benchmarks.miedb.protocols:MieDBProtocol",
    ],
    default_protocols=["miedb@paper", "miedb@1"],
    judges=["medibench.benchmarks.miedb.judges:rubric"],
    default_judge="miedb-rubric@1",
    help="MieDB-100k benchmark split (dataBenchmark/ with metadata.json): miedb:/path",
)
