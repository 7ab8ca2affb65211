"""MedGEN-Bench's image-editing tasks: their perspectives and the names the official
``eval.py`` accepts for them (docs/protocols.md)."""

from __future__ import annotations

from medibench.samples import Perspective

__all__ = ["PERSPECTIVES", "is_editing_task", "normalize_task"]

#: The perspective of each MedGEN editing task.
PERSPECTIVES: dict[str, Perspective] = {
    "style-transfer": Perspective.transformation,
    "artifact-removal": Perspective.transformation,
    "noise-reconstruction": Perspective.transformation,
    "resolution-editing": Perspective.transformation,
    "contrast-enhancement": Perspective.transformation,
    "anatomical-annotation": Perspective.perception,
    "instruction-editing": Perspective.modification,
    "organic-removal": Perspective.modification,
    "organic-reconstruction": Perspective.modification,
}

# Tasks of the other two formats: an edit.jsonl record carrying one is not an editing sample.
_NON_EDITING_TASKS = frozenset(
    {
        "multiple-choice",
        "blank-filling",
        "report-generation",
        "question-answering",
        "disease-prediction",
        "3d-to-2d-projection",
        "2d-to-3d-reconstruction",
    }
)
# Historical task names the official eval.py maps to the canonical ones.
_ALIASES = {
    "multi-choice": "multiple-choice",
    "question-answer": "question-answering",
    "resolution-edit": "resolution-editing",
    "instruction-edit": "instruction-editing",
    "dye-transfer": "style-transfer",
    "3d-2d-projection": "3d-to-2d-projection",
    "2d-3d-reconstruction": "2d-to-3d-reconstruction",
    "organ-removal": "organic-removal",
    "organ-reconstruction": "organic-reconstruction",
}
# Generic mission names old exports stored in paper_task, with the real task in sub-category.
_GENERIC_TASKS = frozenset(
    {"image-edit", "image-editing", "multimodal-generation", "generate", "generation"}
)


def normalize_task(paper_task: object, sub_category: object = None) -> str:
    """The canonical task name: lower case, ``_`` as ``-``, official aliases resolved; a generic
    name such as ``image-edit`` is replaced by ``sub_category`` when there is one."""
    task = _canonical(paper_task)
    if sub_category and (not task or task in _GENERIC_TASKS):
        return _canonical(sub_category)
    return task or _canonical(sub_category)


def is_editing_task(task: str) -> bool:
    """Whether a canonical task name is not one of the VQA or generation formats' tasks."""
    return task not in _NON_EDITING_TASKS


def _canonical(value: object) -> str:
    name = str(value or "").strip().lower().replace("_", "-")
    return _ALIASES.get(name, name)
