"""``medibench score`` (existing model outputs, no run folder) and ``medibench export``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from medibench.cli import _options as opt  # the one option vocabulary (docs/cli.md)
from medibench.cli._app import (
    console,
    err,
    fail,
    load,
    open_dataset,
    print_summary,
    write_summary,
)


def score(
    dataset: opt.DatasetOption,
    predictions: opt.PredictionsOption,
    out: Annotated[Path, typer.Option(help="score records, one JSON object per line")],
    download: opt.DownloadOption = False,
    dataset_option: opt.DatasetOptionsOption = None,
    protocol: opt.ProtocolsOption = None,
    model: Annotated[
        list[str] | None,
        typer.Option(help="models to score (default: all), or the name of a one-model folder"),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(min=1, help="outputs expected per sample (default: the benchmark's)"),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="only the first N samples of the dataset")
    ] = None,
    csv_out: opt.CsvOption = None,
    json_out: opt.JsonOption = None,
    by: Annotated[
        list[str] | None,
        typer.Option(
            help="group the summary by these sample fields (perspective, task, region, "
            "modality, metadata.KEY; repeatable; default: the protocol's)"
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="score in this many processes (same records)")
    ] = 1,
    progress: opt.ProgressOption = True,
    features: Annotated[
        list[str] | None,
        typer.Option(
            "--features",
            help="feature extractor NAME:PATH (repeatable; docs/analysis.md): inception:PT_FILE "
            "fills FID/KID in the summaries, lpips-alex:DIR and rad-dino:DIR (or dinov2:, "
            "clip:, hf:) fill medgen@code's lpips and embedding_similarity",
        ),
    ] = None,
) -> None:
    """Score existing model outputs; a missing output is a 'missing' record, never a 0."""
    from medibench.io import atomic_write_text
    from medibench.protocols import load_protocol
    from medibench.runs import score_predictions

    ds = open_dataset(dataset, download=download, options=dataset_option)
    widen = getattr(ds, "for_predictions", None)  # MedGEN: the formats its answer files need
    if widen is not None and predictions.is_dir():
        ds, said = load(widen, predictions)
        for line in said:
            err.print(f"[yellow]predictions:[/] {escape(line)}")
    protos = [load(load_protocol, p) for p in (protocol or ds.default_protocols)]
    roles = load(_feature_roles, features or [])
    protos = [_with_features(p, features or []) for p in protos]
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
    from medibench.runs._folder import _tune_malloc

    _tune_malloc()  # this command's process too: image-sized arrays reused, not re-mapped
    records = score_predictions(
        ds,
        index,
        protos,
        k=k or ds.expected_k,
        limit=limit,
        workers=workers,
        progress=progress,
        console=err,
    )
    atomic_write_text(out, "".join(r.to_json() + "\n" for r in records))
    counts = {st: sum(r.status == st for r in records) for st in ("ok", "missing", "error")}
    console.print(
        f"{len(records)} score records ({counts['ok']} ok, {counts['missing']} missing, "
        f"{counts['error']} error) for {len(index.models)} model(s) by "
        f"{', '.join(f'{p.name}@{p.version}' for p in protos)} -> {out}"
    )
    chosen = list(ds)[:limit]
    samples = {s.sample_id: s for s in chosen}
    rows = []
    set_rows: dict[str, list[dict]] = {}  # FID/KID rows by grouping (--features inception:...)
    for proto in protos:
        mine = [
            r for r in records if (r.protocol, r.protocol_version) == (proto.name, proto.version)
        ]
        group = (by or list(proto.aggregation.group_by) or ["region"])[0]
        if "fid" in roles and group not in set_rows:  # extract once per grouping, not per protocol
            set_rows[group] = _set_rows(chosen, index, roles, group)
        sets = set_rows.get(group)
        rows += print_summary(mine, samples, proto, by=by, set_rows=sets, set_by=group)
    write_summary(rows, csv_out, json_out)


def _feature_roles(specs: list[str]) -> dict[str, str]:
    from medibench.analysis.feature_scores import feature_roles

    return feature_roles(specs) if specs else {}


def _with_features(proto, specs: list[str]):
    """The protocol with ``--features`` when it declares that setting (medgen@code)."""
    import dataclasses

    if specs and dataclasses.is_dataclass(proto) and not isinstance(proto, type):
        if any(f.name == "features" for f in dataclasses.fields(proto)):
            return dataclasses.replace(proto, features=tuple(specs))
    return proto


def _set_rows(samples, index, roles: dict[str, str], by: str) -> list[dict]:
    """FID and KID per model and group (the first output of each of ``samples``), for the
    summaries."""
    from medibench._console import labelled
    from medibench.analysis.feature_scores import feature_summary, skipped_outputs
    from medibench.analysis.features import ExtractorWeightsError

    first = {
        m: {sid: ks[min(ks)] for sid, ks in files.items() if ks} for m, files in index.files.items()
    }
    try:
        rows = feature_summary(samples, first, {"fid": roles["fid"]}, by=by)
    except (ExtractorWeightsError, ImportError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    for note in skipped_outputs(rows):
        err.print(labelled("note", note, "yellow"))
    return rows


def export(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="run folder")],
    out: Annotated[Path, typer.Option(help="output file")],
    format: Annotated[str, typer.Option(help="jsonl, csv or parquet")] = "jsonl",
    tables: Annotated[
        bool,
        typer.Option(
            help="also write every other table of the run (predictions, judgements, ...) "
            "beside OUT as <OUT stem>.<table>.<format>"
        ),
    ] = True,
) -> None:
    """Export a run's score records (the same schema as `medibench score`) and its tables."""
    from medibench.runs import RunStore, RunStoreError
    from medibench.runs.export import export_run, export_scores

    try:
        with RunStore.open_existing(run_dir) as store:
            if tables:
                counts = export_run(store, out, format=format)
            else:
                counts = {"records": export_scores(store.scores(), out, format=format)}
    except (RunStoreError, ValueError, ImportError) as exc:
        fail(str(exc))
    console.print(f"{counts.pop('records')} score records -> {out}")
    if counts:
        listed = ", ".join(f"{name} {n}" for name, n in counts.items())
        console.print(f"tables beside it ({out.stem}.<table>.{format}): {listed}")
