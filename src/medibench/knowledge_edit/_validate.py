"""A task set checked completely before anything runs, every problem named at once.

:func:`taskset_problems` reads ``tasks.jsonl`` line by line and collects, rather than stops at,
what is wrong: a line that is not JSON or not an object, a field of the wrong type (a numeric
question, a string where the probes list belongs), an empty question or answer, an unknown kind
or task type, an image path that leaves the folder, is missing or does not decode, an
``edit_id`` used twice, and a ``probe_id`` used twice anywhere in the set (pre-edit answers are
kept per probe id: two probes sharing one would get each other's answers).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from medibench.datasets._base import inside_problem

__all__ = ["image_problem", "request_problems", "set_problems", "typed_problems"]

_REQUEST_TEXT = ("edit_id", "image", "question", "target", "source")
_PROBE_TEXT = ("probe_id", "kind", "task_type", "image", "question", "answer")


def typed_problems(data: Any, where: str) -> list[str]:
    """What in a decoded ``tasks.jsonl`` line has the wrong type (empty: it can be built)."""
    if not isinstance(data, dict):
        return [f"{where}: expected a JSON object (an edit request), got {type(data).__name__}"]
    problems = _fields(data, _REQUEST_TEXT, where)
    if not isinstance(data.get("order"), int) or isinstance(data.get("order"), bool):
        problems.append(f"{where}: 'order' must be an integer, got {data.get('order')!r}")
    probes = data.get("probes")
    if not isinstance(probes, list):
        return [*problems, f"{where}: 'probes' must be a list, got {type(probes).__name__}"]
    for i, probe in enumerate(probes):
        at = f"{where}, probes[{i}]"
        if not isinstance(probe, dict):
            problems.append(f"{at}: expected a JSON object, got {type(probe).__name__}")
            continue
        problems += _fields(probe, _PROBE_TEXT, at)
        if not isinstance(probe.get("metadata", {}), dict):
            problems.append(f"{at}: 'metadata' must be an object")
    if not isinstance(data.get("metadata", {}), dict):
        problems.append(f"{where}: 'metadata' must be an object")
    return problems


def request_problems(request: Any, *, where: str, kinds: tuple[str, ...],
                     task_types: tuple[str, ...]) -> list[str]:  # fmt: skip
    """Every problem of one request that makes it unscorable (in the words of
    :func:`~medibench.knowledge_edit._tasks.validate_request`)."""
    problems = []
    if not request.question.strip():
        problems.append(f"{where}: edit {request.edit_id}: empty question")
    if not request.target.strip():
        problems.append(f"{where}: edit {request.edit_id}: empty gold answer (the edit target)")
    seen: set[str] = set()
    for p in request.probes:
        at = f"{where}: edit {request.edit_id}, probe {p.probe_id}"
        if p.probe_id in seen:
            problems.append(f"{at}: duplicate probe id")
        seen.add(p.probe_id)
        if p.kind not in kinds:
            problems.append(f"{at}: unknown kind {p.kind!r} (valid: {', '.join(kinds)})")
        if p.task_type not in task_types:
            problems.append(f"{at}: unknown task type {p.task_type!r}")
        if not p.question.strip():
            problems.append(f"{at}: empty question")
        if not p.answer.strip():
            problems.append(f"{at}: empty gold answer")
    if not any(p.kind == "reliability" for p in request.probes):
        problems.append(f"{where}: edit {request.edit_id}: no reliability probe")
    return problems


def image_problem(root: Path, relative: str, checked: dict[str, str | None]) -> str | None:
    """Why a task set image cannot be used (outside the folder, missing, undecodable), or
    ``None``; ``checked`` remembers each path's verdict (images are shared by many probes)."""
    if relative not in checked:
        checked[relative] = _image_problem(root, relative)
    return checked[relative]


def set_problems(requests: list[Any], where: str) -> list[str]:
    """Ids used twice across the whole set: edit ids, probe ids."""
    problems = []
    edits = Counter(r.edit_id for r in requests)
    twice = sorted(k for k, n in edits.items() if n > 1)
    if twice:
        problems.append(f"{where}: edit_id(s) used more than once: {', '.join(twice[:10])}")
    owners: dict[str, list[str]] = {}
    for r in requests:
        for p in r.probes:
            owners.setdefault(p.probe_id, [])
            if r.edit_id not in owners[p.probe_id]:
                owners[p.probe_id].append(r.edit_id)
    shared = sorted(k for k, edits_of in owners.items() if len(edits_of) > 1)
    for probe_id in shared[:10]:
        edits_of = ", ".join(owners[probe_id][:5])
        problems.append(f"{where}: probe_id {probe_id!r} is used by probes of edits {edits_of}; "
                        "each probe needs its own id")  # fmt: skip
    if len(shared) > 10:
        problems.append(f"{where}: ... and {len(shared) - 10} more shared probe ids")
    return problems


def _fields(data: dict, names: tuple[str, ...], where: str) -> list[str]:
    return [
        f"{where}: {name!r} must be a string, got "
        + ("nothing" if name not in data else f"{type(data[name]).__name__} {data[name]!r}")
        for name in names
        if not isinstance(data.get(name), str)
    ]


def _image_problem(root: Path, relative: str) -> str | None:
    from medibench.io import ImageReadError, read_image

    problem = inside_problem(root.resolve(), relative)
    if problem is not None:
        return f"image path '{relative}' {problem}"
    path = root / relative
    if not path.is_file():
        return f"image {relative} is missing"
    try:
        read_image(path, mode="rgb")
    except (ImageReadError, OSError, ValueError) as exc:
        return f"image {relative} does not decode ({exc})"
    return None
