"""A run folder made from outputs that already exist on disk (a benchmark's published model
outputs: MedEBench's ``generated_images/``, MieDB-100k's ``eval_results/``, MedGEN-Bench's
inference files), so that what works on a run folder (``judge``, ``report``, ``compare``) works
on them too.

:func:`import_published` records the dataset's samples, one prediction per output file (its
absolute path: nothing is copied) and, per protocol, the same score rows ``medibench score``
writes. It is idempotent: a re-import of the same folder adds only what is new (an output that
appeared, a protocol not yet scored) and keeps every judged value already stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from medibench.datasets import PredictionIndex
from medibench.runs._folder import _predictions
from medibench.runs._runner import StageReport, record_environment, score
from medibench.runs._store import RunStore, RunStoreError

__all__ = ["PUBLISHED_KEY", "check_published_folder", "import_published"]

# The run config's key naming the folder the outputs were read from (absent for `medibench run`).
PUBLISHED_KEY = "predictions"


def import_published(
    run_dir: Path,
    dataset_spec: str,
    dataset: Any,
    index: PredictionIndex,
    protocols: Sequence[Any],
    *,
    predictions: Path,
    k: int | None,
    limit: int | None = None,
    progress: bool = True,
    console: Console | None = None,
) -> tuple[RunStore, list[tuple[str, StageReport]]]:
    """Create (or add to) the run folder ``run_dir`` from the outputs in ``index`` (found in
    ``predictions``) for the first ``limit`` samples of ``dataset`` (opened from
    ``dataset_spec``), scored by each of ``protocols``.

    ``k`` outputs are expected per sample (an absent one is an ``error`` prediction whose score
    rows are ``missing``, as ``medibench score`` writes them); ``None`` keeps what is there.
    Refuses (``RunStoreError``) a folder made by ``medibench run`` or from another dataset or
    outputs folder. Returns the open store and one ``(protocol, report)`` per protocol.
    """
    source = str(Path(predictions).resolve())
    samples = list(dataset)[:limit]
    store = RunStore(run_dir)
    try:
        _check_folder(store, source)
        record_environment(
            store,
            {
                "dataset": dataset_spec,
                "models": index.models,
                "k": k,
                "limit": limit,
                "seed": None,  # made by others: no seed of ours
                "protocols": {p.name: p.version for p in protocols},
                PUBLISHED_KEY: source,
            },
        )
        store.put_samples(samples)
        stored = {(p.model, p.sample_id, p.k): p for p in store.predictions()}
        for sample in samples:
            for pred in _predictions(sample, index, k):
                old = stored.get((pred.model, pred.sample_id, pred.k))
                # A new or changed output replaces the old row (and its scores); the same one
                # keeps its scores and judged values.
                if old is None or (old.path, old.status, old.error) != (
                    pred.path,
                    pred.status,
                    pred.error,
                ):
                    store.put_prediction(pred)
        reports = [
            (
                f"{proto.name}@{proto.version}",
                score(store, samples, proto, progress=progress, console=console),
            )
            for proto in protocols
        ]
    except BaseException:
        store.close()
        raise
    return store, reports


def check_published_folder(run_dir: Path, predictions: Path) -> None:
    """Refuse (``RunStoreError``) to keep the outputs in ``predictions`` in ``run_dir`` when it
    holds a run made by ``medibench run`` or from another outputs folder; a new folder passes."""
    if not (Path(run_dir) / RunStore.FILENAME).is_file():
        return
    with RunStore.open_existing(run_dir) as store:
        _check_folder(store, str(Path(predictions).resolve()))


def _check_folder(store: RunStore, source: str) -> None:
    previous = store.get_meta("config")
    if previous is not None and PUBLISHED_KEY not in previous:
        raise RunStoreError(
            f"{store.run_dir} holds a run made by `medibench run`, not one made from published "
            "outputs; give another folder for them"
        )
    if previous is not None and previous[PUBLISHED_KEY] != source:
        raise RunStoreError(
            f"{store.run_dir} was made from the outputs in {previous[PUBLISHED_KEY]}, not "
            f"{source}; give another folder for these"
        )
