"""MedGEN-Bench (arXiv 2511.13135): its three formats (image editing, VQA, contextual multimodal
generation) scored as its evaluation code scores them; docs/medgen.md."""

from medibench.benchmarks import Benchmark
from medibench.sources import HubSource

BENCHMARK = Benchmark(
    name="medgen",
    help=(
        "MedGEN-Bench (its parquet/ release, or edit.jsonl and images): medgen:/path; "
        "VQA / generation: medgen:/path/vqa.jsonl, medgen:/path/parquet/vqa, ..."
    ),
    load="medibench.benchmarks.medgen.dataset:read_medgen",
    detect="medibench.benchmarks.medgen.dataset:detect",
    layout="MedGEN edit.jsonl or parquet/image_editing/*.parquet",
    protocols=[
        "medibench.benchmarks.medgen.protocols:MedGenCodeProtocol",
        "medibench.benchmarks.medgen.protocols:MedGenProtocol",
    ],
    judges=[
        "medibench.benchmarks.medgen.judges:checklist",
        "medibench.benchmarks.medgen.judges:checklist_nogt",
        "medibench.benchmarks.medgen.judges:checklist_scale5",
        "medibench.benchmarks.medgen.judges:checklist_scale5_nogt",
        "medibench.benchmarks.medgen.answer_judges:code",
        "medibench.benchmarks.medgen.answer_judges:code_nogt",
        "medibench.benchmarks.medgen.answer_judges:paper",
        "medibench.benchmarks.medgen.answer_judges:paper_nogt",
    ],
    default_judge="medgen-checklist@1",
    hub=HubSource(
        repo_id="Jack04810/MedGEN-Bench",
        revision="cee5e7ae410f7c5be12d5fa55464afb094c099b7",
        allow_patterns=("parquet/**",),
        revision_from="MedGEN-Bench-eval download script (MEDGEN_DATASET_REVISION default)",
    ),
)
