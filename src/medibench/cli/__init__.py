"""The ``medibench`` command line: thin Typer commands over the library, one module per
command group (``run``: demo, run; ``score``: score, export; ``listing``: models, datasets,
protocols; ``download``: download); the commands that drive one library part live beside it
(``merge`` in :mod:`medibench.runs._cli`, ``judge`` and ``agreement`` in
:mod:`medibench.judges._cli`, ``report`` in :mod:`medibench.report._cli`, ``suite`` in
:mod:`medibench.synth._cli`)."""

from __future__ import annotations

from medibench.cli import analyze, build, download, export_dataset, listing, run, score
from medibench.cli._app import app
from medibench.cli._help import rewrap_app_help

__all__ = ["app", "main"]


def _mount_commands() -> None:
    for command in (
        run.demo,
        run.run,
        score.score,
        score.export,
        listing.models,
        listing.datasets,
        listing.protocols,
        download.download,
    ):
        app.command()(command)
    app.command("export-dataset")(export_dataset.export_dataset)
    from medibench.judges._cli import agreement, judge
    from medibench.report._cli import report
    from medibench.runs._cli import merge
    from medibench.synth._cli import suite_app

    app.command("merge")(merge)
    app.command("judge")(judge)
    app.command("agreement")(agreement)
    app.command("report")(report)
    app.add_typer(suite_app, name="suite", help="The built-in procedural medical editing suite.")
    from medibench.cli.calibration import calibration_app

    app.add_typer(calibration_app, name="calibration", help="Calibration from saved predictions.")
    from medibench.cli.edit import edit_app

    app.add_typer(edit_app, name="edit", help="Model editing of medical VLMs (M3Bench style).")
    app.add_typer(analyze.analyze_app, name="analyze", help="Look inside models: attention.")
    app.add_typer(build.build_app, name="build", help="Build MieDB-style triplets from labels.")
    from medibench.cli.medgen import medgen_app

    app.add_typer(medgen_app, name="medgen", help="MedGEN-Bench: controls, Delta, summaries.")
    from medibench.cli.train import train

    app.command("train")(train)


_mount_commands()
rewrap_app_help(app)  # every command's help, however mounted


def main() -> None:  # python -m medibench
    app()
