"""PaintBench (arXiv 2606.00188): its generated tree, scored as its evaluator does."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="paintbench",
    load="medibench.benchmarks.paintbench.dataset:read_paintbench",
    detect="medibench.benchmarks.paintbench.dataset:detect",
    layout="PaintBench <task>/NNN_input.png",
    protocols=["medibench.benchmarks.paintbench.protocols:PaintBenchProtocol"],
    default_protocols=["paintbench@1"],
    help="PaintBench layout (<task>/NNN_input.png, NNN_answer.png, NNN.json): paintbench:/path",
)
