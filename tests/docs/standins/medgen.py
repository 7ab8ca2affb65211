"""MedGEN-Bench (README "MedGEN-Bench: VQA and contextual multimodal generation",
docs/medgen.md): the prepared inference folder ``MedGEN_data/`` (``vqa.jsonl``, ``gen.jsonl``
and their images, from the benchmark tests' builders), a tiny random-weight Qwen3-VL at
``/weights/qwen3-vl-8b`` (the conformance family builder), for docs/medgen.md's unified model
the conformance tests' tiny Janus-Pro at ``/weights/janus-pro-7b`` and, for docs/medgen.md's
image-instruction similarity, the prompt-tuning tests' tiny random-weight CLIP (with its
tokenizer) at ``/weights/clip-vit-base-patch16``. README.md gets the Parquet release
(``MedGEN-Bench/parquet/...``) from its download block (block 3), or in a chain without it from
:func:`tests.docs.standins.hub.block_3_output`; the paid APIs and the judge
endpoint are the fake OpenAI-compatible server of :mod:`tests.docs.standins.apis`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.docs.standins import ALL, weights

_SHORT = "8 answer tokens instead of 512 (the tiny model's answers are noise; same code, less time)"
_JANUS_SOURCES = ("tests.conformance._common", "tests.conformance._templates",
                  "tests.conformance._tokenizer")  # fmt: skip

SUBSTITUTIONS = {
    ("README.md", "--model transformers-vlm:/weights/qwen3-vl-8b --out runs/vqa"): (
        "--model transformers-vlm:/weights/qwen3-vl-8b --model-option max_new_tokens=8 "
        "--out runs/vqa",
        _SHORT,
    ),
    ("docs/medgen.md", "--model transformers-vlm:/weights/qwen3-vl-8b \\"): (
        "--model transformers-vlm:/weights/qwen3-vl-8b --model-option max_new_tokens=8 \\",
        _SHORT,
    ),
    ("docs/medgen.md", "--model unified:/weights/janus-pro-7b --out runs/medgen-janus"): (
        "--model unified:/weights/janus-pro-7b --model-option max_new_tokens=8 "
        "--out runs/medgen-janus",
        _SHORT,
    ),
}


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    if file == "docs/medgen.md" or (file == "README.md" and 13 in blocks):
        build_data(work / "MedGEN_data")
        # weights.standins sets $DOCS_WEIGHTS; this module is entered before it (by name)
        with weights.standins(file, work, env, cache):
            from tests.conformance._families import build_qwen3_vl

            weights.tiny(env, "qwen3-vl-8b", build_qwen3_vl)
            if file == "docs/medgen.md":
                from tests.conformance._unified import build_janus

                weights.tiny(env, "janus-pro-7b", build_janus, sources=_JANUS_SOURCES)
                weights.tiny(env, "clip-vit-base-patch16", build_tiny_clip,
                             sources=("medibench.prompt_tuning._tiny",))  # fmt: skip
    yield


def build_tiny_clip(path: Path) -> None:
    from medibench.prompt_tuning._tiny import save_tiny_backbone

    save_tiny_backbone(path, "clip")


def check(file: str, blocks: frozenset[int], work: Path) -> None:
    """docs/medgen.md: the unified model's run answers the 2 VQA records with text and the 2
    generation records with text and an image; the similarity block pairs every sample of the
    three formats (2 VQA, 2 generation) with 10 partners, none its own, and the rows of both
    runs."""
    if file != "docs/medgen.md":
        return
    import csv

    from medibench.runs import RunStore
    from medibench.runs._answers import read_answers

    with RunStore(work / "runs" / "medgen-janus") as store:
        rows = {sid: row for (_, sid, _), row in read_answers(store).items()}
    assert len(rows) == 4 and all(row["text"] for row in rows.values())
    made = sorted(sid for sid, row in rows.items() if row["image_path"])
    assert made == sorted(sid for sid in rows if "MultimodalGeneration" in sid) and len(made) == 2

    result = json.loads((work / "similarity.json").read_text())
    overall = result["rows"][0]
    assert (overall["field"], overall["group"], overall["n"]) == ("all", "all", 4)
    assert overall["matched_ci_low"] <= overall["matched"] <= overall["matched_ci_high"]
    for sample in result["samples"]:
        assert len(sample["partners"]) == 10 and sample["sample_id"] not in sample["partners"]
    assert result["settings"]["extractor"]["model"] == "CLIPModel"
    rows = list(csv.DictReader((work / "within-format.csv").open()))
    groups = [(r["field"], r["group"]) for r in rows]
    assert ("metadata.format", "VQA") in groups and ("task", "disease-prediction") in groups


def build_data(root: Path) -> Path:
    """``root`` as the official preparation writes it for inference: the VQA records (2 with an
    answer, one without, skipped) and 2 generation records of two modalities (CT, MRI), so that
    the ``unrelated`` control has a donor for each."""
    from tests.benchmarks.medgen.answer_data import build_folder, pixels, png_bytes

    build_folder(root)
    (root / "images" / "g2.png").write_bytes(png_bytes(pixels(11)))
    (root / "images" / "g2_gt.png").write_bytes(png_bytes(pixels(12)))
    second = {
        "sample_id": "medgen:MultimodalGeneration:disease-prediction:2",
        "category": "MMGeneration",
        "paper_task": "disease-prediction",
        "instruction": "Predict the scan after treatment and describe it.",
        "input_image": "images/g2.png",
        "ground_truth_image": "images/g2_gt.png",
        "answer": "The lesion shrinks.",
        "modality": "MRI",
    }
    with (root / "gen.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(second) + "\n")
    return root
