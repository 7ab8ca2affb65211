"""The ``medibench merge`` and ``medibench compare`` commands (registered on the CLI app by
:mod:`medibench.cli`), and what every command that writes a run folder shares:
:func:`run_folder_session` (or the :func:`holds_run_folder` decorator) holds the folder's lock,
exits 3 when another process holds it and 1 on a full disk, with a one-line message.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from medibench._console import labelled, stderr_console, stdout_console
from medibench._ray import LostWorkError
from medibench.io._write import DiskFullError
from medibench.runs._lock import RunFolderInUse, run_folder_lock

__all__ = [
    "EXIT_DISK_FULL",
    "compare",
    "EXIT_IN_USE",
    "holds_run_folder",
    "merge",
    "run_folder_errors",
    "run_folder_session",
]

EXIT_IN_USE = 3
EXIT_DISK_FULL = 1


@contextlib.contextmanager
def run_folder_session(run_dir: str | Path, *, create: bool = True) -> Iterator[None]:
    """Hold ``run_dir``'s lock for a CLI command: another holder is exit 3 (``error: run folder
    DIR is in use by process PID``), a full disk exit 1 naming the file (finished work stays)."""
    with run_folder_errors(run_dir), run_folder_lock(run_dir, create=create):
        yield


@contextlib.contextmanager
def run_folder_errors(run_dir: str | Path) -> Iterator[None]:
    """The exits of :func:`run_folder_session` for a block that takes the lock itself (as
    :func:`medibench.runs.run` does): 3 when the folder is in use, 1 on a full disk or when a
    Ray cluster lost the same work too often (finished work stays; the command resumes)."""
    err = stderr_console()
    try:
        yield
    except RunFolderInUse as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(code=EXIT_IN_USE) from None
    except DiskFullError as exc:
        err.print(
            f"[bold red]error:[/] {escape(str(exc))}; finished items are stored in {run_dir}: "
            "free some space and run the same command again to resume"
        )
        raise typer.Exit(code=EXIT_DISK_FULL) from None
    except LostWorkError as exc:  # a Ray node lost the same work too often
        err.print(f"[bold red]error:[/] {escape(str(exc))} (in {run_dir})")
        raise typer.Exit(code=1) from None


def holds_run_folder(param: str, *, create: bool = False) -> Callable[[Callable], Callable]:
    """Decorate a Typer command so it runs inside :func:`run_folder_session` of its argument
    ``param`` (a run folder path). Typer still sees the command's own signature."""

    def wrap(command: Callable) -> Callable:
        signature = inspect.signature(command)

        @functools.wraps(command)
        def locked(*args: Any, **kwargs: Any) -> Any:
            folder = signature.bind_partial(*args, **kwargs).arguments[param]
            with run_folder_session(folder, create=create):
                return command(*args, **kwargs)

        return locked

    return wrap


@holds_run_folder("out", create=True)
def merge(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN...", help="run folders to merge")],
    out: Annotated[Path, typer.Option("--out", help="merged run folder (new, or a run to add to)")],
    rename: Annotated[
        list[str] | None,
        typer.Option(
            "--rename",
            metavar="[RUN:]OLD=NEW",
            help="merge model OLD (of every run, or of RUN only) as NEW, so same-named models "
            "of different runs sit side by side (repeatable)",
        ),
    ] = None,
) -> None:
    """Merge run stores (shards from --shard i/n, or runs renamed apart with --rename) into
    one: samples, outputs, scores and every stage's tables (judgements, ...)."""
    from medibench.runs._shard import merge as merge_runs
    from medibench.runs._store import RunStoreError

    console, err = stdout_console(), stderr_console()
    try:
        rep = merge_runs(runs, out, rename or ())
    except (RunStoreError, OSError) as exc:
        err.print(labelled("error", exc))
        raise typer.Exit(code=2) from None
    console.print(
        f"merged {len(runs)} run(s) into {out}: {rep.samples} samples, {rep.predictions} "
        f"predictions ({rep.files} files), {rep.scores} scores"
        + "".join(f", {n} {name} rows" for name, n in rep.tables.items())
    )
    if rep.skipped_tables:
        err.print(
            f"[yellow]not merged:[/] tables {', '.join(rep.skipped_tables)} "
            "(re-run those stages on the merged run)"
        )


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN...",
            help="run folders, or training folders (their last evaluation, eval/step-N); the "
            "first is the reference",
        ),
    ],
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label", metavar="RUN=NAME", help="the name of RUN in the table (default: its folder)"
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", help="show this metric (repeatable; default: every one)"),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="also merge the runs into this run folder, same-named models renamed "
            "MODEL-LABEL, for `medibench report`",
        ),
    ] = None,
    csv: Annotated[Path | None, typer.Option("--csv", help="write the table as CSV")] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="write the table and the paired differences as JSON"),
    ] = None,
) -> None:
    """Runs of same-named models side by side (base vs fine-tuned, ablations, edit configs, K
    sweeps): a row per (run label, model) with n and each metric's mean, the settings that
    differ as columns, and paired differences against the first run on the samples both have."""
    from medibench.runs._compare import compare_runs, record_comparison, write_comparison
    from medibench.runs._store import RunStore, RunStoreError

    console, err = stdout_console(), stderr_console()
    try:
        result = compare_runs(runs, label or (), metric or ())
    except (RunStoreError, OSError) as exc:
        err.print(labelled("error", exc))
        raise typer.Exit(code=2) from None
    _print_comparison(console, result)
    write_comparison(result, csv=csv, json_path=json_path)
    if out is not None:
        from medibench.runs._shard import merge as merge_runs

        with run_folder_session(out):
            try:
                rep = merge_runs(result.runs, out, result.renames)
            except (RunStoreError, OSError) as exc:
                err.print(labelled("error", exc))
                raise typer.Exit(code=2) from None
            with RunStore.open_existing(out) as store:
                record_comparison(store, result)
        console.print(
            f"merged into {out}: {rep.predictions} predictions, {rep.scores} scores"
            + (
                f" (renamed: {', '.join(r.rpartition(':')[2] for r in result.renames)})"
                if result.renames
                else ""
            )
            + f"; `medibench report {out}` shows them"
        )


def _print_comparison(console, result) -> None:
    from rich.table import Table

    from medibench.runs._compare import shown_value as _shown

    table = Table(title="runs compared")
    columns = ["label", "model", *result.settings, "n", *result.metrics]
    for c in columns:
        table.add_column(escape(c), justify="right" if c in result.metrics or c == "n" else "left")
    for row in result.rows:
        table.add_row(*(escape(_shown(row.get(c))) for c in columns))
    console.print(table)
    if not result.paired:
        return
    first = result.labels[0]
    pairs = Table(title=f"paired differences against {first} (row - {first}, shared samples)")
    names = ["label", "model", "against", "metric", "n", "mean_diff", "95% CI", "permutation_p",
             "wilcoxon_p"]  # fmt: skip
    for c in names:
        pairs.add_column(c, justify="left" if c in names[:4] else "right")
    for p in result.paired:
        ci = "" if p["ci_low"] is None else f"[{_shown(p['ci_low'])}, {_shown(p['ci_high'])}]"
        cells = [p["label"], p["model"], p["against"], p["metric"], p["n"], p["mean_diff"], ci,
                 p["permutation_p"], p["wilcoxon_p"]]  # fmt: skip
        pairs.add_row(*(escape(_shown(c)) for c in cells))
    console.print(pairs)
