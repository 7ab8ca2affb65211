"""Executors: where the generate and score stages do their work.

- :class:`LocalExecutor` (``--executor local``): in this process. One worker runs the items one
  after another, in batches of same-size images when the model has ``edit_batch`` and a
  ``batch_size`` above 1. More workers (``--workers N``) keep N items in flight: on one event loop
  for models with an async ``aedit`` (the API adapters), on a thread pool otherwise.
- :class:`RayExecutor` (``--executor ray``, in ``_ray``): one Ray actor per GPU (or ``workers``
  actors) builds the model once and pulls batches of work; scoring runs as Ray tasks over shards
  of samples.

Either way the caller's thread writes every row of the run store, one transaction per item, after
the item's PNG is atomically in place (:func:`medibench.runs.generate`). A failure is that item's
error text (a :class:`Refusal` when the model refused the edit); a full disk is not an item's
failure: it stops the stage.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from medibench.io import read_image, write_image
from medibench.io._write import is_disk_full
from medibench.models._errors import ContentRefusedError
from medibench.samples import Sample

if TYPE_CHECKING:
    from medibench.runs._ray import RayExecutor

__all__ = ["LocalExecutor", "Outcome", "RayExecutor", "Refusal", "Task", "edit_tasks"]


def __getattr__(name: str):
    # RayExecutor lives in _ray, which imports this module: loading it on first use keeps
    # that import one-way (and Ray itself is only imported when an executor is made).
    if name == "RayExecutor":
        from medibench.runs._ray import RayExecutor

        return RayExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Task:
    """One output to make: draw ``k`` of ``sample``, with its derived ``seed``."""

    sample: Sample
    k: int
    seed: int

    @property
    def filename(self) -> str:
        return f"{self.sample.sample_id}_{self.k}.png"


class Refusal(str):
    """The error text of an edit the model refused (``ContentRefusedError``): stored as
    ``refused``, not asked again on a plain re-run. A ``str``, so it travels like any error."""

    __slots__ = ()


@dataclass(frozen=True)
class Outcome:
    """What became of a task: the written file, or the error that stopped it."""

    task: Task
    path: Path | None
    error: str | None
    elapsed_s: float


class LocalExecutor:
    """Run the model in this process with ``workers`` items in flight (see the module doc).

    ``workers=None`` uses the model's own ``concurrency`` (the API adapters set one), else 1.
    """

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers

    def generate(self, model, tasks: Sequence[Task], out_dir: Path) -> Iterator[Outcome]:
        """Make every task's output in ``out_dir``; yield outcomes as they finish."""
        workers = self.workers or int(getattr(model, "concurrency", 1) or 1)
        if workers > 1 and hasattr(model, "aedit"):
            if self.workers and hasattr(model, "concurrency"):
                model.concurrency = max(model.concurrency, self.workers)
            yield from _generate_async(model, tasks, out_dir, workers)
        elif workers > 1:
            yield from _generate_threads(model, tasks, out_dir, workers)
        else:
            size = max(1, int(getattr(model, "batch_size", 1) or 1))
            for start in range(0, len(tasks), size):
                chunk = list(tasks[start : start + size])
                images = [_read_input(t) for t in chunk]
                for task, (image, error, elapsed) in zip(
                    chunk, edit_tasks(model, chunk, images), strict=True
                ):
                    yield _write_outcome(task, image, error, elapsed, out_dir)

    def score(self, root: Path, samples: dict[str, Sample], preds, protocol, load_images):
        """Score ``preds`` (sorted by sample) one after another; yield score records."""
        from medibench.runs._runner import score_one

        cache: dict[str, Any] = {}
        for pred in preds:
            yield score_one(root, samples[pred.sample_id], pred, protocol, load_images, cache)

    def close(self) -> None:
        pass


def edit_tasks(
    model, tasks: Sequence[Task], images: Sequence[np.ndarray | str]
) -> list[tuple[np.ndarray | None, str | None, float]]:
    """Run ``model`` on tasks whose inputs are ``images`` (or a read error); per task return
    ``(image, error, seconds)``.

    Same-size inputs go to ``model.edit_batch`` together when the model has one; if a batch
    fails, its items are retried one by one so one bad sample fails alone.
    """
    results: list[tuple[np.ndarray | None, str | None, float] | None] = [None] * len(tasks)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, image in enumerate(images):
        if isinstance(image, str):
            results[i] = (None, image, 0.0)
        else:
            groups.setdefault(image.shape, []).append(i)
    batched = hasattr(model, "edit_batch") and getattr(model, "batch_size", 1) > 1
    for idx in groups.values():
        if batched and len(idx) > 1:
            t0 = time.perf_counter()
            try:
                outs = model.edit_batch(
                    [images[i] for i in idx],
                    [tasks[i].sample.instruction for i in idx],
                    seeds=[tasks[i].seed for i in idx],
                )
                each = (time.perf_counter() - t0) / len(idx)
                for i, out in zip(idx, outs, strict=True):
                    results[i] = (out, None, each)
                continue
            except Exception:  # retried one by one below, so the failure lands on its sample
                pass
        for i in idx:
            results[i] = _edit_one(model, tasks[i], images[i])
    return results  # type: ignore[return-value]


# -- helpers (_read_input, _check_output and _describe also serve _ray) ---------------------
def _edit_one(model, task: Task, image: np.ndarray):
    t0 = time.perf_counter()
    try:
        out = model.edit(image, task.sample.instruction, seed=task.seed)
    except Exception as exc:  # recorded on the sample; the run goes on
        return None, _failure(exc), time.perf_counter() - t0
    return out, None, time.perf_counter() - t0


def _failure(exc: BaseException) -> str:
    """The recorded text of an item's failure; a :class:`Refusal` for a refused edit."""
    text = _describe(exc)
    return Refusal(text) if isinstance(exc, ContentRefusedError) else text


def _read_input(task: Task) -> np.ndarray | str:
    try:
        return read_image(task.sample.input, mode="rgb")
    except Exception as exc:  # an unreadable input is that sample's failure
        return _describe(exc)


def _write_outcome(task, image, error, elapsed, out_dir: Path) -> Outcome:
    if error is not None:
        return Outcome(task, None, error, elapsed)
    try:
        path = write_image(out_dir / task.filename, _check_output(image))
    except Exception as exc:
        if is_disk_full(exc):  # not this item's fault: stop, keeping what is done
            raise
        return Outcome(task, None, _describe(exc), elapsed)
    return Outcome(task, path, None, elapsed)


def _check_output(image: Any) -> np.ndarray:
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] > 4):
        raise ValueError(
            f"the model returned {arr.dtype} pixels of shape {arr.shape}; expected uint8 "
            "(H, W), (H, W, 3) or (H, W, 4)"
        )
    return arr


def _one_item(model, task: Task, out_dir: Path) -> Outcome:
    image = _read_input(task)
    if isinstance(image, str):
        return Outcome(task, None, image, 0.0)
    out, error, elapsed = _edit_one(model, task, image)
    return _write_outcome(task, out, error, elapsed, out_dir)


def _generate_threads(model, tasks, out_dir: Path, workers: int) -> Iterator[Outcome]:
    it = iter(tasks)
    with ThreadPoolExecutor(workers, thread_name_prefix="medibench-edit") as pool:
        futures = {pool.submit(_one_item, model, t, out_dir) for t in _take(it, workers * 2)}
        while futures:
            done, futures = wait(futures, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
            futures |= {pool.submit(_one_item, model, t, out_dir) for t in _take(it, len(done))}


def _generate_async(model, tasks, out_dir: Path, workers: int) -> Iterator[Outcome]:
    """N coroutines pull tasks and call ``model.aedit``; outcomes come back through a queue so
    the caller's thread does the store writes."""
    results: queue.Queue = queue.Queue()
    done = object()

    async def one(task: Task) -> Outcome:
        image = await asyncio.to_thread(_read_input, task)
        if isinstance(image, str):
            return Outcome(task, None, image, 0.0)
        t0 = time.perf_counter()
        try:
            out = await model.aedit(image, task.sample.instruction, seed=task.seed)
        except Exception as exc:  # recorded on the sample; the run goes on
            return Outcome(task, None, _failure(exc), time.perf_counter() - t0)
        elapsed = time.perf_counter() - t0
        return await asyncio.to_thread(_write_outcome, task, out, None, elapsed, out_dir)

    async def main() -> None:
        it = iter(tasks)

        async def worker() -> None:
            for task in it:  # a shared iterator: each task goes to one worker
                results.put(await one(task))

        try:
            await asyncio.gather(*(worker() for _ in range(workers)))
        finally:
            if hasattr(model, "aclose"):
                await model.aclose()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced in the caller's thread
            results.put(exc)
        results.put(done)

    thread = threading.Thread(target=run, name="medibench-api", daemon=True)
    thread.start()
    while (item := results.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item
    thread.join()


def _take(it: Iterator[Task], n: int) -> list[Task]:
    out = []
    for _ in range(n):
        task = next(it, None)
        if task is None:
            break
        out.append(task)
    return out


def _describe(exc: BaseException) -> str:
    from medibench.runs._runner import _describe as describe

    return describe(exc)
