"""Edit tasks: edit requests with their probes, validated, written and read as a task set.

A task set is one folder: ``tasks.jsonl`` (one :class:`EditRequest` per line, in the sequential
order of edits), ``images/`` (the images, content-addressed: ``images/<sha[:2]>/<sha><ext>``)
and ``taskset.json`` (format version, sources, counts per task type, the order's seed). Every
path in ``tasks.jsonl`` is relative to the folder, so a task set moves as a whole. A new task
set is built aside and put in place whole (:func:`new_taskset_folder`): a folder that holds files
is never written into, and a task set is replaced only when asked.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from medibench.io import atomic_write_text, json_lines, read_image
from medibench.knowledge_edit._validate import (
    image_problem,
    request_problems,
    set_problems,
    typed_problems,
)
from medibench.sources import store_image_cell

__all__ = [
    "KINDS",
    "TASKSET_VERSION",
    "TASK_TYPES",
    "EditRequest",
    "Probe",
    "ProbeKind",
    "TaskError",
    "TaskSet",
    "TaskType",
    "new_taskset_folder",
    "read_taskset",
    "store_image",
    "write_taskset",
]

TaskType = Literal["T0", "T1", "T2", "T3", "T4", "T5"]
ProbeKind = Literal["reliability", "generality", "locality"]
TASK_TYPES: tuple[str, ...] = get_args(TaskType)
KINDS: tuple[str, ...] = get_args(ProbeKind)
TASKSET_VERSION = "1"

#: What each task type probes (M3Bench's T0-T5), for docs and reports.
TASK_TYPE_NAMES = {
    "T0": "reliability (the edit itself; unrelated questions for locality)",
    "T1": "image variation",
    "T2": "text variation",
    "T3": "modality / protocol shift",
    "T4": "knowledge composition",
    "T5": "temporal progression",
}


class TaskError(ValueError):
    """A row that cannot become an edit task (empty gold answer, missing image, bad field);
    the message names the file, the row and the problem."""


@dataclass(frozen=True)
class Probe:
    """One question asked before and after an edit.

    ``image`` is relative to the task set folder (absolute while building); ``answer`` is the
    gold answer: the edit's target for reliability and generality probes, the question's own
    answer for locality probes.
    """

    probe_id: str
    kind: ProbeKind
    task_type: TaskType
    image: str
    question: str
    answer: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EditRequest:
    """One edit: teach ``target`` as the answer to ``question`` on ``image``; ``order`` is its
    place in the sequential order; ``probes`` start with its reliability probe(s)."""

    edit_id: str
    image: str
    question: str
    target: str
    source: str
    order: int
    probes: tuple[Probe, ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EditRequest:
        probes = tuple(Probe(**p) for p in d.get("probes", ()))
        return cls(**{**d, "probes": probes})


@dataclass(frozen=True)
class TaskSet:
    """A built task set: its folder, its requests in sequential order and its manifest."""

    root: Path
    requests: tuple[EditRequest, ...]
    manifest: dict[str, Any]

    def image_path(self, relative: str) -> Path:
        return self.root / relative

    def __len__(self) -> int:
        return len(self.requests)


def validate_request(request: EditRequest, *, where: str) -> None:
    """Refuse a request that cannot be scored: an empty question, target or gold answer, a
    missing image, an unknown kind or task type, duplicate probe ids, no reliability probe
    (the first problem; :func:`read_taskset` names them all)."""
    problems = request_problems(request, where=where, kinds=KINDS, task_types=TASK_TYPES)
    if problems:
        raise TaskError(problems[0])


def store_image(source: str | os.PathLike, images: Path, *, where: str) -> str:
    """Copy an image file into ``images/`` (content-addressed, bytes unchanged); its path
    relative to the task set folder. A missing file is a :class:`TaskError` naming ``where``."""
    path = Path(source)
    if not path.is_file():
        raise TaskError(f"{where}: image {path} is missing")
    cell = {"bytes": path.read_bytes(), "path": path.name}
    stored = store_image_cell(cell, images, file=path, row=0, column="image")
    return stored.relative_to(images.parent).as_posix()


@contextmanager
def new_taskset_folder(out: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """A scratch folder beside ``out`` to build a task set in, put in place of ``out`` when the
    block ends; on an error it is removed and ``out`` stays as it was.

    Raises:
        TaskError: before anything is written, when ``out`` holds files and ``overwrite`` is
            false, or holds files that are not a task set (no ``taskset.json``: ``overwrite``
            replaces a task set, never other files).
    """
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise TaskError(f"--out {root} is a file, not a folder")
    if root.is_dir() and any(root.iterdir()):
        if not (root / "taskset.json").is_file():
            raise TaskError(f"--out {root} holds files but no task set (no taskset.json): give "
                            "an empty or new folder")  # fmt: skip
        if not overwrite:
            raise TaskError(f"--out {root} already holds a task set: give another folder, or "
                            "--overwrite to replace it")  # fmt: skip
    part = root.parent / f".{root.name}.part-{os.getpid()}"
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    try:
        yield part
        if root.exists():  # the old task set goes only once the new one is whole
            old = root.parent / f".{root.name}.old-{os.getpid()}"
            root.rename(old)
            part.rename(root)
            shutil.rmtree(old)
        else:
            part.rename(root)
    finally:
        shutil.rmtree(part, ignore_errors=True)


def write_taskset(
    out: str | os.PathLike,
    requests: Sequence[EditRequest],
    *,
    sources: Iterable[str],
    seed: int,
    extra: dict[str, Any] | None = None,
) -> TaskSet:
    """Validate ``requests`` (in sequential order) and write ``tasks.jsonl`` and
    ``taskset.json`` into ``out`` (whose ``images/`` must already hold their images)."""
    root = Path(out)
    for r in requests:
        validate_request(r, where=f"{root / 'tasks.jsonl'} (order {r.order})")
        items: list[EditRequest | Probe] = [r, *r.probes]
        for p in items:
            if not (root / p.image).is_file():
                raise TaskError(f"{root}: edit {r.edit_id}: image {p.image} is missing")
    ids = Counter(r.edit_id for r in requests)
    dup = [k for k, n in ids.items() if n > 1]
    if dup:
        raise TaskError(f"{root}: duplicate edit ids {dup[:5]}")
    orders = [r.order for r in requests]
    if orders != list(range(len(requests))):
        raise TaskError(f"{root}: requests must be written in their order 0..{len(requests) - 1}")
    probes = Counter((p.task_type, p.kind) for r in requests for p in r.probes)
    manifest = {
        "format": "medibench-edit-tasks",
        "version": TASKSET_VERSION,
        "sources": sorted(set(sources)),
        "seed": seed,
        "n_edits": len(requests),
        "probes": {f"{t}/{k}": n for (t, k), n in sorted(probes.items())},
        **(extra or {}),
    }
    atomic_write_text(root / "tasks.jsonl", "".join(r.to_json() + "\n" for r in requests))
    atomic_write_text(root / "taskset.json", json.dumps(manifest, indent=2, sort_keys=True))
    return TaskSet(root, tuple(requests), manifest)


def read_taskset(path: str | os.PathLike) -> TaskSet:
    """Read a task set folder written by :func:`write_taskset` (requests in their order),
    checked completely first (:mod:`._validate`).

    Raises:
        TaskError: no ``tasks.jsonl``; or, naming every problem at once, a corrupt
            ``taskset.json``, a line that is not a request or has a field of the wrong type, a
            request that does not validate, an image that leaves the folder, is missing or does
            not decode, an ``edit_id`` or a ``probe_id`` used twice in the set.
    """
    root = Path(path)
    tasks = root / "tasks.jsonl"
    if not tasks.is_file():
        raise TaskError(f"{root}: not an edit task set (no tasks.jsonl; build one with "
                        "`medibench edit tasks`)")  # fmt: skip
    problems: list[str] = []
    manifest = _manifest(root / "taskset.json", problems)
    requests, checked = [], {}  # type: ignore[var-annotated]
    try:
        text = tasks.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{tasks}: cannot be read ({exc})") from None
    for n, _, data, exc in json_lines(text.splitlines()):
        where = f"{tasks} line {n}"
        if exc is not None:
            problems.append(f"{where}: not JSON ({exc.msg}, column {exc.colno})")
            continue
        typed = typed_problems(data, where)
        if typed:
            problems += typed
            continue
        try:
            request = EditRequest.from_dict(data)
        except TypeError as exc:
            problems.append(f"{where}: not an edit request ({exc})")
            continue
        problems += request_problems(request, where=where, kinds=KINDS, task_types=TASK_TYPES)
        for item in [request, *request.probes]:
            bad = image_problem(root, item.image, checked)
            if bad is not None:
                problems.append(f"{where}: question {item.question!r}: {bad}")
        requests.append(request)
    problems += set_problems(requests, str(tasks))
    if problems:
        shown = "; ".join(problems[:20])
        more = f"; ... ({len(problems)} problems in all)" if len(problems) > 20 else ""
        raise TaskError(f"{root}: the task set has {len(problems)} problem(s): {shown}{more}")
    requests.sort(key=lambda r: r.order)
    return TaskSet(root, tuple(requests), manifest)


def _manifest(path: Path, problems: list[str]) -> dict[str, Any]:
    """``taskset.json`` (``{}`` when absent); a corrupt one is a problem."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{path}: not a readable JSON manifest ({exc})")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path}: expected a JSON object, got {type(data).__name__}")
        return {}
    return data


def load_image(taskset: TaskSet, relative: str) -> Any:
    """The RGB uint8 array of a task set image."""
    return read_image(taskset.image_path(relative), mode="rgb")
