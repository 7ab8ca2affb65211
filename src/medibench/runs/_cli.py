"""The ``medibench merge`` command (registered on the CLI app by :mod:`medibench.cli`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["merge"]


def merge(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN...", help="run folders to merge")],
    out: Annotated[
        Path, typer.Option("--out", "--run", help="merged run folder (new, or a run to add to)")
    ],
) -> None:
    """Merge run stores (shards from --shard i/n) into one: samples, outputs, scores."""
    from medibench.runs._shard import merge as merge_runs
    from medibench.runs._store import RunStoreError

    console, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    try:
        rep = merge_runs(runs, out)
    except (RunStoreError, OSError) as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(code=2) from None
    console.print(
        f"merged {len(runs)} run(s) into {out}: {rep.samples} samples, {rep.predictions} "
        f"predictions ({rep.files} files), {rep.scores} scores"
    )
    if rep.skipped_tables:
        err.print(
            f"[yellow]not merged:[/] tables {', '.join(rep.skipped_tables)} "
            "(re-run those stages on the merged run)"
        )
