"""MedEBench (arXiv 2506.01921): the GitHub ``editing/`` tree, CP by the paper and corrected."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="medebench",
    load="medibench.datasets.medebench:read_medebench",
    detect="medibench.datasets.medebench:detect",
    layout="MedEBench editing/editing_metadata.json",
    protocols=[
        "medibench.protocols.medebench:MedEBenchPaperProtocol",
        "medibench.protocols.medebench:MedEBenchProtocol",
    ],
    default_protocols=["medebench@paper", "medebench@1"],
    default_judge="medebench-judge@paper-structure",
    help="MedEBench (repo root or its editing/ folder): medebench:/path",
)
