"""MieDB-100k (arXiv 2602.09587): the ``dataBenchmark/`` split, scored as its scripts do and
corrected."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="miedb",
    load="medibench.datasets.miedb:read_miedb",
    detect="medibench.datasets.miedb:detect",
    layout="MieDB dataBenchmark/metadata.json",
    protocols=[
        "medibench.protocols.miedb:MieDBPaperProtocol",
        "medibench.protocols.miedb:MieDBProtocol",
    ],
    default_protocols=["miedb@paper", "miedb@1"],
    default_judge="miedb-rubric@1",
    help="MieDB-100k benchmark split (dataBenchmark/ with metadata.json): miedb:/path",
)
