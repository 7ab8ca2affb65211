"""MedGEN-Bench's VQA and contextual multimodal generation records as samples.

A VQA record (``category`` ``VQA``: multiple choice, blank filling, question answering, report
generation) asks for text; a generation record (``MMGeneration``: disease prediction, 3D-to-2D
projection, 2D-to-3D reconstruction) for text and an image. Both come from ``vqa.jsonl`` /
``gen.jsonl`` of the prepared folder (the official ``prepare_medgen_data.py`` view, or the
Table IV view of ``prepare_medgen_tableiv.py``, whose ``input_images`` lists every image and
whose ``input_image`` may be its contact sheet) or from the Parquet release's ``vqa`` and
``multimodal_generation`` configs.

A sample's fields:

* ``input``: the first input image; ``metadata["input_images"]``: every input image, in order
  (multi-image VQA). A model that takes one image gets the official labelled contact sheet of
  them (:func:`medibench.models.vlm.contact_sheet`); a record whose ``input_image`` already is
  the Table IV contact sheet keeps it as ``metadata["contact_sheet"]``.
* ``metadata["expected"]``: what the answer is checked against: ``{"text": str | None,
  "sections": {header: text} | None, "images": [paths], "raw": the record's answer as
  stored}`` (``raw`` is what ``medgen@code`` compares, as the code does; an integer answer's
  text is its ``str()``). A sectioned answer (a JSON object,
  or a string that is one) keeps its headers as given; headers outside
  :data:`~medibench.metrics.text.REPORT_SECTIONS` are kept, listed in
  ``metadata["unknown_sections"]`` and named in ``problems``. ``description`` is the reference
  text as the code serialises it (:func:`~medibench.metrics.text.report_text`).
* ``metadata["choices"]``: the options of a multiple-choice record (``choice``).
* ``metadata["format"]`` (``VQA`` / ``MultimodalGeneration``), ``metadata["subtask"]``,
  ``task``, ``modality``; ``target``: the ground-truth image of a generation record.
* ``perspective``: the editing perspectives do not describe these formats; VQA samples carry
  ``perception`` and generation samples ``transformation`` so the record type holds them
  (``metadata["format"]`` is the field to group by).

Problems (the record is skipped, the rest loads): no ``sample_id`` / ``instruction`` / task /
input image; an image that is missing or outside the folder; **a record with neither an
``answer`` field nor a ground-truth image** ("has neither an answer nor a ground-truth
image"). A record whose ``answer`` is empty loads (the code scores against ``""``) and is named
in ``problems``. An absolute image path loads as the code loads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medibench.benchmarks.medgen._edit_samples import _UNSAFE, _images, _resolve_fields, _text
from medibench.benchmarks.medgen.tasks import normalize_task
from medibench.metrics.text import REPORT_SECTIONS, report_text
from medibench.samples import Perspective, Sample

__all__ = [
    "ANSWER_FORMATS",
    "GENERATION_TASKS",
    "VQA_TASKS",
    "answer_format",
    "answer_sample",
    "expected_sections",
]

#: The categories of the two answering formats -> their ``paper_format``.
ANSWER_FORMATS = {
    "vqa": "VQA",
    "mmgeneration": "MultimodalGeneration",
    "multimodalgeneration": "MultimodalGeneration",
}
VQA_TASKS = ("multiple-choice", "blank-filling", "question-answering", "report-generation")
GENERATION_TASKS = ("disease-prediction", "3d-to-2d-projection", "2d-to-3d-reconstruction")
_PERSPECTIVE = {"VQA": Perspective.perception, "MultimodalGeneration": Perspective.transformation}


def answer_format(record: Mapping[str, Any]) -> str | None:
    """``VQA`` or ``MultimodalGeneration`` for a record of those formats (its ``paper_format``
    or ``category``), else ``None``."""
    for key in ("paper_format", "category"):
        value = str(record.get(key) or "").replace(" ", "").replace("_", "").lower()
        if value in ANSWER_FORMATS:
            return ANSWER_FORMATS[value]
    return None


def expected_sections(answer: object) -> dict[str, Any] | None:
    """The report sections of an answer: a JSON object, or a string holding one; else ``None``."""
    if isinstance(answer, Mapping):
        return dict(answer) or None
    if isinstance(answer, str) and answer.strip().startswith("{"):
        try:
            parsed = json.loads(answer)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) and parsed else None
    return None


def answer_sample(
    record: Mapping[str, Any], where: str, root: Path, problems: list[str]
) -> Sample | None:
    """The sample of a VQA or generation record (module docstring), or ``None`` with the
    problem added. Image paths are relative to ``root``."""
    raw_id = record.get("sample_id")
    who = f"{where} (sample '{raw_id}')" if raw_id else where
    fmt = answer_format(record)
    if fmt is None:
        problems.append(f"{who}: category {record.get('category')!r} is not VQA or MMGeneration")
        return None
    task = normalize_task(record.get("paper_task"), record.get("sub-category"))
    missing = [f for f in ("sample_id", "instruction") if not _text(record.get(f))]
    missing += [] if task else ["paper_task"]
    plural = _images(dict(record), "input_images", "input_image")
    singular = _images(dict(record), "input_image", "input_images")
    if not plural:
        missing.append("input_image")
    if missing:
        problems.append(f"{who}: missing or empty field(s) {', '.join(missing)}; skipped")
        return None
    wanted = {
        "input_images": plural,
        "input_image": singular,
        "ground_truth_image": _images(dict(record), "ground_truth_image", "ground_truth_images"),
    }
    resolved = _resolve_fields(root, wanted, who, problems)
    if resolved is None:
        return None
    answer = record.get("answer")
    sections = expected_sections(answer)
    text = report_text(sections) if sections else _answer_string(answer) or None
    targets = resolved["ground_truth_image"]
    if "answer" not in record and not targets:
        problems.append(
            f"{who}: the record has neither an answer nor a ground-truth image; skipped"
        )
        return None
    if not text and not targets:
        problems.append(f"{who}: the answer is empty; kept (medgen@code scores against '')")
    metadata: dict[str, Any] = {
        "medgen_sample_id": str(raw_id),
        "format": fmt,
        "paper_task": record.get("paper_task"),
        "subtask": _text(record.get("paper_subtask") or record.get("subtask")),
        "input_images": resolved["input_images"],
        "expected": {"text": text, "sections": sections, "images": targets, "raw": answer},
    }
    sheet = resolved["input_image"][:1]
    if len(resolved["input_images"]) > 1 and sheet and sheet[0] not in resolved["input_images"]:
        metadata["contact_sheet"] = sheet[0]  # the Table IV view's labelled sheet
    if sections:
        unknown = [str(k) for k in sections if str(k).upper() not in REPORT_SECTIONS]
        if unknown:
            metadata["unknown_sections"] = unknown
            problems.append(
                f"{who}: report section header(s) {', '.join(unknown)} are not among the known "
                f"ones ({', '.join(REPORT_SECTIONS)}); kept"
            )
    if isinstance(record.get("control"), dict):  # a pairing-sensitivity control set's record
        metadata["control"] = record["control"]
    choices = record.get("choice") or record.get("choices")
    if isinstance(choices, list) and choices:
        metadata["choices"] = [str(c) for c in choices]
    elif task == "multiple-choice":
        problems.append(f"{who}: a multiple-choice record without choices; letters are compared")
    return Sample(
        sample_id=_UNSAFE.sub("-", str(raw_id)).strip(".") or "-",
        benchmark="medgen",
        input=resolved["input_images"][0],
        instruction=str(record["instruction"]).strip(),
        target=targets[0] if targets else None,
        task=task,
        modality=_text(record.get("modality")),
        perspective=_PERSPECTIVE[fmt],
        description=text,
        source={"benchmark": "MedGEN-Bench", "record": where, "id": str(raw_id)},
        metadata=metadata,
    )


def _answer_string(answer: object) -> str:
    """An answer's text: a string trimmed, a number's ``str()`` (the code's integer answers)."""
    if isinstance(answer, bool):
        return ""
    if isinstance(answer, int | float):
        return str(answer)
    return _text(answer)
