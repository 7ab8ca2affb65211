"""Scoring model outputs that already exist on disk (published outputs, another tool's run).

:func:`score_predictions` scores every (model, sample, k) of a :class:`PredictionIndex` under
each protocol, one :class:`~medibench.samples.Score` per line of the official layout: a missing
output is a ``missing`` record and an unreadable one an ``error`` record, never a 0.
"""

from __future__ import annotations

import ctypes
import gc
import math
import multiprocessing
import os
import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from medibench._console import labelled
from medibench._packed import PackedFile, PackedList
from medibench._progress import progress_bar
from medibench.datasets import Dataset, PredictionIndex, load_images
from medibench.runs._work import Decoded, read_ahead, score_one
from medibench.samples import Prediction, Sample, Score

__all__ = ["score_predictions"]


def score_predictions(
    dataset,
    index: PredictionIndex,
    protocols: Sequence,
    *,
    k: int | None = None,
    limit: int | None = None,
    workers: int = 1,
    progress: bool = True,
    console: Console | None = None,
) -> PackedFile[Score]:
    """Score the outputs in ``index`` for every sample of ``dataset`` (its first ``limit``
    samples, when given) under each protocol.

    ``k`` is the number of outputs expected per sample (records for the absent ones are
    ``missing``); ``None`` scores what is there (a sample with none gets one ``missing`` record
    for k = 0). Records come sample by sample, so each sample's images are decoded once per
    protocol, by a reader thread that keeps ahead of the scoring. ``workers > 1`` scores spans
    of samples in that many processes (one OpenCV thread each, and a reader thread each only
    where there are at least twice as many cores as workers); the records and their order are
    the same as with one worker. The records come pickled in a temporary file
    (:class:`~medibench._packed.PackedFile`): each is read back when taken, so 100,000 of them
    take less than a megabyte of memory.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    first: Sequence[Sample]
    if isinstance(dataset, Dataset):  # a slice copies the dataset's id table: none without limit
        first = dataset if limit is None else dataset[:limit]
    else:
        first = list(dataset)[:limit]
    job = _Job(Path(dataset.root), first, index, tuple(protocols), k)
    _warn_empty_models(dataset, index, len(job.samples), console)
    n = len(job.samples)
    if workers <= 1 or n <= 2:
        with progress_bar(progress, console, "score", n) as advance:
            records: PackedFile[Score] = PackedFile()
            _score_span(job, 0, n, advance, into=records)
    else:
        records = _score_in_processes(job, workers, progress, console)
    # One protocol after the other, as a single worker writes them.
    order = {(p.name, p.version): i for i, p in enumerate(protocols)}
    records.sort(key=lambda r: order[(r.protocol, r.protocol_version)])
    return records


@dataclass(frozen=True)
class _Job:
    """What every span of a scoring shares (inherited by forked workers, pickled once per
    spawned one): never sent per span."""

    root: Path
    samples: Sequence[Sample]
    index: PredictionIndex
    protocols: tuple[Any, ...]
    k: int | None


def _warn_empty_models(dataset, index: PredictionIndex, n_samples: int, console) -> None:
    """A "model" folder with no output for any sample is most often not a model's folder
    (``--predictions`` one level too high makes ``benchmarks/`` a model): say so, by name."""
    for model in index.models:
        if index.files[model] or index.failed.get(model):
            continue
        text = (
            f"model folder '{model}' holds no output for any of the {n_samples} samples of "
            f"{dataset.name}: every one is scored missing (is --predictions the folder of the "
            "model folders, not one above or below it?)"
        )
        if console is not None:
            console.print(labelled("warning", text, "yellow"))
        else:
            warnings.warn(text, stacklevel=3)


def _score_span(
    job: _Job,
    lo: int,
    hi: int,
    advance: Callable[[], None] | None = None,
    *,
    ahead: bool = True,
    into: PackedList[Score] | PackedFile[Score] | None = None,
) -> PackedList[Score] | PackedFile[Score]:
    """Score samples ``lo:hi`` under every protocol, sample by sample; ``advance()`` after each
    sample. ``ahead``: a reader thread decodes the next samples' files (PNG decoding releases the
    GIL) while this one scores; each file is decoded once, in order. ``into``: where the records
    go (default: a new :class:`~medibench._packed.PackedList`, what a worker sends back)."""
    plan = _plan(job, lo, hi)  # made as the reader reaches it: one sample at a time
    read = partial(_read_item, job.root)
    decoded = _read_in_order(read, plan) if ahead else ((item, read(item)) for item in plan)
    per_sample = len(job.protocols)
    out = PackedList() if into is None else into  # pickled: a few hundred bytes a record
    for i, ((sample, proto, preds), files) in enumerate(decoded):
        for pred in preds:
            out.append(score_one(job.root, sample, pred, proto, load_images, None, files))
        if advance is not None and (i + 1) % per_sample == 0:
            advance()
    return out


def _plan(job: _Job, lo: int, hi: int) -> Iterator[tuple]:
    """(sample, protocol, its predictions) for samples ``lo:hi``, protocol after protocol."""
    for sample in job.samples[lo:hi]:
        preds = _predictions(sample, job.index, job.k)
        for proto in job.protocols:
            yield sample, proto, preds


def _read_in_order(
    read: Callable[[tuple], Decoded], plan: Iterable[tuple]
) -> Iterator[tuple[tuple, Decoded]]:
    """Each planned item with ``read`` of it, run by one reader thread that keeps
    ``_READ_AHEAD`` items ahead of the consumer, in plan order."""
    with ThreadPoolExecutor(1, thread_name_prefix="medibench-decode") as reader:
        queued: deque[tuple[tuple, Future[Decoded]]] = deque()
        for item in plan:
            queued.append((item, reader.submit(read, item)))
            if len(queued) > _READ_AHEAD:
                done, future = queued.popleft()
                yield done, future.result()
        while queued:
            done, future = queued.popleft()
            yield done, future.result()


def _read_item(root: Path, item: tuple) -> Decoded:
    """A planned (sample, protocol, predictions)'s files, decoded (:func:`read_ahead`)."""
    sample, proto, preds = item
    paths = [p.path for p in preds if p.path is not None]
    return read_ahead(root, sample, paths, proto, load_images)


# Items decoded ahead of the one being scored.
_READ_AHEAD = 2


def _predictions(sample, index: PredictionIndex, k: int | None) -> list[Prediction]:
    """The sample's predictions of every model that is scored on it (``index.scope``), in the
    record order (model, then k)."""
    preds = []
    for model in index.models:
        if not index.scores(model, sample.sample_id):
            continue
        files = index.files[model].get(sample.sample_id, {})
        ks = range(k) if k is not None else (sorted(files) or [0])
        for j in ks:
            path = files.get(j)
            preds.append(
                Prediction(
                    sample_id=sample.sample_id,
                    model=model,
                    k=j,
                    path=str(path.resolve()) if path else None,
                    status="ok" if path else "error",
                    error=None
                    if path
                    else (index.reason(model, sample.sample_id, j) or f"no output for k={j}"),
                )
            )
    return preds


# --- several processes -----------------------------------------------------------------------


def _score_in_processes(job: _Job, workers: int, progress: bool, console) -> PackedFile[Score]:
    """Score ``job`` in ``workers`` processes, spans of samples handed out as workers free up
    (the spans shrink towards the end so that no worker is left with a long one).

    Where forking is safe (Linux, no other thread in this process) the workers are forked, so
    they start at once, with the job, every module and compiled kernel of this process: the
    samples up to the first with an output are scored here first, which loads what the
    protocols load lazily (numba's SSIM kernel, decoders) once instead of once per worker.
    Elsewhere they are spawned and get the job once each.
    """
    n = len(job.samples)
    fork = _fork_is_safe()
    head = _first_scored(job) + 1 if fork else 0
    spans = _spans(head, n, workers)
    results: dict[int, Sequence[Score]] = {}
    if head:
        results[0] = _score_span(job, 0, head, ahead=False)
    with _ready_to_fork() if fork else nullcontext():
        pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("fork" if fork else "spawn"),
            initializer=_start_worker,
            # A reader thread per worker only where the workers leave cores for them: with as
            # many workers as cores it took CPU from the scoring (miedb@paper, 2 workers on 2
            # cores: 5.59-6.16 s without, 5.82-6.58 s with, bench/score_official.py's data).
            initargs=(job, fork, 2 * workers <= (os.cpu_count() or 1)),
        )
        try:
            # Forked at the first submit, before the pool starts its own threads.
            pending = {pool.submit(_score_in_worker, lo, hi): lo for lo, hi in spans}
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    try:
        with progress_bar(progress, console, "score", n) as advance:
            for _ in range(head):
                advance()
            ends = dict(spans)
            waiting = set(pending)
            while waiting:
                done, waiting = wait_futures(waiting, return_when=FIRST_COMPLETED)
                for fut in done:
                    lo = pending[fut]
                    results[lo] = _span_result(fut, job, lo, ends[lo])
                    for _ in range(lo, ends[lo]):
                        advance()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return PackedFile(r for lo in sorted(results) for r in results[lo])


def _span_result(fut: Future[Sequence[Score]], job: _Job, lo: int, hi: int) -> Sequence[Score]:
    """A span's records; when a worker died (killed, out of memory), an error naming them."""
    try:
        return fut.result()
    except BrokenProcessPool as exc:
        ids = [s.sample_id for s in job.samples[lo:hi]]
        raise RuntimeError(
            "a scoring worker process ended abruptly (killed, or out of memory?) before samples "
            f"{ids[0]}..{ids[-1]} were scored; no records were returned: score again with fewer "
            "--workers"
        ) from exc


def _first_scored(job: _Job) -> int:
    """The position of the first sample with an output file (of the first ``_MAX_HEAD``)."""
    for i, sample in enumerate(job.samples[:_MAX_HEAD]):
        if any(job.index.files[m].get(sample.sample_id) for m in job.index.models):
            return i
    return 0


_MAX_HEAD = 16


def _spans(lo: int, n: int, workers: int) -> list[tuple[int, int]]:
    """``[lo, n)`` cut into spans that shrink as the samples left do: a third of a worker's
    share of the rest each (at most ``_MAX_SPAN``, at least ``_MIN_SPAN``)."""
    spans = []
    while lo < n:
        size = math.ceil((n - lo) / (3 * workers))
        hi = min(n, lo + max(_MIN_SPAN, min(_MAX_SPAN, size)))
        spans.append((lo, hi))
        lo = hi
    return spans


_MIN_SPAN, _MAX_SPAN = 2, 64


def _fork_is_safe() -> bool:
    """Forking copies only the calling thread: safe where no other thread can hold a lock the
    workers would need (and macOS's system libraries are not fork-safe)."""
    return (
        sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    )


@contextmanager
def _ready_to_fork() -> Iterator[None]:
    """This process made ready to be forked, as it was after.

    OpenCV at one thread (a forked child must not reconfigure the thread pool it inherits:
    ``cv2.setNumThreads`` there can hang), and the objects so far frozen out of the garbage
    collector, so that the children's collections do not touch, and copy, every page of them.
    """
    cv2 = sys.modules.get("cv2")
    before = cv2.getNumThreads() if cv2 is not None else None
    if cv2 is not None:
        cv2.setNumThreads(1)
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if cv2 is not None and before is not None:
            cv2.setNumThreads(before)


_JOB: _Job | None = None
_AHEAD = True


def _start_worker(job: _Job, forked: bool, ahead: bool = True) -> None:
    """A worker's setup: the job, whether it decodes ahead on a reader thread, one thread for
    OpenCV (and torch, when loaded), and the allocator tuned for image-sized arrays."""
    global _JOB, _AHEAD
    _JOB, _AHEAD = job, ahead
    _tune_malloc()
    if not forked or "cv2" not in sys.modules:
        import cv2

        cv2.setNumThreads(1)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _score_in_worker(lo: int, hi: int) -> Sequence[Score]:
    if _JOB is None:
        raise RuntimeError("a scoring worker got a span before its job (_start_worker)")
    return _score_span(_JOB, lo, hi, ahead=_AHEAD)


def _tune_malloc() -> bool:
    """glibc's allocator in a worker: arrays of up to 32 MiB from the heap and up to 512 MiB
    of freed memory kept, so that each output's work arrays are not mapped, faulted in and
    unmapped again (miedb@paper: 4.6 of 17 CPU seconds were the kernel's, 0.6 with this).

    In the workers (processes of this module's own) and in ``medibench score``'s own process,
    not in a library caller's; never where ``MALLOC_*_`` environment variables already say how.
    Returns whether it was applied.
    """
    if not sys.platform.startswith("linux") or any(v in os.environ for v in _MALLOC_ENV):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc's; musl has none
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, 512 << 20) and mallopt(_M_MMAP_THRESHOLD, 32 << 20))


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>
_MALLOC_ENV = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_")
