"""``medibench suite ...``: generate the suite, list its task types, draw a contact sheet.

The lead mounts :data:`suite_app` on the main CLI with ``app.add_typer(suite_app, name="suite")``.
Commands are thin: the work is in :mod:`medibench.synth.suite` and :mod:`medibench.synth.sheet`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from medibench._console import labelled, stderr_console, stdout_console

__all__ = ["suite_app"]

suite_app = typer.Typer(
    help="The built-in procedural medical editing suite (exact counterfactual targets).",
    no_args_is_help=True,
    add_completion=False,
)
console = stdout_console()
err = stderr_console()

# Options that more than one command takes.
Preset = Annotated[str, typer.Option(help="difficulty: easy, medium or hard")]
Size = Annotated[int, typer.Option(help="image side in pixels (multiple of 4, >= 64)")]
Tasks = Annotated[list[str] | None, typer.Option(help="task types (repeatable or comma-separated)")]
Modalities = Annotated[
    list[str] | None, typer.Option(help="scene modalities (repeatable or comma-separated)")
]


def _fail(message: str) -> None:
    err.print(labelled("error", message))
    raise typer.Exit(code=2)


def _names(values: list[str] | None) -> list[str] | None:
    """Repeatable options that also accept comma-separated lists: ``--tasks a,b --tasks c``."""
    if not values:
        return None
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


@suite_app.command()
def generate(
    out: Annotated[Path, typer.Option(help="output folder (new or empty)")],
    preset: Preset = "medium",
    n_per_task: Annotated[int, typer.Option(min=1, help="items per task type")] = 4,
    seed: Annotated[int | None, typer.Option(help="suite seed (default 0 / the suite's)")] = None,
    modalities: Modalities = None,
    tasks: Tasks = None,
    size: Size = 256,
    suite: Annotated[
        str | None, typer.Option(help="a frozen suite, e.g. medibench-suite@1 (overrides counts)")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="replace a suite already in OUT")] = False,
    workers: Annotated[int | None, typer.Option(min=1, help="processes (default: CPUs)")] = None,
    progress: Annotated[bool, typer.Option(help="show a progress bar")] = True,
) -> None:
    """Generate the suite as a native dataset (samples.jsonl + images/) in OUT."""
    from medibench.datasets import DatasetError
    from medibench.synth.suite import generate_suite

    t0 = time.perf_counter()
    try:
        root = generate_suite(
            out, preset=preset, n_per_task=n_per_task, seed=seed, modalities=_names(modalities),
            tasks=_names(tasks), size=size, overwrite=overwrite, progress=progress, suite=suite,
            workers=workers,
        )  # fmt: skip
    except (ValueError, DatasetError) as exc:
        _fail(str(exc))
    n = sum(1 for line in (root / "samples.jsonl").read_text("utf-8").splitlines() if line)
    elapsed = time.perf_counter() - t0
    console.print(f"{n} samples in {root} ({elapsed:.1f} s, {n / max(elapsed, 1e-9):.0f}/s)")


@suite_app.command("tasks")
def list_tasks() -> None:
    """List the task types: name, perspective, modalities, description."""
    from medibench.synth.tasks import TASKS

    table = Table("task", "perspective", "modalities", "description")
    for task in TASKS.values():
        table.add_row(task.name, task.perspective.value, ", ".join(task.modalities),
                      task.description)  # fmt: skip
    console.print(table)
    perspectives = sorted({t.perspective.value for t in TASKS.values()})
    modalities = sorted({m for t in TASKS.values() for m in t.modalities})
    console.print(
        f"{len(TASKS)} task types over {len(modalities)} modalities "
        f"({', '.join(modalities)}) and {len(perspectives)} perspectives"
    )


@suite_app.command()
def sheet(
    out: Annotated[Path, typer.Option(help="PNG file to write")],
    preset: Preset = "medium",
    seed: Annotated[int, typer.Option(help="suite seed")] = 0,
    size: Size = 128,
    tasks: Tasks = None,
    modalities: Modalities = None,
) -> None:
    """Draw a contact sheet: one row per task type (input | target | mask) with its instruction."""
    from medibench.synth.sheet import contact_sheet

    try:
        path = contact_sheet(out, preset=preset, seed=seed, size=size, tasks=_names(tasks),
                             modalities=_names(modalities))  # fmt: skip
    except ValueError as exc:
        _fail(str(exc))
    console.print(f"contact sheet: {path}")
