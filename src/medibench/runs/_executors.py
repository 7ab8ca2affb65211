"""Executors: where the generate and score stages do their work.

- :class:`LocalExecutor` (``--executor local``): in this process. One worker runs the items one
  after another, in batches of same-size images (sized from the input files' headers, across
  the whole stage) when the model has ``edit_batch`` and a ``batch_size`` above 1. More workers
  (``--workers N``) keep N items in flight through the call layer's
  :func:`medibench.calls.run_bounded`, on one event loop: coroutines awaiting the model's async
  ``aedit`` (the API adapters), or, for a model with only a blocking ``edit``, the same
  coroutines handing each item to a pool of N threads.
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
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from medibench.calls import Ahead, run_bounded
from medibench.io import write_image
from medibench.io._write import is_disk_full
from medibench.runs._demos import load_examples
from medibench.runs._ray import RayExecutor
from medibench.runs._work import (
    Outcome,
    Refusal,
    Task,
    batches,
    check_output,
    describe,
    edit_one,
    edit_tasks,
    failure,
    read_input,
    score_one,
)
from medibench.samples import Sample

__all__ = ["LocalExecutor", "Outcome", "RayExecutor", "Refusal", "Task", "edit_tasks"]


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
        if workers > 1:
            if self.workers and hasattr(model, "aedit") and hasattr(model, "concurrency"):
                model.concurrency = max(model.concurrency, self.workers)
            yield from _generate_concurrent(model, tasks, out_dir, workers)
        else:
            yield from _generate_in_turn(model, tasks, out_dir)

    def score(self, root: Path, samples: dict[str, Sample], preds, protocol, load_images=None):
        """Score ``preds`` (sorted by sample) one after another; yield score records."""
        cache: dict[str, Any] = {}
        for pred in preds:
            yield score_one(root, samples[pred.sample_id], pred, protocol, load_images, cache)

    def close(self) -> None:
        pass


# -- helpers ----------------------------------------------------------------------------------
def _write_outcome(task, image, error, elapsed, out_dir: Path) -> Outcome:
    if error is not None:
        return Outcome(task, None, error, elapsed)
    try:
        path = write_image(out_dir / task.filename, check_output(image))
    except Exception as exc:
        if is_disk_full(exc):  # not this item's fault: stop, keeping what is done
            raise
        return Outcome(task, None, describe(exc), elapsed)
    return Outcome(task, path, None, elapsed)


def _generate_in_turn(model, tasks: Sequence[Task], out_dir: Path) -> Iterator[Outcome]:
    """One batch (``model.batch_size`` items of one input size, :func:`batches`) at a time; a
    writer thread encodes and writes each batch's PNGs while the model works on the next one (a
    GPU is not left idle for the PNG encoding), and the outcomes come back in batch order."""
    size = max(1, int(getattr(model, "batch_size", 1) or 1))
    with ThreadPoolExecutor(1, thread_name_prefix="medibench-write") as writer:
        pending: deque[Future[Outcome]] = deque()
        for chunk in batches(tasks, size if hasattr(model, "edit_batch") else 1):
            images = [read_input(t) for t in chunk]
            for task, (image, error, elapsed) in zip(
                chunk, edit_tasks(model, chunk, images), strict=True
            ):
                pending.append(writer.submit(_write_outcome, task, image, error, elapsed, out_dir))
            while pending and (pending[0].done() or len(pending) > size):
                yield pending.popleft().result()  # a full disk raises here, as before
        while pending:
            yield pending.popleft().result()


def _one_item(model, task: Task, out_dir: Path) -> Outcome:
    image = read_input(task)
    if isinstance(image, str):
        return Outcome(task, None, image, 0.0)
    out, error, elapsed = edit_one(model, task, image)
    return _write_outcome(task, out, error, elapsed, out_dir)


def _generate_concurrent(model, tasks, out_dir: Path, workers: int) -> Iterator[Outcome]:
    """``workers`` items in flight (:func:`medibench.calls.run_bounded`) on an event loop in a
    thread of its own; outcomes come back through a queue so the caller's thread does the store
    writes. A model with ``aedit`` is awaited on the loop; one with only ``edit`` runs each item
    on a pool of ``workers`` threads.

    For ``aedit``, the requests stay in flight: the inputs are read on a thread ahead of need
    (:class:`medibench.calls.Ahead`), and a worker hands its answer's PNG write (an fsync) to the
    loop's pool and sends its next request at once (at most ``workers`` writes wait; a full disk
    stops the stage at the next item and every write is done before the stage ends)."""
    results: queue.Queue = queue.Queue()
    done = object()
    aedit = getattr(model, "aedit", None)
    writes: set[asyncio.Future] = set()
    failed: list[BaseException] = []
    reads = Ahead(tasks, read_input, workers, max_bytes=READ_AHEAD_BYTES, name="medibench-read")

    def written(future: asyncio.Future) -> None:
        writes.discard(future)
        if future.cancelled():
            return
        if future.exception() is not None:
            failed.append(future.exception())  # type: ignore[arg-type]
        else:
            results.put(future.result())

    async def one(index: int) -> None:
        task = tasks[index]
        if aedit is None or (task.demos and not hasattr(model, "aedit_with_examples")):
            results.put(await asyncio.to_thread(_one_item, model, task, out_dir))
            return
        image_ahead = reads.take(index)
        if failed:
            raise failed[0]
        done = image_ahead.done()  # read ahead: no trip through the loop
        image = image_ahead.result() if done else await asyncio.wrap_future(image_ahead)
        if isinstance(image, str):
            results.put(Outcome(task, None, image, 0.0))
            return
        reads.account(image.nbytes)
        t0 = time.perf_counter()
        try:
            if task.demos:  # in-context demonstrations, read off the loop
                examples = await asyncio.to_thread(load_examples, task.demos)
                instruction = task.sample.instruction
                out = await model.aedit_with_examples(image, instruction, examples, seed=task.seed)
            else:
                out = await aedit(image, task.sample.instruction, seed=task.seed)
        except Exception as exc:  # recorded on the sample; the run goes on
            results.put(Outcome(task, None, failure(exc), time.perf_counter() - t0))
            return
        elapsed = time.perf_counter() - t0
        loop = asyncio.get_running_loop()
        write = loop.run_in_executor(None, _write_outcome, task, out, None, elapsed, out_dir)
        writes.add(write)
        write.add_done_callback(written)
        if len(writes) > workers:
            await asyncio.wait(set(writes), return_when=asyncio.FIRST_COMPLETED)

    async def main() -> None:
        # The blocking edits, or an async model's PNG writes (an fsync each), run on this loop's
        # own pool of `workers` threads: asyncio's default pool has cores + 4, and items queued
        # behind slow fsyncs left fewer than `workers` requests in flight.
        name = "medibench-edit" if aedit is None else "medibench-io"
        pool = ThreadPoolExecutor(workers, thread_name_prefix=name)
        asyncio.get_running_loop().set_default_executor(pool)
        try:
            await run_bounded(range(len(tasks)), one, workers)
        finally:
            if writes:
                await asyncio.wait(set(writes))
            if aedit is not None and hasattr(model, "aclose"):
                await model.aclose()
        if failed:
            raise failed[0]

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced in the caller's thread
            results.put(exc)
        finally:
            reads.close()
        results.put(done)

    thread = threading.Thread(target=run, name="medibench-generate", daemon=True)
    thread.start()
    while (item := results.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item
    thread.join()


#: Bytes of decoded inputs read ahead of need, at most (about: the mean size of those sent).
READ_AHEAD_BYTES = 256 << 20
