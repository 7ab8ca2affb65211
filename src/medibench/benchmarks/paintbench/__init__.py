"""PaintBench (arXiv 2606.00188): its tree or Hub Parquet, scored as its evaluator does."""

from medibench.benchmarks import Benchmark
from medibench.sources import HubSource

BENCHMARK = Benchmark(
    name="paintbench",
    help="PaintBench tree (<task>/NNN_input.png, NNN_answer.png, NNN.json) or its Hub Parquet "
    "snapshot (<config>/<split>-*.parquet): paintbench:/path",
    load="medibench.benchmarks.paintbench.dataset:read_paintbench",
    detect="medibench.benchmarks.paintbench.dataset:detect",
    layout="PaintBench <task>/NNN_input.png",
    protocols=["medibench.benchmarks.paintbench.protocols:PaintBenchProtocol"],
    # --by-bins: edit-region size, object count, background complexity, colour scheme
    properties="medibench.benchmarks.paintbench.factors:PROPERTIES",
    # Unpinned: no published commit sha was found; `medibench download` warns and records the
    # commit it resolved `main` to in medibench-source.json.
    hub=HubSource(repo_id="PaintBench/PaintBench", revision="main"),
)
