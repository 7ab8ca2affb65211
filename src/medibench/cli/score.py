"""``medibench score`` (existing model outputs, no run folder) and ``medibench export``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medibench._packed import PackedList
from medibench.cli import _options as opt  # the one option vocabulary (docs/cli.md)
from medibench.cli._app import (
    console,
    err,
    fail,
    load,
    open_dataset,
    print_bins,
    print_summary,
    write_summary,
)
from medibench.cli._published import find_outputs, published_run
from medibench.cli.judge import JudgeConfigOption, JudgedRunOption, JudgeModelOption


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
    limit: opt.SampleLimitOption = None,
    csv_out: opt.CsvOption = None,
    json_out: opt.JsonOption = None,
    by: Annotated[
        list[str] | None,
        typer.Option(
            help="group the summary by these sample fields (perspective, task, region, "
            "modality, metadata.KEY; repeatable; default: the protocol's)"
        ),
    ] = None,
    by_bins: opt.ByBinsOption = None,
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
    judge_config: JudgeConfigOption = None,
    judge_model: JudgeModelOption = None,
    run: JudgedRunOption = None,
) -> None:
    """Score existing model outputs; a missing output is a 'missing' record, never a 0.

    With --run, the outputs are kept as a run folder too (`medibench report RUN` shows them);
    with --judge they are judged there as well: the records carry the judged metrics (ea, vq,
    rubric, ...)."""
    from medibench.protocols import load_protocol
    from medibench.runs import score_predictions

    specs = load(opt.bin_specs, by_bins)
    judged = judge_config is not None or judge_model is not None
    if judged or run is not None:
        if features or workers > 1:
            fail("--run and --judge score in a run folder: --features and --workers go without")
        if specs:  # a bad --by-bins property is an error before anything is scored
            _check_bins(specs, _samples_of(dataset, dataset_option, download, limit))
        records, samples, protos = _in_run_folder(
            dataset, predictions, out, run, judge_config, judge_model, judged=judged,
            model=model, dataset_option=dataset_option, download=download, protocol=protocol,
            k=k, limit=limit, progress=progress,
        )  # fmt: skip
        _write_records(records, out, protos, n_models=len({r.model for r in records}))
        rows = _summaries(records, samples, protos, by, specs=specs)
        write_summary(rows, csv_out, json_out)
        return
    ds = open_dataset(dataset, download=download, options=dataset_option)
    _check_bins(specs, ds[:limit])  # one sample at a time, never all at once
    protos = [load(load_protocol, p) for p in (protocol or ds.default_protocols)]
    roles = load(_feature_roles, features or [])
    protos = [_with_features(p, features or []) for p in protos]
    ds, index = find_outputs(ds, predictions, model)
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
    _write_records(records, out, protos, n_models=len(index.models))
    fid_index = index if "fid" in roles else None  # the summaries need the index for FID only
    del index
    chosen = ds if limit is None else ds[:limit]  # a slice copies the dataset's id table
    samples = chosen.by_id()  # each sample rebuilt when looked up
    set_rows: dict[str, list[dict]] = {}  # FID/KID rows by grouping (--features inception:...)

    def sets_for(group: str) -> list[dict] | None:
        if "fid" in roles and group not in set_rows:  # extract once per grouping, not per protocol
            set_rows[group] = _set_rows(chosen, fid_index, roles, group)
        return set_rows.get(group)

    rows = _summaries(records, samples, protos, by, sets_for, specs=specs)
    write_summary(rows, csv_out, json_out)


def _summaries(
    records, samples, protos, by, sets_for=lambda group: None, *, specs=()
) -> list[dict]:
    """Each protocol's summary table printed, and its rows (with FID/KID rows per group, from
    ``sets_for(group)``, where those were asked for), then its ``--by-bins`` tables and rows."""
    rows = []
    for proto in protos:
        group = (by or list(proto.aggregation.group_by) or ["region"])[0]
        mine = _records_of(records, proto)  # read one at a time
        rows += print_summary(mine, samples, proto, by=by, set_rows=sets_for(group), set_by=group)
        if specs:
            rows += print_bins(PackedList(_records_of(records, proto)), samples, proto, list(specs))
    return rows


def _records_of(records, proto):
    """The score records of protocol ``proto``, one at a time."""
    return (r for r in records if (r.protocol, r.protocol_version) == (proto.name, proto.version))


def _samples_of(dataset: str, options, download: bool, limit: int | None) -> list:
    """The dataset's (first ``limit``) samples, its notes left for the command that opens it."""
    from medibench.datasets import load_dataset

    kwargs = load(opt.dataset_options, options)
    if download:
        kwargs["download"] = True
    return list(load(load_dataset, dataset, **kwargs))[:limit]


def _check_bins(specs, samples) -> None:
    """``--by-bins`` naming an unknown property or with the wrong kind of edges: a one-line
    error before anything is scored."""
    from medibench.report._bins import check_specs

    if specs:
        load(check_specs, specs, samples=samples)


def _write_records(records, out: Path, protos, *, n_models: int) -> None:
    from medibench.io import atomic_write_bytes

    counts = dict.fromkeys(("ok", "missing", "error"), 0)

    def lines():  # one record at a time, counted as it goes
        for r in records:
            counts[r.status] = counts.get(r.status, 0) + 1
            yield (r.to_json() + "\n").encode("utf-8")

    atomic_write_bytes(out, lines())
    console.print(
        f"{len(records)} score records ({counts['ok']} ok, {counts['missing']} missing, "
        f"{counts['error']} error) for {n_models} model(s) by "
        f"{', '.join(f'{p.name}@{p.version}' for p in protos)} -> {out}"
    )


def _in_run_folder(
    dataset, predictions, out, run, judge_config, judge_model, *, judged: bool, **options
):
    """``score --run`` / ``--judge``: the outputs kept as the run folder ``run`` (default: OUT's
    name with ``.run``), scored and, when ``judged``, judged; returns its score records (judged
    values filled), samples and protocols."""
    from medibench.judges._cli import judge_run_folder
    from medibench.protocols import load_protocol
    from medibench.runs import RunStore
    from medibench.runs._cli import run_folder_session

    run_dir = run if run is not None else out.with_suffix(".run")
    with run_folder_session(run_dir, create=True):
        published_run(run_dir, dataset=dataset, predictions=predictions, **options)
        if judged:
            judge_run_folder(run_dir, judge_config, judge_model)
    with RunStore.open_existing(run_dir) as store:
        config = store.get_meta("config") or {}
        protos = [load(load_protocol, f"{n}@{v}") for n, v in config["protocols"].items()]
        wanted = {(p.name, p.version) for p in protos}
        records = [r for r in store.scores() if (r.protocol, r.protocol_version) in wanted]
        samples = {s.sample_id: s for s in store.samples()}
    return records, samples, protos


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
