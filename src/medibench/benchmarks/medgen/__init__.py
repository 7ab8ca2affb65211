"""MedGEN-Bench (arXiv 2511.13135): the image-editing tier as its evaluation code computes it."""

from medibench.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="medgen",
    load="medibench.datasets.medgen:read_medgen",
    detect="medibench.datasets.medgen:detect",
    layout="MedGEN edit.jsonl",
    protocols=["medibench.protocols.medgen:MedGenCodeProtocol"],
    default_protocols=["medgen@code"],
    default_judge="medgen-checklist@1",
    help="MedGEN-Bench (edit.jsonl, vqa.jsonl, gen.jsonl and images): medgen:/path",
)
