"""Scoring model outputs that already exist on disk (published outputs, another tool's run).

:func:`score_predictions` scores every (model, sample, k) of a :class:`PredictionIndex` under
each protocol, one :class:`~medibench.samples.Score` per line of the official layout: a missing
output is a ``missing`` record and an unreadable one an ``error`` record, never a 0.
"""

from __future__ import annotations

import multiprocessing
import warnings
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor

from rich.console import Console

from medibench._progress import progress_bar
from medibench.datasets import PredictionIndex, load_images
from medibench.runs._runner import score_one
from medibench.runs._work import Decoded, read_ahead
from medibench.samples import Prediction, Score

__all__ = ["score_predictions"]


def score_predictions(
    dataset,
    index: PredictionIndex,
    protocols: Sequence,
    *,
    k: int | None = None,
    workers: int = 1,
    progress: bool = True,
    console: Console | None = None,
) -> list[Score]:
    """Score the outputs in ``index`` for every sample of ``dataset`` under each protocol.

    ``k`` is the number of outputs expected per sample (records for the absent ones are
    ``missing``); ``None`` scores what is there (a sample with none gets one ``missing`` record
    for k = 0). Records come sample by sample, so each sample's images are decoded once per
    protocol. ``workers > 1`` scores chunks of samples in that many processes (one OpenCV
    thread each); the records and their order are the same as with one worker.
    """
    samples = list(dataset)
    _warn_empty_models(dataset, index, len(samples), console)
    chunks = [samples[i : i + _CHUNK] for i in range(0, len(samples), _CHUNK)]
    jobs = [(dataset.root, chunk, index, list(protocols), k) for chunk in chunks]
    records: list[Score] = []
    with progress_bar(progress, console, "score", len(samples)) as advance:
        if workers <= 1 or len(chunks) <= 1:
            for job in jobs:
                records += _score_chunk(*job)
                for _ in job[1]:
                    advance()
        else:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_one_thread) as pool:
                results = pool.map(_score_chunk, *zip(*jobs, strict=True))
                for job, got in zip(jobs, results, strict=True):
                    records += got
                    for _ in job[1]:
                        advance()
    # One protocol after the other, as a single worker writes them.
    order = {(p.name, p.version): i for i, p in enumerate(protocols)}
    records.sort(key=lambda r: order[(r.protocol, r.protocol_version)])
    return records


_CHUNK = 16


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
            console.print(f"[yellow]warning:[/] {text}")
        else:
            warnings.warn(text, stacklevel=3)


def _score_chunk(root, samples, index: PredictionIndex, protocols, k) -> list[Score]:
    """Score a chunk of samples, a reader thread decoding the next samples' files (PNG decoding
    releases the GIL) while this one scores: each file is decoded once, in order."""
    out: list[Score] = []
    for proto in protocols:
        plan = [(sample, _predictions(sample, index, k)) for sample in samples]
        for (sample, preds), decoded in zip(plan, _read_in_order(root, plan, proto), strict=True):
            for pred in preds:
                out.append(score_one(root, sample, pred, proto, load_images, None, decoded))
    return out


def _read_in_order(root, plan: list[tuple], proto) -> Iterator[Decoded]:
    """Each planned sample's files decoded (:func:`read_ahead`) by one reader thread that keeps
    ``_READ_AHEAD`` samples ahead of the consumer, in plan order."""
    with ThreadPoolExecutor(1, thread_name_prefix="medibench-decode") as reader:
        ahead: deque[Future[Decoded]] = deque()
        for sample, preds in plan:
            paths = [p.path for p in preds if p.path is not None]
            ahead.append(reader.submit(read_ahead, root, sample, paths, proto, load_images))
            if len(ahead) > _READ_AHEAD:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


# Samples decoded ahead of the one being scored.
_READ_AHEAD = 2


def _predictions(sample, index: PredictionIndex, k: int | None) -> list[Prediction]:
    """The sample's predictions of every model, in the record order (model, then k)."""
    preds = []
    for model in index.models:
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


def _one_thread() -> None:
    import cv2

    cv2.setNumThreads(1)
