"""The items the stages work on, and doing one: the lowest module of ``runs/``.

A generate :class:`Task` becomes an :class:`Outcome` (a written file or its error text, a
:class:`Refusal` when the model refused); :func:`score_one` turns one prediction into one
``Score``. The executors (:mod:`._executors`, :mod:`._ray`) and the runner (:mod:`._runner`)
all build on these, so none of them imports another to share them.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medibench.datasets import SampleImages
from medibench.io import read_image
from medibench.models._errors import ContentRefusedError, CostBudgetSpent
from medibench.protocols._base import NOT_JUDGED, with_defaults
from medibench.samples import Prediction, Sample, Score

__all__ = [
    "NotStarted",
    "Outcome",
    "Decoded",
    "Refusal",
    "Task",
    "batches",
    "check_output",
    "describe",
    "edit_one",
    "edit_tasks",
    "read_ahead",
    "read_input",
    "score_one",
]


@dataclass(frozen=True)
class Task:
    """One output to make: draw ``k`` of ``sample``, with its derived ``seed``, and the
    in-context demonstrations to show first (``demos``, pool samples in order; none: a plain
    call, :mod:`medibench.runs._icl`)."""

    sample: Sample
    k: int
    seed: int
    demos: tuple[Sample, ...] = ()

    @property
    def filename(self) -> str:
        return f"{self.sample.sample_id}_{self.k}.png"


class Refusal(str):
    """The error text of an edit the model refused (``ContentRefusedError``): stored as
    ``refused``, not asked again on a plain re-run. A ``str``, so it travels like any error."""

    __slots__ = ()


class NotStarted(str):
    """The text of an item whose paid call was not sent: the run's cost budget is spent
    (:class:`~medibench.models.api.CostBudgetSpent`). No row is stored: the item stays to do,
    and a later run with a larger ``--max-cost`` makes it."""

    __slots__ = ()


@dataclass(frozen=True)
class Outcome:
    """What became of a task: the written file, or the error that stopped it."""

    task: Task
    path: Path | None
    error: str | None
    elapsed_s: float


def batches(tasks: Sequence[Task], size: int) -> Iterable[list[Task]]:
    """``tasks`` cut into batches of at most ``size`` whose inputs have the same size: a model's
    ``edit_batch`` then always gets full batches of one shape, however the dataset mixes sizes.

    Each input's size comes from its file's header (nothing is decoded); sizes appear in the
    order the tasks first meet them, and tasks keep their order within a size. An input whose
    header cannot be read (a DICOM, a missing file: its error is recorded when it is read) goes
    with the others that cannot, and ``edit_tasks`` still groups them by decoded shape.
    """
    if size <= 1:  # one at a time, each task made as it is taken
        return ([t] for t in tasks)
    sizes: dict[str, tuple[int, int] | None] = {}  # k draws of a sample share one input
    buckets: dict[tuple[int, int] | None, list[Task]] = {}
    for task in tasks:
        path = task.sample.input
        if path not in sizes:
            sizes[path] = _header_size(path)
        buckets.setdefault(sizes[path], []).append(task)
    return [b[i : i + size] for b in buckets.values() for i in range(0, len(b), size)]


def _header_size(path: str) -> tuple[int, int] | None:
    """``(width, height)`` from an image file's header, or None when Pillow cannot read it."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.size
    except Exception:  # the read error, if any, is the sample's when its input is decoded
        return None


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
    batched = batched and not any(t.demos for t in tasks)  # examples go one request each
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
            results[i] = edit_one(model, tasks[i], images[i])  # type: ignore[arg-type]
    return results  # type: ignore[return-value]


def edit_one(model, task: Task, image: np.ndarray) -> tuple[Any, str | None, float]:
    """``model.edit`` on one task (``edit_with_examples`` when it has demonstrations):
    ``(image, None, seconds)`` or ``(None, error, seconds)``."""
    t0 = time.perf_counter()
    try:
        if task.demos:
            from medibench.runs._demos import load_examples

            examples = load_examples(task.demos)
            out = model.edit_with_examples(image, task.sample.instruction, examples, seed=task.seed)
        else:
            out = model.edit(image, task.sample.instruction, seed=task.seed)
    except Exception as exc:  # recorded on the sample; the run goes on
        return None, failure(exc), time.perf_counter() - t0
    return out, None, time.perf_counter() - t0


def failure(exc: BaseException) -> str:
    """The recorded text of an item's failure; a :class:`Refusal` for a refused edit, a
    :class:`NotStarted` for a call the cost budget held back."""
    text = describe(exc)
    if isinstance(exc, CostBudgetSpent):
        return NotStarted(text)
    return Refusal(text) if isinstance(exc, ContentRefusedError) else text


def read_input(task: Task) -> np.ndarray | str:
    """The task's input image (uint8 RGB), or the error text when it cannot be read."""
    try:
        return read_image(task.sample.input, mode="rgb")
    except Exception as exc:  # an unreadable input is that sample's failure
        return describe(exc)


def check_output(image: Any) -> np.ndarray:
    """A model's output as an array; ``ValueError`` unless uint8 (H, W), (H, W, 3) or (H, W, 4)."""
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] > 4):
        raise ValueError(
            f"the model returned {arr.dtype} pixels of shape {arr.shape}; expected uint8 "
            "(H, W), (H, W, 3) or (H, W, 4)"
        )
    return arr


@dataclass
class Decoded:
    """A sample's files read ahead (:func:`read_ahead`): the images and each prediction's array,
    or the exception reading it raised, re-raised by :func:`score_one` where it would have been."""

    images: SampleImages | BaseException
    predictions: dict[Path, np.ndarray | BaseException]

    def take_images(self) -> SampleImages:
        if isinstance(self.images, BaseException):
            raise self.images
        return self.images

    def take_prediction(self, path: Path, protocol) -> np.ndarray:
        got = self.predictions.get(path)
        if got is None:
            return protocol.read_prediction(path)
        if isinstance(got, BaseException):
            raise got
        return got


def read_ahead(
    root: Path,
    sample: Sample,
    paths: Sequence[str],
    protocol,
    load_images: Callable[[Sample], SampleImages] | None = None,
) -> Decoded:
    """Decode a sample's images and the predictions at ``paths`` once, for :func:`score_one`
    (run in a reader thread, so decoding overlaps the scoring of the sample before)."""
    protocol = with_defaults(protocol, load_images=load_images)
    images: SampleImages | BaseException
    try:
        images = protocol.load_images(sample)
    except Exception as exc:  # re-raised, and recorded, by score_one
        images = exc
    predictions: dict[Path, np.ndarray | BaseException] = {}
    for text in paths:
        path = Path(text) if Path(text).is_absolute() else root / text
        try:
            predictions[path] = protocol.read_prediction(path)
        except Exception as exc:
            predictions[path] = exc
    return Decoded(images, predictions)


def score_one(
    root: Path,
    sample: Sample,
    pred: Prediction,
    protocol,
    load_images: Callable[[Sample], SampleImages] | None = None,
    cache: dict[str, Any] | None = None,
    decoded: Decoded | None = None,
) -> Score:
    """Score one prediction; failures become a ``Score`` with status missing or error.

    The protocol's hooks read the files (:class:`~medibench.protocols.ScoringProtocol`:
    ``load_images``, ``read_prediction``; ``load_images`` here stands in for a protocol without
    its own). Judge-based metrics the protocol declares are ``None`` with
    :data:`~medibench.protocols.NOT_JUDGED` as the reason, for the samples they apply to.
    ``cache`` keeps the last sample's decoded images (predictions come sorted by sample);
    ``decoded``, the sample's files already read (:func:`read_ahead`), replaces both reads.
    """
    protocol = with_defaults(protocol, load_images=load_images)
    base = dict(
        sample_id=sample.sample_id,
        model=pred.model,
        k=pred.k,
        protocol=protocol.name,
        protocol_version=protocol.version,
    )
    nulls: dict[str, float | None] = {m: None for m in protocol.metric_names}
    if pred.status != "ok" or pred.path is None:
        return Score(
            **base,
            metrics=nulls,
            status="missing",
            error=f"no prediction: {pred.error or 'not generated'}",
        )
    try:
        if decoded is not None:
            images = decoded.take_images()
        elif cache is not None and sample.sample_id in cache:
            images = cache[sample.sample_id]
        else:
            images = protocol.load_images(sample)
            if cache is not None:
                cache.clear()
                cache[sample.sample_id] = images
        path = Path(pred.path)
        path = path if path.is_absolute() else root / path
        image = (
            decoded.take_prediction(path, protocol)
            if decoded is not None
            else protocol.read_prediction(path)
        )
        res = protocol.score(sample, images, image)
        if res.failure is not None:
            return Score(**base, metrics=nulls, status="missing", error=res.failure)
        applies = protocol.applicable_metrics(sample)
        relevant = None if applies is None else set(applies)
        for name in protocol.judged_metrics:
            if name not in res.metrics and (relevant is None or name in relevant):
                res.missing(name, NOT_JUDGED)
    except Exception as exc:
        return Score(**base, metrics=nulls, status="error", error=describe(exc))
    return Score(
        **base,
        metrics=res.metrics,
        status="ok",
        error=res.error,
        reasons=dict(res.reasons),
        notes=tuple(res.notes),
    )


def describe(exc: BaseException) -> str:
    """One line for a failure: ``Type: message (at file.py:line)``."""
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    loc = f" (at {Path(where[0].filename).name}:{where[0].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{loc}"
