"""The ``medibench`` command line: thin Typer commands over the library, one module per
command group (``run``: demo, run; ``score``: score, export; ``listing``: models, datasets,
protocols; ``download``: download; ``dataset``: describe, split, filter, concat; ``report``:
report, which shares ``--by-bins`` with ``score``); the commands that drive one library part
live beside it (``merge`` in :mod:`medibench.runs._cli`, ``agreement`` in
:mod:`medibench.judges._cli`, ``suite`` in :mod:`medibench.synth._cli`).

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

#: module -> its commands, in the order ``--help`` lists them; a command is the module's function
#: of that name (``-`` read as ``_``).
_COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "medibench.cli.run": ("demo", "run"),
    "medibench.cli.score": ("score", "export"),
    "medibench.cli.listing": ("models", "datasets", "protocols"),
    "medibench.cli.download": ("download",),
    "medibench.cli.export_dataset": ("export-dataset",),
    "medibench.runs._cli": ("merge", "compare"),
    "medibench.cli.judge": ("judge",),
    "medibench.judges._cli": ("agreement",),
    "medibench.cli.report": ("report",),
    "medibench.cli.train": ("train",),
}
#: group name -> (module, help); a group is the module's Typer app ``NAME_app``.
_GROUPS: dict[str, tuple[str, str]] = {
    "suite": ("medibench.synth._cli", "The built-in procedural medical editing suite."),
    "calibration": ("medibench.cli.calibration", "Calibration from saved predictions."),
    "edit": ("medibench.cli.edit", "Model editing of medical VLMs (M3Bench style)."),
    "analyze": (
        "medibench.cli.analyze",
        "Look inside models (attention, features); statistics across models (correlate).",
    ),
    "dataset": (
        "medibench.cli.dataset",
        "Describe a dataset; split, filter or concatenate datasets into native folders.",
    ),
    "build": ("medibench.cli.build", "Build MieDB-style triplets from labels."),
    "medgen": ("medibench.cli.medgen", "MedGEN-Bench: controls, Delta, summaries."),
}
#: command or group name -> (module, attribute, group help or None for a command).
_COMMANDS: dict[str, tuple[str, str, str | None]] = {
    **{
        name: (module, name.replace("-", "_"), None)
        for module, names in _COMMAND_MODULES.items()
        for name in names
    },
    **{name: (module, f"{name}_app", help_text) for name, (module, help_text) in _GROUPS.items()},
}
_MOUNTED: set[str] = set()


def _mount(names: list[str]) -> typer.Typer:
    """Mount the commands ``names`` (in the order of :data:`_COMMANDS`) on the app, once each."""
    app = _app.app
    for name in (n for n in _COMMANDS if n in names and n not in _MOUNTED):
        module, attribute, group_help = _COMMANDS[name]
        target: Callable = getattr(importlib.import_module(module), attribute)
        if group_help is not None:
            app.add_typer(target, name=name, help=group_help)
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
