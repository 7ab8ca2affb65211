"""MieDB-100k (arXiv 2602.09587): the ``dataBenchmark/`` split, scored as its scripts do and
corrected."""

from medibench.benchmarks import Benchmark
from medibench.sources import HubSource

BENCHMARK = Benchmark(
    name="miedb",
    load="medibench.benchmarks.miedb.dataset:read_miedb",
    detect="medibench.benchmarks.miedb.dataset:detect",
    write="medibench.benchmarks.miedb._export:write_miedb",
    layout="MieDB dataBenchmark/metadata.json",
    protocols=[
        "medibench.benchmarks.miedb.protocols:MieDBPaperProtocol",
        "medibench.benchmarks.miedb.protocols:MieDBProtocol",
    ],
    default_protocols=["miedb@paper", "miedb@1"],
    judges=["medibench.benchmarks.miedb.judges:rubric"],
    default_judge="miedb-rubric@1",
    help="MieDB-100k benchmark split (dataBenchmark_00.tar, or dataBenchmark/ with "
    "metadata.json): miedb:/path",
    # Unpinned: the official dataset_download.py fetches the tar from `main`; `medibench
    # download` warns and records the commit it resolved to in medibench-source.json.
    hub=HubSource(
        repo_id="Laiyf/MieDB-100k",
        revision="main",
        allow_patterns=("dataBenchmark_00.tar",),
        dataset="dataBenchmark_00.tar",
    ),
)
