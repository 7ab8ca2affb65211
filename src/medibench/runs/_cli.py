"""The ``medibench merge`` command (registered on the CLI app by :mod:`medibench.cli`), and
what every command that writes a run folder shares: :func:`run_folder_session` (or the
:func:`holds_run_folder` decorator) holds the folder's lock, exits 3 when another process holds
it and 1 on a full disk, with a one-line message.
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
from medibench.io._write import DiskFullError
from medibench.runs._lock import RunFolderInUse, run_folder_lock

__all__ = [
    "EXIT_DISK_FULL",
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
    :func:`medibench.runs.run` does): 3 when the folder is in use, 1 on a full disk."""
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
) -> None:
    """Merge run stores (shards from --shard i/n) into one: samples, outputs, scores and every
    stage's tables (judgements, ...)."""
    from medibench.runs._shard import merge as merge_runs
    from medibench.runs._store import RunStoreError

    console, err = stdout_console(), stderr_console()
    try:
        rep = merge_runs(runs, out)
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
