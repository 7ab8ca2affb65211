"""The medibench suite: procedural editing items with exact targets, written as a native dataset.

Every item is a pure function of its identity ``("medibench-suite", SUITE_VERSION, task,
modality, preset, index, seed)``: its generator is :func:`~medibench.synth.item_rng` of that
tuple (with ``attempt`` appended when an earlier attempt could not place its lesions), so adding
tasks or items never changes the others, and the same arguments give byte-identical files.
Item ``i`` of a task uses the task's ``(i + o) % k``-th modality (of the ``k`` it supports, after
the ``modalities`` filter), so within a task the counts per modality differ by at most one for
any ``n_per_task``; the offset ``o`` is drawn per task from the seed
(:func:`rotation_offset`), so a small suite spreads over every modality instead of starting
each task at CT. The frozen suites (:data:`SUITES`) keep ``o = 0``, the order their items were
pinned with.

Layout (native, :func:`~medibench.datasets.write_native`)::

    out/
      samples.jsonl                       one Sample per line, ids "<task>-<index:04d>"
      suite.json                          what was generated: suite, version, preset, seed, ...
      images/<id>_input.png, _target.png, _mask.png (perception and modification only)

Example:
    >>> root = generate_suite("/tmp/suite", preset="easy", n_per_task=2, size=128)  # doctest: +SKIP
    >>> ds = load_suite("/tmp/suite-mini", name="medibench-suite@1-mini")          # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from medibench.datasets import MANIFEST, DatasetError, NativeDataset, read_native, write_native
from medibench.io import atomic_write_text
from medibench.synth._build import building
from medibench.synth._generate import (
    BENCHMARK,
    MAX_ATTEMPTS,
    SUITE_VERSION,
    SuiteItem,
    generate_item,
    write_items,
)
from medibench.synth._seed import item_seed
from medibench.synth.scenes import MAX_SIZE, MIN_SIZE
from medibench.synth.tasks import TASKS, Difficulty, get_difficulty
from medibench.synth.tasks._common import ALL_MODALITIES

__all__ = [
    "BENCHMARK",
    "MAX_ATTEMPTS",
    "SUITES",
    "SUITE_VERSION",
    "SuiteItem",
    "generate_item",
    "generate_suite",
    "load_suite",
    "plan_suite",
    "rotation_offset",
    "suite_cache_dir",
]

_INFO = "suite.json"
_PROCEDURAL = ("ct", "mri", "xray", "dermoscopy", "endoscopy", "fundus")
# The task list of medibench-suite@1, frozen (a task added later does not join it).
_TASKS_V1 = (
    "highlight-structure",
    "highlight-two-structures",
    "highlight-three-structures",
    "highlight-lesion",
    "highlight-all-lesions",
    "highlight-described-lesion",
    "highlight-largest-lesion",
    "highlight-lesion-and-host",
    "remove-lesion",
    "remove-described-lesion",
    "remove-all-lesions",
    "add-lesion",
    "enlarge-lesion",
    "shrink-lesion",
    "move-lesion",
    "intensify-lesion",
    "fade-lesion",
    "denoise-gaussian",
    "denoise-poisson",
    "denoise-rician",
    "low-dose-ct",
    "deblur",
    "super-resolution-2x",
    "super-resolution-4x",
    "mr-motion-correction",
    "ring-artefact-removal",
    "streak-artefact-removal",
    "bias-field-correction",
    "enhance-contrast",
    "window-lung",
    "window-soft-tissue",
    "window-bone",
    "window-brain",
)


#: Frozen suite definitions for comparable leaderboards. ``--seed`` draws fresh, never-seen
#: instances of the same distribution.
SUITES: dict[str, dict[str, Any]] = {
    "medibench-suite@1": {
        "preset": "medium",
        "n_per_task": 12,
        "seed": 0,
        "size": 256,
        "tasks": _TASKS_V1,
        "modalities": _PROCEDURAL,
    },
    "medibench-suite@1-mini": {
        "preset": "medium",
        "n_per_task": 2,
        "seed": 0,
        "size": 256,
        "tasks": _TASKS_V1,
        "modalities": _PROCEDURAL,
    },
}


def plan_suite(
    *,
    n_per_task: int,
    tasks: Sequence[str] | None = None,
    modalities: Sequence[str] | None = None,
    seed: int | None = None,
) -> list[SuiteItem]:
    """The items a suite holds, in order: tasks in registry order, ``n_per_task`` each.

    Each task's items rotate over its supported modalities starting at
    :func:`rotation_offset` of ``(task, seed)``; ``seed=None`` starts every task at its first
    modality (the frozen suites' order).

    Raises:
        ValueError: an unknown task or modality (the message lists the valid ones), a task that
            supports none of the asked modalities, ``n_per_task < 1``.
    """
    if int(n_per_task) < 1:
        raise ValueError(f"n_per_task must be at least 1, got {n_per_task}")
    names = _check_names("task", tasks, tuple(TASKS))
    mods = _check_names("modality", modalities, ALL_MODALITIES)
    plan: list[SuiteItem] = []
    for name in names:
        supported = [m for m in TASKS[name].modalities if m in mods]
        if not supported:
            if tasks is not None:
                raise ValueError(
                    f"task {name!r} supports none of the modalities {', '.join(mods)}; it "
                    f"supports {', '.join(TASKS[name].modalities)}"
                )
            continue
        start = 0 if seed is None else rotation_offset(name, seed, len(supported))
        plan += [
            SuiteItem(name, i, supported[(start + i) % len(supported)]) for i in range(n_per_task)
        ]
    if not plan:
        raise ValueError(f"no task supports the modalities {', '.join(mods)}")
    return plan


def rotation_offset(task: str, seed: int, n_modalities: int) -> int:
    """Where ``task``'s modality rotation starts for suite ``seed``: in ``[0, n_modalities)``,
    from :func:`~medibench.synth.item_seed` of ``("medibench-suite", "rotation", task, seed)``."""
    return item_seed("medibench-suite", "rotation", task, int(seed)) % n_modalities


def generate_suite(
    out_dir: str | os.PathLike,
    *,
    preset: str | Difficulty = "medium",
    n_per_task: int = 4,
    seed: int | None = None,
    modalities: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    size: int = 256,
    overwrite: bool = False,
    progress: bool = True,
    suite: str | None = None,
    workers: int | None = None,
) -> Path:
    """Generate a suite as a native dataset in ``out_dir``; return its root.

    Args:
        preset: ``"easy"``, ``"medium"``, ``"hard"`` or a :class:`Difficulty`.
        n_per_task: items per task type.
        seed: suite seed (default 0, or the frozen suite's); another seed gives fresh items.
        modalities, tasks: restrict to these scene modalities / task types (default all).
        size: image side in pixels, a multiple of 4 in ``[64, 2048]``.
        overwrite: replace an existing suite in ``out_dir``; a folder holding anything else is
            never deleted.
        suite: a name of :data:`SUITES`: its preset, counts, tasks, modalities, size and seed
            are used (``seed`` still overrides the seed).
        workers: processes (default: one per CPU, at most 8, one for small suites).

    The suite is assembled in a temporary sibling folder and renamed into place, so ``out_dir``
    never holds half a suite.

    Raises:
        ValueError: unknown names (listing the valid ones), a bad size, an impossible knob.
        DatasetError: ``out_dir`` is not empty and ``overwrite`` is false, or it holds
            something other than a medibench dataset.
    """
    if suite is not None:
        spec = _definition(suite)
        preset, n_per_task, size = spec["preset"], spec["n_per_task"], spec["size"]
        tasks, modalities = spec["tasks"], spec["modalities"]
        seed = spec["seed"] if seed is None else seed
    seed = 0 if seed is None else int(seed)
    _check_size(size)
    diff = get_difficulty(preset)
    # A frozen suite keeps the rotation its items were pinned with (every task from its first).
    plan = plan_suite(
        n_per_task=n_per_task,
        tasks=tasks,
        modalities=modalities,
        seed=None if suite is not None else seed,
    )
    out = Path(out_dir)
    _check_out(out, overwrite)
    with building(out) as work:  # replaces a medibench dataset there: checked, overwrite asked
        job = {"difficulty": diff, "size": int(size), "seed": seed, "suite": suite, "root": work}
        samples = list(write_items(plan, job, workers, progress))
        write_native(work, samples)
        info = {
            "benchmark": BENCHMARK, "suite": suite, "version": SUITE_VERSION, "seed": seed,
            "preset": diff.name, "difficulty": diff.as_dict(), "size": int(size),
            "n_per_task": int(n_per_task), "tasks": sorted({p.task for p in plan}),
            "modalities": sorted({p.modality for p in plan}), "n_samples": len(samples),
        }  # fmt: skip
        atomic_write_text(work / _INFO, json.dumps(info, indent=1) + "\n")
    return out.resolve()


def load_suite(
    path: str | os.PathLike | None = None,
    *,
    name: str = "medibench-suite@1",
    seed: int | None = None,
    **kw: Any,
) -> NativeDataset:
    """A frozen suite read as a native dataset, generated first if ``path`` holds none.

    ``path`` defaults to :func:`suite_cache_dir`; a ``path`` that is the name of a frozen suite
    (``"suite:medibench-suite@1-mini"``) selects it in the default cache folder. A folder that
    holds another suite, version or seed than the one asked for is refused (delete it or use
    another folder), so a run never scores data it did not ask for. ``kw`` go to
    :func:`generate_suite` (``progress``, ``workers``).
    """
    if path is not None and str(path) in SUITES:
        name, path = str(path), None
    spec = _definition(name)
    want_seed = spec["seed"] if seed is None else int(seed)
    root = Path(path) if path else suite_cache_dir(name, seed=want_seed)
    if not (root / MANIFEST).is_file():
        kw.setdefault("progress", False)
        try:
            generate_suite(root, suite=name, seed=want_seed, **kw)
        except (OSError, DatasetError):
            if not (root / MANIFEST).is_file():  # not a concurrent build that finished first
                raise
    info_path = root / _INFO
    if not info_path.is_file():
        raise DatasetError(f"{root} holds a dataset but no {_INFO}: it is not a generated suite")
    info = json.loads(info_path.read_text("utf-8"))
    for key, value in {"suite": name, "version": SUITE_VERSION, "seed": want_seed}.items():
        if info.get(key) != value:
            raise DatasetError(
                f"{root} holds a suite with {key}={info.get(key)!r}, not {value!r}: delete the "
                "folder to regenerate it, or use another folder"
            )
    return read_native(root, name=name)


def suite_cache_dir(name: str = "medibench-suite@1", *, seed: int = 0) -> Path:
    """``<medibench cache>/<name>-seed<seed>`` (the cache folder of the starter benchmark)."""
    from medibench.synth.starter import starter_cache_dir

    return starter_cache_dir().parent / f"{name}-seed{int(seed)}"


# --- helpers ---------------------------------------------------------------------------------


def _definition(name: str) -> dict[str, Any]:
    try:
        return SUITES[name]
    except KeyError:
        raise ValueError(f"unknown suite {name!r}; frozen suites: {', '.join(SUITES)}") from None


def _check_names(what: str, asked: Iterable[str] | None, valid: tuple[str, ...]) -> list[str]:
    if asked is None:
        return list(valid)
    asked = list(dict.fromkeys(asked))
    unknown = [a for a in asked if a not in valid]
    label = {"task": "tasks", "modality": "modalities"}[what]
    if unknown:
        raise ValueError(
            f"unknown {what} {', '.join(map(repr, unknown))}; valid {label}: {', '.join(valid)}"
        )
    if not asked:
        raise ValueError(f"no {what} given; valid {label}: {', '.join(valid)}")
    return asked


def _check_size(size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, int):
        raise ValueError(f"size must be an integer number of pixels, got {size!r}")
    if not MIN_SIZE <= size <= MAX_SIZE or size % 4:
        raise ValueError(
            f"size must be a multiple of 4 between {MIN_SIZE} and {MAX_SIZE} pixels (4x "
            f"super-resolution divides it by 4), got {size}"
        )


def _check_out(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise DatasetError(f"cannot generate the suite in {out}: it is a file")
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise DatasetError(
            f"cannot generate the suite in {out}: the folder is not empty (pass overwrite=True "
            "/ --overwrite to replace a suite there)"
        )
    if not ((out / MANIFEST).is_file() or (out / _INFO).is_file()):
        raise DatasetError(
            f"refusing to overwrite {out}: it is not empty and holds no medibench dataset "
            f"({MANIFEST}); choose an empty or new folder"
        )


