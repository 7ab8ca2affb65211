"""The stage runner: ``generate`` then ``score``, each resumable and failure-tolerant.

A run directory holds ``run.sqlite`` and ``outputs/<model folder>/<sample_id>_<k>.png`` (the
folder: :func:`~medibench.runs.output_folder`). Each finished (model, sample, k) is one
transaction written after its PNG is atomically in place; re-running a stage skips finished rows;
a per-sample failure is recorded with its error and the run goes on. A refused edit (the model
raised ``ContentRefusedError``) is recorded as ``refused`` and asked again only on request. A
full disk stops the stage with a :class:`~medibench.io.DiskFullError`: what finished is stored.
"""

from __future__ import annotations

import platform
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

from rich.console import Console

from medibench._identity import output_folder, seed_for
from medibench._packed import MadeWhenTaken, PackedList
from medibench._progress import progress_bar
from medibench.datasets import SampleImages
from medibench.runs._executors import LocalExecutor
from medibench.runs._icl import TOO_FEW
from medibench.runs._store import RunStore, RunStoreError
from medibench.runs._work import NotStarted, Refusal, Task, score_one
from medibench.samples import Prediction, Sample

__all__ = [
    "StageReport",
    "check_same_run",
    "generate",
    "record_environment",
    "score",
    "score_one",
    "seed_for",
]

_PACKAGES = (
    "medibench",
    "numpy",
    "scipy",
    "scikit-image",
    "opencv-python-headless",
    "pillow",
    "pydicom",
    "nibabel",
    "torch",
    "diffusers",
)


@dataclass
class StageReport:
    """What one stage did: counts of done, skipped and failed items, and the failures.

    ``refused``: items the model refused this time; ``skipped_refused``: items skipped because
    it refused them before (``retry_refused`` asks again); ``not_started``: items whose paid
    call the run's cost budget held back (no row stored: a later run makes them);
    ``few_demos``: items with fewer eligible in-context demonstrations than K, by what they got
    (``"random"``, ``"fewer"``, or ``"refuse"``: not made), ``few_demos_k`` that K and
    ``few_demos_why`` the first reason; ``pixel_copies``: items whose pool holds a copy of their
    image under another id (never shown to them)."""

    stage: str
    done: int = 0
    skipped: int = 0
    failed: int = 0
    refused: int = 0
    skipped_refused: int = 0
    not_started: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    few_demos: dict[str, int] = field(default_factory=dict)
    few_demos_k: int = 0
    few_demos_why: str | None = None
    pixel_copies: int = 0

    def short_of_demos(self, k: int, fallback: str, why: str | None = None) -> None:
        """Count one item with fewer eligible demonstrations than ``k`` that took
        ``fallback`` (``"refuse"``: not made, ``why`` saying why)."""
        self.few_demos[fallback] = self.few_demos.get(fallback, 0) + 1
        self.few_demos_k = k
        self.few_demos_why = self.few_demos_why or why

    def count(self, item: str, error: str | None) -> Literal["ok", "error", "refused"]:
        """Count one item a generate stage made (``error``: ``None``, a :class:`Refusal` or a
        failure's text) and return its prediction status. A refused or failed item's error
        joins ``failures``; it is stored and the run goes on."""
        if error is None:
            self.done += 1
            return "ok"
        self.failures.append((item, str(error)))
        if isinstance(error, Refusal):  # a plain re-run does not ask again
            self.refused += 1
            return "refused"
        self.failed += 1
        return "error"


def check_same_run(store: RunStore, identity: dict[str, Any]) -> None:
    """Refuse (``RunStoreError``) to add to a run made with another ``identity`` (its dataset
    spec and seed, as recorded in its config); a run with none recorded takes ``identity``.

    Every stage that writes into an existing run folder calls it before writing."""
    previous = store.get_meta("config")
    if previous is None:
        store.set_meta("config", dict(identity))
        return
    for key, value in identity.items():
        if key in previous and previous[key] != value:
            raise RunStoreError(
                f"{store.run_dir} was made with {key}={previous[key]!r}, not {value!r}; use "
                "another --out folder for a different run"
            )
    missing = {k: v for k, v in identity.items() if k not in previous}
    if missing:
        store.set_meta("config", {**previous, **missing})


def record_environment(store: RunStore, config: dict[str, Any]) -> None:
    """Store the run config (checking it matches an existing run) and the environment."""
    previous = store.get_meta("config")
    if previous is not None:
        check_same_run(store, {key: config.get(key) for key in ("dataset", "seed")})
        config = {
            **previous,
            **config,
            "models": sorted(set(previous.get("models", [])) | set(config.get("models", []))),
        }
    store.set_meta("config", config)
    versions = {}
    for pkg in _PACKAGES:
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    store.set_meta("packages", versions)
    store.set_meta("python", platform.python_version())
    if store.get_meta("created_at") is None:
        store.set_meta("created_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def generate(
    store: RunStore,
    samples: Sequence[Sample],
    model,
    *,
    model_name: str,
    k: int = 1,
    seed: int = 0,
    only_failed: bool = False,
    retry_refused: bool = False,
    progress: bool = True,
    console: Console | None = None,
    executor=None,
    demonstrations=None,
) -> StageReport:
    """Run ``model`` on every (sample, k) not yet done; write PNGs and prediction rows. An
    answering model (``answer`` / ``generate``) writes text predictions instead
    (:mod:`medibench.runs._answers`). ``demonstrations`` (an
    :class:`~medibench.runs._icl.IclEntry`) chooses and stores each item's in-context
    demonstrations first; ``None``: none are shown.

    A plain re-run asks again for what failed, not for what the model refused;
    ``only_failed`` asks only for failed and refused items, ``retry_refused`` for refused ones
    too. ``executor`` (default: a one-worker :class:`~medibench.runs.LocalExecutor`) decides
    where the model runs; this thread writes every prediction row, after its PNG is in place.

    Raises:
        RunStoreError: another model's outputs are in this model's folder.
        DiskFullError: the disk is full (finished items are stored; re-run to resume).
    """
    from medibench.models.compose import is_answering_model

    report = StageReport("generate")
    todo = items_to_make(store, samples, model_name, k, only_failed, retry_refused, report)
    tasks: Sequence[Task] = TaskList(samples, todo, seed)
    if demonstrations is not None:
        from medibench.runs._demos import attach_demonstrations

        tasks = attach_demonstrations(store, list(tasks), demonstrations, model_name, report)
    if is_answering_model(model):  # a VLM or generator: text (+ image) predictions
        from medibench.runs._answers import generate_answers

        workers = getattr(executor, "workers", None)
        return generate_answers(store, tasks, model, model_name, report, progress, console, workers)
    folder = output_folder(model_name)
    _check_folder_is_its_own(store, folder, model_name)
    out_dir = store.run_dir / "outputs" / folder
    _clean_stale_temp_files(out_dir)
    executor = executor or LocalExecutor()
    with progress_bar(progress, console, f"generate {model_name}", len(tasks)) as advance:
        for out in executor.generate(model, tasks, out_dir):
            if isinstance(out.error, NotStarted):  # the cost budget held it back: still to do
                report.not_started += 1
                advance()
                continue
            status = report.count(f"{out.task.sample.sample_id}_{out.task.k}", out.error)
            pred = Prediction(
                sample_id=out.task.sample.sample_id,
                model=model_name,
                k=out.task.k,
                path=str(out.path.relative_to(store.run_dir)) if out.path else None,
                seed=out.task.seed,
                status=status,
                error=None if out.error is None else str(out.error),
                elapsed_s=out.elapsed_s,
            )
            store.put_prediction(pred)
            advance()
    return report


def items_to_make(
    store: RunStore,
    samples: Sequence[Sample],
    model_name: str,
    k: int,
    only_failed: bool,
    retry_refused: bool,
    report: StageReport,
) -> list[tuple[int, int]]:
    """The items a generate stage makes (see :func:`generate`), as (position in ``samples``,
    k) pairs, counting the skipped ones in ``report``."""
    done = store.prediction_keys(model_name, status="ok")
    failed = store.prediction_keys(model_name, status="error")
    failed |= store.prediction_keys(model_name, status=TOO_FEW)
    refused = store.prediction_keys(model_name, status="refused")
    again = failed | refused
    todo = []
    for i, sid in enumerate(_ids(samples)):
        for j in range(k):
            key = (sid, j)
            if key in done or (only_failed and key not in again):
                report.skipped += 1
            elif key in refused and not (only_failed or retry_refused):
                report.skipped += 1
                report.skipped_refused += 1
            else:
                todo.append((i, j))
    return todo


class TaskList(MadeWhenTaken[Task]):
    """The tasks of a generate stage, each made when it is taken: (position in ``samples``,
    k) pairs and the run seed, not a live :class:`Task` (with its sample) per item."""

    def __init__(self, samples: Sequence[Sample], items: list[tuple[int, int]], seed: int):
        self._samples, self._seed = samples, seed
        self._where = array("q", (i for i, _ in items))
        self._k = array("q", (j for _, j in items))

    def __len__(self) -> int:
        return len(self._where)

    def _take(self, index: int) -> Task:
        sample, k = self._samples[self._where[index]], self._k[index]
        return Task(sample, k, seed_for(self._seed, sample.sample_id, k))


def _ids(samples: Sequence[Sample]) -> Iterable[str]:
    # A dataset lists its ids without rebuilding its samples.
    ids = getattr(samples, "sample_ids", None)
    return ids() if callable(ids) else (s.sample_id for s in samples)


def score(
    store: RunStore,
    samples: Sequence[Sample],
    protocol,
    *,
    load_images: Callable[[Sample], SampleImages] | None = None,
    models: Iterable[str] | None = None,
    only_failed: bool = False,
    progress: bool = True,
    console: Console | None = None,
    executor=None,
) -> StageReport:
    """Score every prediction not yet scored by ``protocol`` (name and version).

    ``executor`` (default: this process, one after another) decides where scoring runs; this
    thread writes every score row. The protocol's hooks read the files; ``load_images`` stands
    in for a protocol without its own (default :func:`medibench.datasets.load_images`).
    """
    report = StageReport("score")
    by_id = _by_id(samples)
    wanted = set(models) if models is not None else None
    scored = store.score_keys(protocol.name, protocol.version)
    ok = store.score_keys(protocol.name, protocol.version, status="ok")
    todo: PackedList[Prediction] = (
        PackedList()
    )  # each prediction pickled: a few hundred bytes, not a live record
    for pred in store.iter_predictions():
        key = (pred.model, pred.sample_id, pred.k)
        if (wanted is not None and pred.model not in wanted) or pred.sample_id not in by_id:
            continue
        if (only_failed and key in ok) or (not only_failed and key in scored):
            report.skipped += 1
            continue
        todo.append(pred)
    todo.sort(key=lambda p: p.sample_id)  # decode each sample's images once
    executor = executor or LocalExecutor()
    with progress_bar(
        progress, console, f"score {protocol.name}@{protocol.version}", len(todo)
    ) as advance:
        for result in executor.score(store.run_dir, by_id, todo, protocol, load_images):
            if result.status == "error":
                report.failed += 1
                item = f"{result.model}/{result.sample_id}_{result.k}"
                report.failures.append((item, result.error))
            else:
                report.done += 1
            store.put_score(result)
            advance()
    return report


def _by_id(samples: Sequence[Sample]) -> Mapping[str, Sample]:
    # A dataset looks its samples up by id without holding them rebuilt.
    by_id = getattr(samples, "by_id", None)
    return by_id() if callable(by_id) else {s.sample_id: s for s in samples}


def _check_folder_is_its_own(store: RunStore, folder: str, model_name: str) -> None:
    # Names map to folders injectively up to a 32-bit hash; a run can also hold paths written by
    # an older naming. Either way, never write into a folder that holds another model's files.
    prefix = f"outputs/{folder}/"
    others = sorted(
        {p.model for p in store.iter_predictions() if p.path and p.path.startswith(prefix)}
        - {model_name}
    )
    if others:
        raise RunStoreError(
            f"{store.run_dir / 'outputs' / folder} already holds the outputs of model "
            f"{others[0]!r}; give {model_name!r} another name"
        )


def _clean_stale_temp_files(folder: Path) -> None:
    # A killed run can leave the temp file of the PNG it was writing; it is never a result.
    if folder.is_dir():
        for tmp in folder.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
