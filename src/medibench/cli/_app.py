"""The Typer app and what its commands share: the consoles, one-line errors (exit 2), the
summary tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from medibench._console import console, err, fail, labelled
from medibench.cli._aliases import AliasGroup

__all__ = [
    "app",
    "check_not_empty",
    "console",
    "err",
    "fail",
    "list_registry",
    "load",
    "open_dataset",
    "print_dataset_notes",
    "print_bins",
    "print_leaderboards",
    "print_summary",
    "write_summary",
]

T = TypeVar("T")

app = typer.Typer(
    cls=AliasGroup,  # old option spellings still work, with a note (cli/_aliases.py)
    no_args_is_help=True,
    add_completion=False,
    help="Evaluate text-guided medical image editing, by the papers' protocols and corrected ones.",
)
# console: COLUMNS wide (else the terminal, else 120), too-wide tables split or long; err: error
# messages on one line (greppable), printed verbatim; fail: "error: ..." and exit 2. They live
# in medibench._console so the command groups beside their packages share them without a cycle.


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        console.print(f"medibench {version('medibench')}", markup=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """Evaluate text-guided medical image editing, by the papers' protocols and corrected ones."""


def load(fn: Callable[..., T], spec: Any, **kwargs: Any) -> T:
    """``fn(spec, **kwargs)``, a bad spec (unknown name, bad value, missing file or extra)
    being a one-line error."""
    try:
        return fn(spec, **kwargs)
    except (KeyError, ValueError, FileNotFoundError, ImportError) as exc:
        fail(str(exc))


def print_dataset_notes(ds: Any, *, most: int = 5) -> None:
    """On stderr: where the dataset came from (its notes), then up to ``most`` of its problems."""
    for note in getattr(ds, "notes", ()):
        err.print(labelled("source", note, "dim"))
    problems = getattr(ds, "problems", ())
    for problem in problems[:most]:
        err.print(labelled("dataset", problem, "yellow"))
    if len(problems) > most:
        err.print(f"[yellow]dataset:[/] ... and {len(problems) - most} more problems")


def open_dataset(spec: str, *, download: bool = False, options: list[str] | None = None) -> Any:
    """``load_dataset(spec)`` for a command: a bad spec is a one-line error, an empty dataset
    exits 2, and where it came from and its problems are printed on stderr. ``options``: the
    ``--dataset-option key=value`` texts, given to the loader as keywords."""
    from medibench.cli._options import dataset_options
    from medibench.datasets import load_dataset

    kwargs = load(dataset_options, options)
    if download:
        kwargs["download"] = True
    ds = load(load_dataset, spec, **kwargs)
    check_not_empty(ds, spec)
    print_dataset_notes(ds)
    return ds


def check_not_empty(ds, spec: str) -> None:
    """Exit 2 for a dataset with no samples, naming its folder and what its adapter skipped."""
    from medibench.datasets._base import no_samples

    if len(ds) == 0:
        fail(no_samples(ds, spec))


def print_leaderboards(
    run_dir: Path, protocol_spec: str, csv_path: Path | None = None
) -> list[dict]:
    """Print a run's summary tables for one protocol (also as CSV when asked); return the rows."""
    from medibench.protocols import load_protocol
    from medibench.report import write_rows_csv
    from medibench.runs import RunStore

    proto = load_protocol(protocol_spec)
    with RunStore.open_existing(run_dir) as store:  # the scores read as they are summed
        scores = (s for s in store.iter_scores(proto.name) if s.protocol_version == proto.version)
        rows = print_summary(scores, store.sample_map(), proto)
    if csv_path is not None:
        write_rows_csv(rows, csv_path)
        console.print(f"leaderboard -> {csv_path}")
    return rows


def write_summary(rows: list[dict], csv_path: Path | None, json_path: Path | None) -> None:
    """Write a summary command's rows as CSV and/or JSON (``--csv``, ``--json``) and say where;
    NaN and infinities are written as JSON ``null`` (CSV: as Python prints them)."""
    from medibench.report import write_rows_csv, write_rows_json

    for path, write in ((csv_path, write_rows_csv), (json_path, write_rows_json)):
        if path is not None:
            write(rows, path)
            console.print(f"summary -> {path}", markup=False)


def print_summary(
    scores,
    samples,
    proto,
    by: list[str] | None = None,
    *,
    set_rows: list[dict] | None = None,
    set_by: str = "region",
) -> list[dict]:
    """Print the protocol's summary tables; return the rows (with the protocol named).

    ``set_rows``: set-level FID/KID rows (``analysis.feature_summary`` grouped by ``set_by``)
    merged into the rows of that grouping and the overall row, as ``fid`` and ``kid`` columns.
    """
    import dataclasses

    from medibench.report import summarize, summary_tables

    agg = proto.aggregation
    if by:
        agg = dataclasses.replace(agg, group_by=tuple(by))
    metrics = list(proto.metric_names)
    if set_rows is not None:
        metrics += [m for m in ("fid", "kid") if m not in metrics]
    rows = summarize(
        scores,
        samples,
        agg,
        metrics=metrics,
        applicable=getattr(proto, "applicable_metrics", None),
    )
    if set_rows is not None:
        from medibench.analysis.feature_scores import merge_set_rows

        merge_set_rows(rows, set_rows, set_by)
    for table in summary_tables(
        rows,
        label=f"{proto.name}@{proto.version}",
        aggregation=agg,
        metrics=metrics,
        judged=getattr(proto, "judged_metrics", ()),
    ):
        console.print(table)
    return [{"protocol": proto.name, "protocol_version": proto.version, **r} for r in rows]


def print_bins(scores, samples, proto, specs: list) -> list[dict]:
    """Print the protocol's ``--by-bins`` tables (their notes on stderr); return their rows (each
    property's bin rows, then its trend rows), with the protocol named. A property that cannot
    be computed is a one-line error (exit 2)."""
    from medibench.report._bins import bin_tables, bins_table

    agg = proto.aggregation
    try:
        tables = bin_tables(
            scores,
            samples,
            agg,
            metrics=list(proto.metric_names),
            specs=specs,
            applicable=getattr(proto, "applicable_metrics", None),
        )
    except ValueError as exc:
        fail(str(exc))
    rows: list[dict] = []
    for table in tables:
        for note in table.notes:
            err.print(labelled("note", note, "yellow"))
        console.print(bins_table(table, label=f"{proto.name}@{proto.version}", aggregation=agg))
        rows += table.rows + table.trend
    return [{"protocol": proto.name, "protocol_version": proto.version, **r} for r in rows]


def list_registry(registry) -> None:
    """A two-column table of a registry's names and what each is."""
    table = Table(show_header=True)
    table.add_column(registry.kind)
    table.add_column("what it is")
    for name in registry.names():
        table.add_row(name, registry.help(name))
    console.print(table)
