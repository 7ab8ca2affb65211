"""MedEBench (arXiv 2506.01921): the GitHub ``editing/`` tree, CP by the paper and corrected."""

from medibench.benchmarks import Benchmark
from medibench.sources import HubSource

BENCHMARK = Benchmark(
    name="medebench",
    load="medibench.benchmarks.medebench.dataset:read_medebench",
    detect="medibench.benchmarks.medebench.dataset:detect",
    layout="MedEBench editing/editing_metadata.json",
    protocols=[
        "medibench.benchmarks.medebench.protocols:MedEBenchPaperProtocol",
        "medibench.benchmarks.medebench.protocols:MedEBenchProtocol",
    ],
    default_protocols=["medebench@paper", "medebench@1"],
    judges=[
        "medibench.benchmarks.medebench.judges:paper_structure",
        "medibench.benchmarks.medebench.judges:paper_structure_instruction",
    ],
    default_judge="medebench-judge@paper-structure",
    help="MedEBench (repo root, its editing/ folder, or a Parquet conversion): medebench:/path",
    # Unpinned: no published commit sha was found; `medibench download` warns and records the
    # commit it resolved `main` to in medibench-source.json.
    hub=HubSource(repo_id="LIUMinghao/MedEBench", revision="main"),
)
