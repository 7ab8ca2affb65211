"""The ``medibench`` command line: thin Typer commands over the library."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Evaluate text-guided medical image editing, by the papers' protocols and corrected ones.",
)
# Leaderboards are wide: keep them readable when stdout is a pipe or a CI log (80 columns).
console = Console(width=None if Console().is_terminal else 120)
err = Console(stderr=True, soft_wrap=True)  # error messages stay on one line (greppable)


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code=2)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="run folder (the suite data goes in OUT/data)")] = Path(
        "demo_run"
    ),
    seed: Annotated[int, typer.Option(help="seed for the suite items and the models")] = 0,
    suite: Annotated[
        str, typer.Option(help="frozen suite definition to generate")
    ] = "medibench-suite@1",
    report: Annotated[bool, typer.Option(help="write the HTML report")] = True,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
) -> None:
    """Generate the built-in suite, run identity and classical on it, score, print leaderboards,
    write the HTML report."""
    from medibench.datasets import load_dataset
    from medibench.runs._cli import run_folder_session

    t0 = time.perf_counter()
    with run_folder_session(out):
        spec = f"suite:{out / 'data'}"
        dataset = _load(load_dataset, spec, name=suite, seed=seed)
        console.print(f"{suite}: {len(dataset)} samples in {out / 'data'}")
        _run(
            dataset,
            spec,
            ["identity", "classical"],
            ["native@1"],
            k=1,
            seed=seed,
            out=out,
            stage="all",
            only_failed=False,
            progress=progress,
        )
        _print_leaderboards(out, "native@1", csv_path=out / "results.csv")
        console.print(f"scored in {time.perf_counter() - t0:.1f} s; run store {out / 'run.sqlite'}")
        if report:
            from medibench.report import build_report

            index = build_report(out, out / "report", progress=progress, console=err)
            console.print(f"HTML report: {index}")


@app.command()
def run(
    dataset: Annotated[str, typer.Option(help="dataset spec, e.g. native:DIR or starter:DIR")],
    model: Annotated[
        list[str],
        typer.Option(
            help="model (repeatable): NAME, NAME:ARG (ip2p:WEIGHTS, openai-image:gpt-image-1), "
            "a YAML spec file, or module:callable"
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "--run",
            help="run folder (created if missing, resumed if not); {shard} in it becomes i-of-n",
        ),
    ],
    protocol: Annotated[
        list[str] | None, typer.Option(help="protocol name@version (repeatable)")
    ] = None,
    k: Annotated[
        int,
        typer.Option("--samples", "--k", min=1, help="outputs per sample, each with its own seed"),
    ] = 1,
    seed: Annotated[int, typer.Option(help="run seed (per-item seeds derive from it)")] = 0,
    stage: Annotated[str, typer.Option(help="generate, score or all")] = "all",
    only_failed: Annotated[
        bool, typer.Option(help="re-run only failed items (refused ones included)")
    ] = False,
    retry_refused: Annotated[
        bool,
        typer.Option(help="ask again for the edits a model refused (a plain re-run does not)"),
    ] = False,
    model_option: Annotated[
        list[str] | None,
        typer.Option(help="model option key=value (repeatable; for every --model)"),
    ] = None,
    executor: Annotated[str, typer.Option(help="local or ray")] = "local",
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="items in flight (local: API requests or threads, default the model's own; "
            "ray: model actors, default one per GPU)",
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help="Ray cluster to join (ray start --head prints it); default: local"),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="run shard i/n of the samples (default: from RANK/WORLD_SIZE or "
            "SLURM_PROCID/SLURM_NTASKS); merge shard runs with `medibench merge`"
        ),
    ] = None,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
) -> None:
    """Run models on a dataset and score their outputs; re-running resumes.

    One process per run folder: another process on it exits 3. A model's outputs go to
    outputs/<slug>-<hash of its name>/; its resolved spec is stored, and a re-run with another
    spec under the same name is refused. Refused edits are not asked again unless
    --retry-refused or --only-failed.
    """
    from medibench.datasets import load_dataset
    from medibench.runs._cli import run_folder_session
    from medibench.runs._shard import resolve_shard, shard_run_dir

    if stage not in {"generate", "score", "all"}:
        _fail(f"--stage must be generate, score or all, not {stage!r}")
    if executor not in {"local", "ray"}:
        _fail(f"--executor must be local or ray, not {executor!r}")
    part = _load(resolve_shard, shard)
    out = shard_run_dir(out, part)
    ds = _load(load_dataset, dataset)
    _check_not_empty(ds, dataset)
    protocols = protocol or list(ds.default_protocols)
    with run_folder_session(out):
        _run(
            ds,
            dataset,
            model,
            protocols,
            k=k,
            seed=seed,
            out=out,
            stage=stage,
            only_failed=only_failed,
            retry_refused=retry_refused,
            progress=progress,
            model_options=model_option or [],
            executor=executor,
            workers=workers,
            ray_address=ray_address,
            shard=part,
        )
    for p in protocols:
        _print_leaderboards(out, p)


@app.command()
def score(
    dataset: Annotated[
        str, typer.Option(help="dataset spec (native:DIR, medebench:DIR, miedb:DIR, ...) or DIR")
    ],
    predictions: Annotated[
        Path,
        typer.Option(
            help="folder with one sub-folder per model (generated_images/, eval_results/, "
            "model_outputs/), or one model's <sample_id>_<k>.png files"
        ),
    ],
    out: Annotated[Path, typer.Option(help="score records, one JSON object per line")],
    protocol: Annotated[
        list[str] | None,
        typer.Option(help="protocol name@version (repeatable; default: the dataset's)"),
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(help="models to score (default: all), or the name of a one-model folder"),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(min=1, help="outputs expected per sample (default: the benchmark's)"),
    ] = None,
    summary: Annotated[Path | None, typer.Option(help="also write the summary as CSV")] = None,
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
    progress: Annotated[bool, typer.Option(help="show a progress bar")] = True,
) -> None:
    """Score existing model outputs; a missing output is a 'missing' record, never a 0."""
    from medibench.datasets import load_dataset
    from medibench.io import atomic_write_text
    from medibench.protocols import load_protocol
    from medibench.runs import score_predictions

    ds = _load(load_dataset, dataset)
    _check_not_empty(ds, dataset)
    for problem in ds.problems[:5]:
        err.print(f"[yellow]dataset:[/] {problem}")
    if len(ds.problems) > 5:
        err.print(f"[yellow]dataset:[/] ... and {len(ds.problems) - 5} more problems")
    protos = [_load(load_protocol, p) for p in (protocol or ds.default_protocols)]
    flat = predictions.is_dir() and any(p.suffix.lower() == ".png" for p in predictions.iterdir())
    if flat and model and len(model) > 1:
        _fail(f"{predictions} holds one model's files: give at most one --model (its name)")
    index = _load(
        ds.find_predictions,
        predictions,
        models=None if flat else model,
        model=model[0] if flat and model else None,
    )
    if not index.models:
        _fail(f"no model outputs found in {predictions}")
    if index.unknown:
        names = ", ".join(p.name for _, p in index.unknown[:5])
        more = f" and {len(index.unknown) - 5} more" if len(index.unknown) > 5 else ""
        err.print(
            f"[yellow]ignored {len(index.unknown)} output(s) for ids not in the benchmark:[/] "
            f"{names}{more}"
        )
    records = score_predictions(
        ds, index, protos, k=k or ds.expected_k, workers=workers, progress=progress, console=err
    )
    atomic_write_text(out, "".join(r.to_json() + "\n" for r in records))
    counts = {st: sum(r.status == st for r in records) for st in ("ok", "missing", "error")}
    console.print(
        f"{len(records)} score records ({counts['ok']} ok, {counts['missing']} missing, "
        f"{counts['error']} error) for {len(index.models)} model(s) by "
        f"{', '.join(f'{p.name}@{p.version}' for p in protos)} -> {out}"
    )
    samples = {s.sample_id: s for s in ds}
    rows = []
    for proto in protos:
        mine = [
            r for r in records if (r.protocol, r.protocol_version) == (proto.name, proto.version)
        ]
        rows += _print_summary(mine, samples, proto, by=by)
    if summary is not None:
        from medibench.report import write_rows_csv

        write_rows_csv(rows, summary)
        console.print(f"summary -> {summary}")


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="run folder")],
    out: Annotated[Path, typer.Option(help="output file")],
    format: Annotated[str, typer.Option(help="jsonl, csv or parquet")] = "jsonl",
) -> None:
    """Export a run's score records (the same schema as `medibench score`)."""
    from medibench.runs import RunStore, RunStoreError
    from medibench.runs.export import export_scores

    try:
        with RunStore.open_existing(run_dir) as store:
            n = export_scores(store.scores(), out, format=format)
    except (RunStoreError, ValueError, ImportError) as exc:
        _fail(str(exc))
    console.print(f"{n} score records -> {out}")


@app.command()
def models() -> None:
    """List the registered editing models and their options (--model-option key=value)."""
    from medibench.models import MODELS
    from medibench.models._spec import model_options

    table = Table(show_header=True)
    for col in ("model", "what it is", "options (default)"):
        table.add_column(col)
    for name in MODELS.names():
        try:
            opts = ", ".join(str(o) for o in model_options(MODELS.get(name)))
        except Exception as exc:  # a plug-in that cannot be imported
            opts = f"(cannot import: {exc})"
        table.add_row(name, MODELS.help(name), opts)
    console.print(table)


@app.command()
def datasets() -> None:
    """List the dataset adapters (use as KIND:ARG, e.g. native:DIR)."""
    from medibench.datasets import DATASETS

    _list(DATASETS)


@app.command()
def protocols() -> None:
    """List the scoring protocols (name@version)."""
    from medibench.protocols import PROTOCOLS

    _list(PROTOCOLS)


# -- helpers ----------------------------------------------------------------------------------
def _run(
    ds,
    dataset_spec,
    models,
    protocols,
    *,
    k,
    seed,
    out,
    stage,
    only_failed,
    progress,
    retry_refused=False,
    model_options=(),
    executor="local",
    workers=None,
    ray_address=None,
    shard=None,
):
    from medibench.datasets import load_images
    from medibench.models._spec import parse_model_spec
    from medibench.protocols import load_protocol
    from medibench.runs import RunStore, RunStoreError, generate, record_environment
    from medibench.runs import score as score_stage
    from medibench.runs._executors import LocalExecutor, RayExecutor
    from medibench.runs._models import (
        check_model_specs,
        check_unique_names,
        planned_name,
        record_model_specs,
        resolved_spec,
    )

    protos = [_load(load_protocol, p) for p in protocols]
    specs = [_load(parse_model_spec, m, options=model_options) for m in models]
    for spec in specs:
        _load(lambda sp: sp.check_options(), spec)
    planned = [planned_name(spec) for spec in specs]
    _load(check_unique_names, list(zip(models, planned, strict=True)))
    resolved = [resolved_spec(spec) for spec in specs]
    generating = stage in {"generate", "all"}
    samples = list(ds) if shard is None else shard.select(list(ds))
    if executor == "ray":
        try:
            runner = _load(lambda _: RayExecutor(workers=workers, address=ray_address), None)
        except ConnectionError as exc:  # RayClusterNotFoundError: one line, what to do
            _fail(str(exc))
    else:
        runner = LocalExecutor(workers=workers)
    config = {
        "dataset": dataset_spec,
        "models": list(models),
        "model_specs": [spec.to_dict() for spec in specs],
        "k": k,
        "seed": seed,
        "protocols": {p.name: p.version for p in protos},
    }
    if shard is not None:
        config["shard"] = str(shard)
    with RunStore(out) as store:
        try:
            record_environment(store, config)
            if generating:  # every known name checked before any model runs
                known = {n: r for n, r in zip(planned, resolved, strict=True) if n is not None}
                record_model_specs(store, known)
        except RunStoreError as exc:
            _fail(str(exc))
        store.put_samples(samples)
        try:
            if generating:
                made: list[str] = []
                for spec, plan, res in zip(specs, planned, resolved, strict=True):
                    if executor == "ray":
                        model = spec
                        name = _load(lambda sp: runner.start(sp), spec)
                    else:
                        model = _load(lambda sp: sp.load(), spec)
                        name = getattr(model, "name", spec.model)
                    if name != plan:  # only the built model knew its name: check it now
                        others = [n for n in planned if n is not None and n != plan] + made
                        if name in others:
                            _fail(
                                f"--model {spec.model!r} is named {name!r}, like another "
                                "--model of this run: give it another name"
                            )
                        try:
                            check_model_specs(store, {name: res})
                            record_model_specs(store, {name: res})
                        except RunStoreError as exc:
                            _fail(str(exc))
                    made.append(name)
                    try:
                        rep = generate(
                            store,
                            samples,
                            model,
                            model_name=name,
                            k=k,
                            seed=seed,
                            only_failed=only_failed,
                            retry_refused=retry_refused,
                            progress=progress,
                            console=err,
                            executor=runner,
                        )
                    except RunStoreError as exc:
                        _fail(str(exc))
                    _summarise(rep, name)
            if stage in {"score", "all"}:
                for proto in protos:
                    rep = score_stage(
                        store,
                        samples,
                        proto,
                        load_images=load_images,
                        only_failed=only_failed,
                        progress=progress,
                        console=err,
                        executor=runner,
                    )
                    _summarise(rep, f"{proto.name}@{proto.version}")
        finally:
            runner.close()


def _print_leaderboards(run_dir: Path, protocol_spec: str, csv_path: Path | None = None) -> None:
    from medibench.protocols import load_protocol
    from medibench.report import write_rows_csv
    from medibench.runs import RunStore

    proto = load_protocol(protocol_spec)
    with RunStore.open_existing(run_dir) as store:
        scores = [s for s in store.scores(proto.name) if s.protocol_version == proto.version]
        samples = {s.sample_id: s for s in store.samples()}
    rows = _print_summary(scores, samples, proto)
    if csv_path is not None:
        write_rows_csv(rows, csv_path)
        console.print(f"leaderboard -> {csv_path}")


def _print_summary(scores, samples, proto, by: list[str] | None = None) -> list[dict]:
    """Print the protocol's summary tables; return the rows (with the protocol named)."""
    import dataclasses

    from medibench.report import summarize, summary_tables

    agg = proto.aggregation
    if by:
        agg = dataclasses.replace(agg, group_by=tuple(by))
    rows = summarize(
        scores,
        samples,
        agg,
        metrics=list(proto.metric_names),
        applicable=getattr(proto, "applicable_metrics", None),
    )
    for table in summary_tables(
        rows,
        label=f"{proto.name}@{proto.version}",
        aggregation=agg,
        metrics=proto.metric_names,
        judged=getattr(proto, "judged_metrics", ()),
    ):
        console.print(table)
    return [{"protocol": proto.name, "protocol_version": proto.version, **r} for r in rows]


def _summarise(rep, label: str) -> None:
    refused = getattr(rep, "refused", 0)
    before = getattr(rep, "skipped_refused", 0)
    err.print(
        f"{rep.stage} {label}: {rep.done} done, {rep.skipped} already done, {rep.failed} failed"
        + (f", {refused} refused" if refused else "")
    )
    if before:
        err.print(f"  {before} refused before, not asked again (--retry-refused asks again)")
    for item, msg in rep.failures[:5]:
        err.print(f"  [yellow]failed[/] {item}: {msg}")
    if len(rep.failures) > 5:
        err.print(f"  ... and {len(rep.failures) - 5} more (see the run store)")


def _check_not_empty(ds, spec: str) -> None:
    if len(ds) == 0:
        root = getattr(ds, "root", None)
        where = f" in {root}" if root is not None else ""
        _fail(f"dataset {spec!r} has no samples{where}: nothing to run or score")


def _load(fn, spec, **kwargs):
    try:
        return fn(spec, **kwargs)
    except (KeyError, ValueError, FileNotFoundError, ImportError) as exc:
        _fail(str(exc))


def _list(registry) -> None:
    table = Table(show_header=True)
    table.add_column(registry.kind)
    table.add_column("what it is")
    for name in registry.names():
        table.add_row(name, registry.help(name))
    console.print(table)


def _mount_subcommands() -> None:
    """Commands whose code lives beside the library part they drive."""
    from medibench.judges._cli import agreement, judge
    from medibench.report._cli import report
    from medibench.runs._cli import merge
    from medibench.synth._cli import suite_app

    app.command("merge")(merge)
    app.command("judge")(judge)
    app.command("agreement")(agreement)
    app.command("report")(report)
    app.add_typer(suite_app, name="suite", help="The built-in procedural medical editing suite.")


_mount_subcommands()


def main() -> None:  # python -m medibench
    app()
