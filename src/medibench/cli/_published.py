"""What ``score`` and ``judge`` share for model outputs that already exist on disk: finding them
(:func:`find_outputs`) and keeping them as a run folder (:func:`published_run`), so the judges,
``report`` and ``compare`` work on a benchmark's published outputs as on any run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from medibench._console import labelled
from medibench.cli._app import err, fail, load, open_dataset

__all__ = ["find_outputs", "published_run"]


def find_outputs(ds: Any, predictions: Path, model: list[str] | None) -> tuple[Any, Any]:
    """``(dataset, PredictionIndex)`` of the outputs in ``predictions`` (one sub-folder per model,
    or one model's files named by ``model``), saying on stderr what the layout could not read
    and which outputs name no sample. No output at all is a one-line error (exit 2)."""
    widen = getattr(ds, "for_predictions", None)  # MedGEN: the formats its answer files need
    if widen is not None and predictions.is_dir():
        ds, said = load(widen, predictions)
        for line in said:
            err.print(f"[yellow]predictions:[/] {escape(line)}")
    flat = predictions.is_dir() and any(p.suffix.lower() == ".png" for p in predictions.iterdir())
    if flat and model and len(model) > 1:
        fail(f"{predictions} holds one model's files: give at most one --model (its name)")
    index = load(
        ds.find_predictions,
        predictions,
        models=None if flat else model,
        model=model[0] if flat and model else None,
    )
    if not index.models:
        fail(f"no model outputs found in {predictions}")
    for problem in index.problems:
        err.print(f"[yellow]predictions:[/] {escape(problem)}")
    if index.unknown:
        names = ", ".join(p.name for _, p in index.unknown[:5])
        more = f" and {len(index.unknown) - 5} more" if len(index.unknown) > 5 else ""
        err.print(
            f"[yellow]ignored {len(index.unknown)} output(s) for ids not in the benchmark:[/] "
            f"{names}{more}"
        )
    return ds, index


def published_run(
    run_dir: Path,
    *,
    dataset: str,
    predictions: Path,
    model: list[str] | None = None,
    dataset_option: list[str] | None = None,
    download: bool = False,
    protocol: list[str] | None = None,
    k: int | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> None:
    """Make (or add to) the run folder ``run_dir`` from the outputs in ``predictions``: the
    dataset's samples, a prediction per output file (read where it lies) and the score rows of
    each protocol (default: the dataset's), as :func:`medibench.runs._published.import_published`
    does. The caller holds the folder's lock. A folder of another run is a one-line error."""
    from medibench.protocols import load_protocol
    from medibench.runs import RunStoreError
    from medibench.runs._published import check_published_folder, import_published
    from medibench.runs._run import summarise

    if not predictions.exists():
        fail(f"--predictions {predictions}: no such file or folder")
    try:
        check_published_folder(run_dir, predictions)
    except RunStoreError as exc:
        fail(str(exc))
    ds = open_dataset(dataset, download=download, options=dataset_option)
    protos = [load(load_protocol, p) for p in (protocol or ds.default_protocols)]
    ds, index = find_outputs(ds, predictions, model)
    try:
        store, reports = import_published(
            run_dir,
            dataset,
            ds,
            index,
            protos,
            predictions=predictions,
            k=k or ds.expected_k,
            limit=limit,
            progress=progress,
            console=err,
        )
    except RunStoreError as exc:
        fail(str(exc))
    with store:
        n = len(store.predictions(status="ok"))
    err.print(
        labelled(
            "published",
            f"{run_dir}: {n} published output(s) of {len(index.models)} model(s) "
            f"({', '.join(index.models)}) from {predictions}",
            "dim",
        )
    )
    for label, rep in reports:
        summarise(rep, label, err)
