"""Old option spellings, kept working: one CLI vocabulary (docs/cli.md) without breaking scripts.

:class:`AliasGroup` is the top command group of ``medibench``: before a command (``run``) or
a sub-app's command (``edit run``) parses its arguments, an old spelling in :data:`RENAMED` is
replaced by the new one and a deprecation note goes to stderr. The old names are in no
command's signature, so ``--help`` shows the vocabulary alone and the vocabulary test
(tests/test_cli_vocabulary.py) reads only it.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

from medibench._console import fail, labelled, stderr_console

__all__ = ["RENAMED", "AliasGroup", "renamed_args"]

#: command path -> {old option: new option}.
RENAMED: dict[str, dict[str, str]] = {
    "run": {"--run": "--out", "--samples": "--k"},
    "analyze attention": {"--run": "--out", "--samples": "--k"},
    "analyze features": {"--summary": "--csv", "--ci-resamples": "--resamples"},
    "merge": {"--run": "--out"},
    "edit run": {"--run": "--out", "--force": "--overwrite"},
    "edit tasks": {"--force": "--overwrite"},
    "calibration score": {"--run": "--out"},
    "calibration grid": {"--run": "--out"},
    "score": {"--summary": "--csv"},
    "agreement": {"--n-resamples": "--resamples", "--out": "--csv"},
    "report": {"--n-resamples": "--resamples"},
}


def renamed_args(command: str, args: list[str]) -> list[str]:
    """``args`` of ``command`` with old option names replaced (``--old=V`` too), each
    replacement noted on stderr; what follows ``--`` is left alone.

    An old name given with its new one is an error (exit 2), rather than one of them silently
    winning: the old meaning may have differed (``calibration grid --out GRID --run RUN``).
    """
    renames = RENAMED.get(command)
    if not renames:
        return list(args)
    given = {a.partition("=")[0] for a in args[: args.index("--") if "--" in args else None]}
    both = [old for old, new in renames.items() if old in given and new in given]
    if both:
        old, new = both[0], renames[both[0]]
        fail(f"{old} is the old name of {new} in `medibench {command}`: give {new} alone")
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + list(args[i:])
        name, eq, value = arg.partition("=")
        new = renames.get(name)
        if new is not None:
            note = f"{name} is deprecated in `medibench {command}`: use {new}"
            stderr_console().print(labelled("note", note, "yellow"))
            arg = f"{new}{eq}{value}"
        out.append(arg)
    return out


class AliasGroup(TyperGroup):
    """The top Typer group: renames deprecated options (:data:`RENAMED`) of its commands and
    of its sub-apps' commands (one level down: ``edit run``)."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[Any, Any, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        if rest and f"{name} {rest[0]}" in RENAMED:  # a sub-app's command
            return name, cmd, [rest[0], *renamed_args(f"{name} {rest[0]}", rest[1:])]
        return name, cmd, renamed_args(name or "", rest)
