"""The ``medibench report`` command (registered by :mod:`medibench.cli`; here, not beside
:mod:`medibench.report`, because it shares ``--by-bins`` with ``score`` through
:mod:`medibench.cli._options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medibench._console import labelled, stderr_console, stdout_console
from medibench.cli._options import ByBinsOption, ProgressOption, bin_specs
from medibench.runs._cli import holds_run_folder

__all__ = ["report"]


@holds_run_folder("run")
def report(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="run folder (holds run.sqlite)")],
    out: Annotated[Path | None, typer.Option(help="report folder (default: RUN/report)")] = None,
    n_resamples: Annotated[
        int | None,
        typer.Option(
            "--resamples",
            min=1,
            help="bootstrap resamples (default: each protocol's; 1000 for most)",
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="bootstrap and permutation seed (default: the protocol's)")
    ] = None,
    level: Annotated[
        float | None, typer.Option(min=0.5, max=0.999, help="CI level (default: the protocol's)")
    ] = None,
    thumb_size: Annotated[int, typer.Option(min=32, help="thumbnail size, pixels")] = 160,
    images: Annotated[
        str, typer.Option(help="copy the full images into the folder, or link them (relative)")
    ] = "copy",
    plots: Annotated[bool, typer.Option(help="draw the plots (PNG and SVG)")] = True,
    workers: Annotated[
        int | None, typer.Option(min=1, help="processes for thumbnails (default: CPUs)")
    ] = None,
    progress: ProgressOption = True,
    by_bins: ByBinsOption = None,
) -> None:
    """Write the HTML report of a run (tables with CIs, paired tests, plots, sample browser)."""
    from medibench.datasets.properties import PropertyError
    from medibench.report import build_report
    from medibench.runs import RunStoreError

    err = stderr_console()
    try:
        specs = bin_specs(by_bins)
    except ValueError as exc:
        err.print(labelled("error", exc))
        raise typer.Exit(code=2) from None
    if not (run / "run.sqlite").exists():
        from medibench.report._panels import folder_report  # a training folder, say

        if (page := folder_report(run, out)) is not None:
            stdout_console().print(f"report -> {page}", markup=False)
            return
    if images not in ("copy", "link"):
        err.print(labelled("error", f"--images must be copy or link, not {images!r}"))
        raise typer.Exit(code=2)
    try:
        index = build_report(
            run,
            out,
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            thumb_size=thumb_size,
            images="link" if images == "link" else "copy",
            plots=plots,
            workers=workers,
            progress=progress,
            console=err,
            by_bins=specs,
        )
    except (RunStoreError, PropertyError) as exc:
        err.print(labelled("error", exc))
        raise typer.Exit(code=2) from None
    stdout_console().print(f"report -> {index}", markup=False)
