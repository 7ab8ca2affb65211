"""MedGEN-Bench's image-editing records as samples (the rules are in
:mod:`medibench.benchmarks.medgen.dataset`); the field readers serve the answering formats'
records too (:mod:`.records`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from medibench.benchmarks.medgen.tasks import PERSPECTIVES, is_editing_task, normalize_task
from medibench.samples import Perspective, Sample

_EDIT_CATEGORIES = frozenset({"imageedit", "imageediting"})
_UNSAFE = re.compile(r'[/\\:*?"<>|\s]')


def _to_sample(record: dict, where: str, root: Path, problems: list[str]) -> Sample | None:
    raw_id = record.get("sample_id")
    who = f"{where} (sample '{raw_id}')" if raw_id else where
    category = record.get("category")
    if category is not None and str(category).replace(" ", "").lower() not in _EDIT_CATEGORIES:
        problems.append(f"{who}: category {category!r} is not ImageEdit; skipped")
        return None
    missing = [f for f in ("sample_id", "instruction") if not _text(record.get(f))]
    task = normalize_task(record.get("paper_task"), record.get("sub-category"))
    if not task:
        missing.append("paper_task")
    inputs = _images(record, "input_image", "input_images")
    targets = _images(record, "ground_truth_image", "ground_truth_images")
    if not inputs:
        missing.append("input_image")
    if not targets:
        missing.append("ground_truth_image")
    if missing:
        problems.append(f"{who}: missing or empty field(s) {', '.join(missing)}; skipped")
        return None
    if not is_editing_task(task):
        problems.append(f"{who}: task '{task}' is not an image-editing task; skipped")
        return None
    paths = _resolve_fields(
        root, {"input_image": inputs, "ground_truth_image": targets}, who, problems
    )
    if paths is None:
        return None
    metadata: dict[str, Any] = {
        "medgen_sample_id": str(raw_id),
        "format": "ImageEditing",
        "paper_task": record.get("paper_task"),
        "subtask": record.get("paper_subtask") or "",
    }
    perspective = PERSPECTIVES.get(task)
    if perspective is None:
        perspective = Perspective.modification
        metadata["unknown_task"] = True
        problems.append(
            f"{who}: unknown task '{task}' (known: {', '.join(PERSPECTIVES)}); kept as a "
            "modification sample"
        )
    for key in ("answer", "choice", "paper_format", "sub-category", "control"):
        if record.get(key) not in (None, "", []):
            metadata[key] = record[key]
    if len(paths["input_image"]) > 1:
        metadata["extra_input_images"] = paths["input_image"][1:]
    if len(paths["ground_truth_image"]) > 1:
        metadata["extra_ground_truth_images"] = paths["ground_truth_image"][1:]
    return Sample(
        sample_id=_UNSAFE.sub("-", str(raw_id)).strip(".") or "-",
        benchmark="medgen",
        input=paths["input_image"][0],
        instruction=str(record["instruction"]).strip(),
        target=paths["ground_truth_image"][0],
        task=task,
        modality=_text(record.get("modality")),
        perspective=perspective,
        description=_answer_text(record.get("answer")),
        source={"benchmark": "MedGEN-Bench", "record": where, "id": str(raw_id)},
        metadata=metadata,
    )


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _images(record: dict, singular: str, plural: str) -> list[str]:
    """The image paths of a record: the singular field first (string or list), else the plural."""
    for field in (singular, plural):
        value = record.get(field)
        if isinstance(value, str) and value.strip():
            return [value.strip()]
        if isinstance(value, list) and value:
            return [str(v) for v in value]
    return []


def _resolve_fields(
    root: Path, refs: dict[str, list[str]], who: str, problems: list[str]
) -> dict[str, list[str]] | None:
    """Each field's image references as absolute paths (:func:`_resolve`), or ``None`` with the
    problem of the first one that does not resolve appended to ``problems`` (the record is
    skipped)."""
    paths: dict[str, list[str]] = {}
    for field, field_refs in refs.items():
        paths[field] = []
        for ref in field_refs:
            path, problem = _resolve(root, ref)
            if problem:
                problems.append(f"{who}: {field} '{ref}' {problem}; skipped")
                return None
            paths[field].append(path)
    return paths


def _resolve(root: Path, ref: str) -> tuple[str, str | None]:
    """The absolute path of ``ref`` inside ``root``, or a problem. Symbolic links are followed:
    the official preparation links ``source/`` to the raw dataset outside the folder."""
    if not ref.strip():
        return "", "is empty"
    if Path(ref).is_absolute():  # the record's own statement, read as the code reads it
        path = Path(os.path.normpath(ref))
        return (str(path), None) if path.is_file() else ("", "does not exist")
    if ref.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", ref):
        return "", "is absolute on another system (image paths are relative to the folder)"
    lexical = Path(os.path.normpath(root / ref))
    if lexical != root and root not in lexical.parents:
        return "", f"leaves the dataset folder {root} (via '..')"
    if not lexical.is_file():
        return "", "does not exist"
    return str(lexical), None


def _answer_text(answer: object) -> str | None:
    if isinstance(answer, str):
        return answer.strip() or None
    if isinstance(answer, dict) and answer:
        return "\n".join(f"{key}: {value}" for key, value in answer.items())
    return None
