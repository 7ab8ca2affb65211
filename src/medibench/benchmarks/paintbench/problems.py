"""A PaintBench problem as a :class:`~medibench.samples.Sample`: PaintBench's task table and the
metadata rules that the folder reader (:mod:`medibench.benchmarks.paintbench.dataset`) and the
Parquet reader (:mod:`medibench.benchmarks.paintbench.parquet`) share, so that both give the same
samples for the same problems."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench.samples import Perspective, Sample

__all__ = [
    "CATEGORIES",
    "DIAGNOSTIC_TASK",
    "NO_MODE",
    "TASK_CATEGORIES",
    "label_modes",
    "make_sample",
]

#: PaintBench's task -> category table (generate_benchmark.py); TinyGrafixBench's categories are
#: its chart types.
TASK_CATEGORIES: dict[str, str] = {
    **dict.fromkeys(
        ("translation", "rotation", "reflection", "scaling", "shearing"),
        "geometric_transformation",
    ),
    **dict.fromkeys(
        ("construction", "removal", "copying", "border", "cropping"), "structural_manipulation"
    ),
    **dict.fromkeys(
        ("recolor", "flood_fill", "blending", "gradient", "point_operations"), "color_change"
    ),
    **dict.fromkeys(
        ("comparison", "ordering", "pattern", "counting", "legend"), "symbolic_reasoning"
    ),
}
_CHARTS = ("bar_chart", "heatmap", "line_chart", "network", "scatter_plot")
#: Every category a PaintBench or TinyGrafixBench problem can carry.
CATEGORIES = frozenset(TASK_CATEGORIES.values()) | frozenset(_CHARTS) | {"diagnostic"}
#: PaintBench's diagnostic task (answer = input): scored, reported outside every category.
DIAGNOSTIC_TASK = "preservation"
#: The mode of a task that has one (generate_benchmark.py's ``_NO_MODE_LABEL``).
NO_MODE = "default"


def make_sample(
    task: str,
    num: str,
    meta: dict[str, Any],
    *,
    fallback: dict[str, Any],
    input: str,
    target: str,
    where: tuple[str, str],
    problems: list[str],
    split: str = "test",
) -> Sample | None:
    """The sample of problem ``num`` of ``task`` from its metadata (``NNN.json``'s object, or a
    Parquet row's ``metadata``), or ``None`` (reported) when it cannot be one.

    ``fallback`` supplies an instruction or category ``meta`` lacks; ``where`` names the
    metadata and the task in messages. A ``mode`` of ``null`` (or ``""``) is
    :data:`NO_MODE`, as the generator means it: older versions wrote a single-mode task's mode
    as JSON null, newer ones write ``"default"`` (generate_benchmark.py's ``_NO_MODE_LABEL``,
    ``mode or "default"``; the seed hash takes ``""`` either way). Shared by the folder and the
    Parquet readers, so both give the same samples for the same problems.
    """
    sid = f"{task}-{num}"
    where_meta, where_task = where
    if "mode" in meta and meta["mode"] in (None, ""):
        meta = {**meta, "mode": NO_MODE}
    bad = [k for k in ("instruction", "category", "mode") if k in meta and not _is_text(meta[k])]
    if bad:
        problems.append(
            f"{where_meta}: field(s) {', '.join(bad)} must be strings; problem '{sid}' skipped"
        )
        return None
    instruction = (meta.get("instruction") or fallback.get("instruction") or "").strip()
    if not instruction:
        problems.append(
            f"{where_task}: problem {num} has no instruction (no {Path(where_meta).name} with "
            "one, no problems.jsonl entry); skipped"
        )
        return None
    category = meta.get("category") or fallback.get("category") or TASK_CATEGORIES.get(task)
    if task == DIAGNOSTIC_TASK:
        category = category or "diagnostic"
    if not category:
        problems.append(
            f"{where_task}: task '{task}' has no category (not in {Path(where_meta).name}, not a "
            "PaintBench task); problem skipped, it cannot enter the category macro average"
        )
        return None
    if category not in CATEGORIES:
        problems.append(
            f"{where_meta}: unknown category '{category}' (PaintBench's: "
            f"{', '.join(sorted(set(TASK_CATEGORIES.values())))}); problem '{sid}' kept"
        )
    metadata = {k: v for k, v in meta.items() if k != "instruction"}
    metadata.update(category=category, task=task, problem_id=int(num))
    return Sample(
        sample_id=sid,
        benchmark="paintbench",
        input=input,
        instruction=instruction,
        target=target,
        split=split,
        task=task,
        perspective=Perspective.modification,
        source={"benchmark": "PaintBench", "problem": f"{task}/{num}"},
        metadata=metadata,
    )


def label_modes(samples: list[Sample]) -> None:
    """Give every problem of a task with more than one mode ``metadata["task_mode"]`` =
    ``"<task>/<mode>"`` (stats.py's mode rows; eval.py labels a problem without a mode
    ``"default"``)."""
    modes: dict[str, set[str]] = {}
    for s in samples:
        modes.setdefault(s.task, set()).add(s.metadata.get("mode") or NO_MODE)
    for s in samples:
        if len(modes[s.task]) > 1:
            s.metadata["task_mode"] = f"{s.task}/{s.metadata.get('mode') or NO_MODE}"


def _is_text(value: object) -> bool:
    return isinstance(value, str)
