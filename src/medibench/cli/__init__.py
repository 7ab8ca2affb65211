"""The ``medibench`` command line: thin Typer commands over the library, one module per
command group (``run``: demo, run; ``score``: score, export; ``listing``: models, datasets,
protocols; ``download``: download); the commands that drive one library part live beside it
(``merge`` and ``compare`` in :mod:`medibench.runs._cli`, ``judge`` and ``agreement`` in
:mod:`medibench.judges._cli`, ``report`` in :mod:`medibench.report._cli`, ``suite`` in
:mod:`medibench.synth._cli`).

A command's module is imported when the command is mounted. ``python -m medibench CMD`` (and the
``medibench`` script) mounts only ``CMD``, so a command starts without importing the libraries of
every other one (the report's scipy, the judges, torch-facing code); ``--help``, no command or an
unknown one mount them all. ``medibench.cli.app`` is the app with every command mounted.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

import typer

from medibench.cli import _app
from medibench.cli._help import rewrap_app_help

__all__ = ["app", "main"]

#: command name -> (module, attribute, kind): "command" mounts a function, "group" a Typer app.
_COMMANDS: dict[str, tuple[str, str, str, str | None]] = {
    "demo": ("medibench.cli.run", "demo", "command", None),
    "run": ("medibench.cli.run", "run", "command", None),
    "score": ("medibench.cli.score", "score", "command", None),
    "export": ("medibench.cli.score", "export", "command", None),
    "models": ("medibench.cli.listing", "models", "command", None),
    "datasets": ("medibench.cli.listing", "datasets", "command", None),
    "protocols": ("medibench.cli.listing", "protocols", "command", None),
    "download": ("medibench.cli.download", "download", "command", None),
    "export-dataset": ("medibench.cli.export_dataset", "export_dataset", "command", None),
    "merge": ("medibench.runs._cli", "merge", "command", None),
    "compare": ("medibench.runs._cli", "compare", "command", None),
    "judge": ("medibench.judges._cli", "judge", "command", None),
    "agreement": ("medibench.judges._cli", "agreement", "command", None),
    "report": ("medibench.report._cli", "report", "command", None),
    "suite": (
        "medibench.synth._cli",
        "suite_app",
        "group",
        "The built-in procedural medical editing suite.",
    ),
    "calibration": (
        "medibench.cli.calibration",
        "calibration_app",
        "group",
        "Calibration from saved predictions.",
    ),
    "edit": (
        "medibench.cli.edit",
        "edit_app",
        "group",
        "Model editing of medical VLMs (M3Bench style).",
    ),
    "analyze": (
        "medibench.cli.analyze",
        "analyze_app",
        "group",
        "Look inside models (attention, features); statistics across models (correlate).",
    ),
    "build": (
        "medibench.cli.build",
        "build_app",
        "group",
        "Build MieDB-style triplets from labels.",
    ),
    "medgen": (
        "medibench.cli.medgen",
        "medgen_app",
        "group",
        "MedGEN-Bench: controls, Delta, summaries.",
    ),
    "train": ("medibench.cli.train", "train", "command", None),
}
_MOUNTED: set[str] = set()


def _mount(names: list[str]) -> typer.Typer:
    """Mount the commands ``names`` (in the order of :data:`_COMMANDS`) on the app, once each."""
    app = _app.app
    for name in (n for n in _COMMANDS if n in names and n not in _MOUNTED):
        module, attribute, kind, help_text = _COMMANDS[name]
        target: Callable = getattr(importlib.import_module(module), attribute)
        if kind == "group":
            app.add_typer(target, name=name, help=help_text)
        else:
            app.command(name)(target)
        _MOUNTED.add(name)
    rewrap_app_help(app)  # every command's help, however mounted
    return app


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # the whole command line (tests, the docs' command walk)
        return _mount(list(_COMMANDS))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:  # the ``medibench`` script and python -m medibench
    words = [a for a in sys.argv[1:2] if not a.startswith("-")]
    _mount(words if words and words[0] in _COMMANDS else list(_COMMANDS))()
