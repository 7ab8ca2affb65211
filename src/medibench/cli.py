"""The ``medibench`` command line: thin Typer commands over the library."""

from __future__ import annotations

import math
import re
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
err = Console(stderr=True)


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code=2)


@app.command()
def demo(
    out: Annotated[
        Path, typer.Option(help="run folder (the starter data goes in OUT/data)")
    ] = Path("demo_run"),
    seed: Annotated[int, typer.Option(help="seed for the starter data and the models")] = 0,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
) -> None:
    """Build the starter benchmark, run identity and classical on it, score, print leaderboards."""
    from medibench.datasets import load_dataset

    t0 = time.perf_counter()
    dataset = _load(load_dataset, f"starter:{out / 'data'}", seed=seed)
    console.print(f"starter benchmark: {len(dataset)} samples in {out / 'data'}")
    _run(
        dataset,
        f"starter:{out / 'data'}",
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
    console.print(f"done in {time.perf_counter() - t0:.1f} s; run store {out / 'run.sqlite'}")


@app.command()
def run(
    dataset: Annotated[str, typer.Option(help="dataset spec, e.g. native:DIR or starter:DIR")],
    model: Annotated[list[str], typer.Option(help="model name or module:attr (repeatable)")],
    out: Annotated[Path, typer.Option(help="run folder (created if missing, resumed if not)")],
    protocol: Annotated[
        list[str] | None, typer.Option(help="protocol name@version (repeatable)")
    ] = None,
    k: Annotated[int, typer.Option(min=1, help="outputs per sample")] = 1,
    seed: Annotated[int, typer.Option(help="run seed (per-item seeds derive from it)")] = 0,
    stage: Annotated[str, typer.Option(help="generate, score or all")] = "all",
    only_failed: Annotated[bool, typer.Option(help="re-run only failed items")] = False,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
) -> None:
    """Run models on a dataset and score their outputs; re-running resumes."""
    from medibench.datasets import load_dataset

    if stage not in {"generate", "score", "all"}:
        _fail(f"--stage must be generate, score or all, not {stage!r}")
    ds = _load(load_dataset, dataset)
    protocols = protocol or [getattr(ds, "default_protocol", "native@1")]
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
        progress=progress,
    )
    for p in protocols:
        _print_leaderboards(out, p)


@app.command()
def score(
    dataset: Annotated[str, typer.Option(help="dataset spec, e.g. native:DIR")],
    predictions: Annotated[Path, typer.Option(help="folder of <sample_id>_<k>.png files")],
    out: Annotated[Path, typer.Option(help="score records, one JSON object per line")],
    protocol: Annotated[str | None, typer.Option(help="protocol name@version")] = None,
    model: Annotated[str | None, typer.Option(help="model name to put in the records")] = None,
    k: Annotated[
        int | None, typer.Option(min=1, help="expect k outputs per sample (default: what is there)")
    ] = None,
) -> None:
    """Score a folder of predictions; a missing prediction is a 'missing' record, never a 0."""
    from medibench.datasets import load_dataset, load_images
    from medibench.io import atomic_write_text
    from medibench.protocols import load_protocol
    from medibench.runs import score_one
    from medibench.samples import Prediction

    ds = _load(load_dataset, dataset)
    proto = _load(load_protocol, protocol or getattr(ds, "default_protocol", "native@1"))
    if not predictions.is_dir():
        _fail(f"--predictions {predictions}: not a folder")
    found = _index_predictions(predictions)
    lines, counts = [], {"ok": 0, "missing": 0, "error": 0}
    name = model or predictions.name
    for sample in ds:
        files = found.get(sample.sample_id, {})
        ks = range(k) if k is not None else (sorted(files) or [0])
        for j in ks:
            path = files.get(j)
            pred = Prediction(
                sample_id=sample.sample_id,
                model=name,
                k=j,
                path=str(path.resolve()) if path else None,
                status="ok" if path else "error",
                error=None if path else f"no file {sample.sample_id}_{j}.png",
            )
            rec = score_one(predictions, sample, pred, proto, load_images)
            counts[rec.status] += 1
            lines.append(rec.to_json())
    atomic_write_text(out, "\n".join(lines) + "\n")
    console.print(
        f"{len(lines)} score records ({counts['ok']} ok, {counts['missing']} missing, "
        f"{counts['error']} error) by {proto.name}@{proto.version} -> {out}"
    )


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
    """List the registered editing models."""
    from medibench.models import MODELS

    _list(MODELS)


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
def _run(ds, dataset_spec, models, protocols, *, k, seed, out, stage, only_failed, progress):
    from medibench.datasets import load_images
    from medibench.protocols import load_protocol
    from medibench.runs import RunStore, generate, record_environment, resolve_model
    from medibench.runs import score as score_stage

    protos = [_load(load_protocol, p) for p in protocols]
    samples = list(ds)
    with RunStore(out) as store:
        try:
            record_environment(
                store,
                {
                    "dataset": dataset_spec,
                    "models": list(models),
                    "k": k,
                    "seed": seed,
                    "protocols": {p.name: p.version for p in protos},
                },
            )
        except Exception as exc:
            _fail(str(exc))
        store.put_samples(samples)
        if stage in {"generate", "all"}:
            for spec in models:
                model = _load(resolve_model, spec)
                name = getattr(model, "name", spec)
                rep = generate(
                    store,
                    samples,
                    model,
                    model_name=name,
                    k=k,
                    seed=seed,
                    only_failed=only_failed,
                    progress=progress,
                    console=err,
                )
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
                )
                _summarise(rep, f"{proto.name}@{proto.version}")


def _print_leaderboards(run_dir: Path, protocol_spec: str, csv_path: Path | None = None) -> None:
    from medibench.protocols import load_protocol
    from medibench.report import leaderboard, write_leaderboard_csv
    from medibench.runs import RunStore

    proto = load_protocol(protocol_spec)
    with RunStore.open_existing(run_dir) as store:
        scores = [s for s in store.scores(proto.name) if s.protocol_version == proto.version]
        samples = {s.sample_id: s for s in store.samples()}
    rows = leaderboard(scores, samples, by="perspective", metrics=list(proto.metric_names))
    for group in sorted({r["perspective"] for r in rows}):
        table = Table(title=f"{group} ({proto.name}@{proto.version})")
        sub = [r for r in rows if r["perspective"] == group]
        shown = [m for m in proto.metric_names if any(r[m] is not None for r in sub)]
        for col in ["model", "n", "missing", *shown]:
            table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
        for r in sub:
            table.add_row(
                r["model"], str(r["n"]), str(r["n_missing"]), *[_fmt(r[m]) for m in shown]
            )
        console.print(table)
    if csv_path is not None:
        write_leaderboard_csv(rows, csv_path)
        console.print(f"leaderboard -> {csv_path}")


def _index_predictions(folder: Path) -> dict[str, dict[int, Path]]:
    pattern = re.compile(r"^(?P<sid>.+)_(?P<k>\d+)\.png$")
    found: dict[str, dict[int, Path]] = {}
    for path in folder.iterdir():
        m = pattern.match(path.name)
        if m and path.is_file():
            found.setdefault(m["sid"], {})[int(m["k"])] = path
    return found


def _summarise(rep, label: str) -> None:
    err.print(
        f"{rep.stage} {label}: {rep.done} done, {rep.skipped} already done, {rep.failed} failed"
    )
    for item, msg in rep.failures[:5]:
        err.print(f"  [yellow]failed[/] {item}: {msg}")
    if len(rep.failures) > 5:
        err.print(f"  ... and {len(rep.failures) - 5} more (see the run store)")


def _load(fn, spec, **kwargs):
    try:
        return fn(spec, **kwargs)
    except (KeyError, ValueError, FileNotFoundError, ImportError) as exc:
        _fail(str(exc))


def _fmt(v) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf"
    return f"{v:.4f}" if abs(v) < 10 else f"{v:.2f}"


def _list(registry) -> None:
    table = Table(show_header=True)
    table.add_column(registry.kind)
    table.add_column("what it is")
    for name in registry.names():
        table.add_row(name, registry.help(name))
    console.print(table)


def main() -> None:  # python -m medibench
    app()
