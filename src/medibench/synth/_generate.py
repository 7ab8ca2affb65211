"""Drawing and writing the suite's items: each item's identity, its generator, its PNG files.

Kept apart from :mod:`medibench.synth.suite` (the suite definitions, planning and the folder
around the items) so that module stays short; everything here is re-exported there.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medibench.io import encode_image
from medibench.samples import Sample
from medibench.synth._seed import item_rng
from medibench.synth.scenes import SceneError
from medibench.synth.tasks import PRESETS, TASKS, Difficulty, TaskContext, TaskItem, get_difficulty
from medibench.synth.tasks._common import modality_text

__all__ = [
    "BENCHMARK",
    "MAX_ATTEMPTS",
    "SUITE_VERSION",
    "SuiteItem",
    "generate_item",
    "write_items",
]

#: Version of the suite's content: any change to what a given identity generates bumps it.
SUITE_VERSION = "1"
#: ``Sample.benchmark`` of every generated item.
BENCHMARK = "medibench-suite"
#: Attempts per item before an item that cannot be drawn is an error (an impossible knob).
MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class SuiteItem:
    """One planned item: which task, which index, which scene modality."""

    task: str
    index: int
    modality: str

    @property
    def sample_id(self) -> str:
        return f"{self.task}-{self.index:04d}"


def generate_item(
    item: SuiteItem, *, difficulty: str | Difficulty = "medium", size: int = 256, seed: int = 0
) -> tuple[TaskItem, dict[str, Any]]:
    """Draw one item; return it and its identity metadata (``seed_key``, ``attempt``, ...).

    Raises:
        ValueError: the item could not be drawn in :data:`MAX_ATTEMPTS` attempts (an impossible
            knob such as a lesion larger than every organ); the message names the item.
    """
    diff = get_difficulty(difficulty)
    preset = _preset_key(diff)
    task = TASKS[item.task]
    base = ("medibench-suite", SUITE_VERSION, item.task, item.modality, preset, item.index, seed)
    error: SceneError | None = None
    for attempt in range(MAX_ATTEMPTS):
        key = base + ((attempt,) if attempt else ())
        ctx = TaskContext(item_rng(*key), item.modality, diff, int(size))
        try:
            made = task.make(ctx)
        except SceneError as exc:  # no room for the lesions of this draw: draw again
            error = exc
            continue
        identity = {"seed_key": "|".join(map(str, key)), "attempt": attempt}
        return made, identity
    raise ValueError(
        f"cannot generate {item.sample_id} ({item.task} on {item.modality}, preset {preset}, "
        f"size {size}) in {MAX_ATTEMPTS} attempts: {error}"
    )


def write_items(
    plan: list[SuiteItem], job: dict[str, Any], workers: int | None, progress: bool
) -> Iterator[Sample]:
    """Generate and write every planned item under ``job["root"]`` (in a process pool when it
    pays); yield their Samples in plan order. ``job``: difficulty, size, seed, suite, root."""
    n = workers if workers is not None else (1 if len(plan) < 48 else min(os.cpu_count() or 1, 8))
    bar = _Progress(len(plan)) if progress else None
    try:
        if n <= 1:
            results: Iterable[Sample] = (_make_and_write(item, job) for item in plan)
        else:
            # Spawned workers: a fork taken while another library's threads hold a lock hangs.
            pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"))
            chunk = max(1, min(16, len(plan) // (4 * n)))
            results = pool.map(_make_and_write, plan, [job] * len(plan), chunksize=chunk)
        for sample in results:
            if bar is not None:
                bar.advance()
            yield sample
    finally:
        if n > 1:
            pool.shutdown(cancel_futures=True)
        if bar is not None:
            bar.close()


def _make_and_write(item: SuiteItem, job: dict) -> Sample:
    made, identity = generate_item(
        item, difficulty=job["difficulty"], size=job["size"], seed=job["seed"]
    )
    root: Path = job["root"]
    sid = item.sample_id
    paths = {"input": f"images/{sid}_input.png", "target": f"images/{sid}_target.png"}
    # medibench.io's one encoder; plain writes: the build folder is renamed into place only
    # once complete, so a per-file fsync and rename would buy nothing here
    _write_png(root / paths["input"], made.input)
    _write_png(root / paths["target"], made.target)
    if made.mask is not None:
        paths["mask"] = f"images/{sid}_mask.png"
        _write_png(root / paths["mask"], made.mask)
    task = TASKS[item.task]
    modality, _ = modality_text(item.modality)
    diff: Difficulty = job["difficulty"]
    return Sample(
        sample_id=sid, benchmark=BENCHMARK, instruction=made.instruction,
        paraphrases=made.paraphrases, description=made.description, task=item.task,
        region=made.region, modality=modality, perspective=task.perspective,
        overlay_color=made.overlay_color,
        source={"generator": "medibench.synth.suite", "suite_version": SUITE_VERSION,
                "licence": "generated procedurally by medibench (no patient data)"},
        metadata={"suite": job["suite"], "suite_version": SUITE_VERSION, "seed": job["seed"],
                  "preset": diff.name, "index": item.index, "scene_modality": item.modality,
                  "size": job["size"], **identity, **made.metadata},
        **paths,
    )  # fmt: skip


class _Progress:
    """A rich progress bar on stderr (a no-op when rich cannot draw)."""

    def __init__(self, total: int) -> None:
        from rich.progress import Progress

        self._bar = Progress(transient=True)
        self._task = self._bar.add_task("generating the suite", total=total)
        self._bar.start()

    def advance(self) -> None:
        self._bar.advance(self._task)

    def close(self) -> None:
        self._bar.stop()


def _preset_key(diff: Difficulty) -> str:
    """The preset part of an item's identity: the name, or a hash of custom knobs."""
    if PRESETS.get(diff.name) == diff:
        return diff.name
    digest = hashlib.sha256(json.dumps(diff.as_dict(), sort_keys=True).encode()).hexdigest()
    return f"custom-{digest[:12]}"


def _write_png(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_image(image, ".png", where=f"suite image {path.name}"))
