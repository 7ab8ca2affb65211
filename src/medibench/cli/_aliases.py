"""Old option spellings, kept working: one CLI vocabulary (docs/cli.md) without breaking scripts.

:class:`AliasGroup` is the command group of ``medibench`` and its sub-apps: before a command
parses its arguments, an old spelling in :data:`RENAMED` is replaced by the new one and a
deprecation note goes to stderr. The old names are in no command's signature, so ``--help``
shows the vocabulary alone and the vocabulary test (tests/test_cli_vocabulary.py) reads only it.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

from medibench._console import labelled, stderr_console

__all__ = ["RENAMED", "AliasGroup", "renamed_args"]

#: command path -> {old option: new option}.
RENAMED: dict[str, dict[str, str]] = {
    "run": {"--run": "--out", "--samples": "--k"},
    "analyze attention": {"--run": "--out", "--samples": "--k"},
    "analyze features": {"--summary": "--csv", "--ci-resamples": "--resamples"},
    "merge": {"--run": "--out"},
    "edit run": {"--run": "--out"},
    "calibration score": {"--run": "--out"},
    "score": {"--summary": "--csv"},
    "agreement": {"--n-resamples": "--resamples", "--out": "--csv"},
    "report": {"--n-resamples": "--resamples"},
}


def renamed_args(command: str, args: list[str]) -> list[str]:
    """``args`` of ``command`` with old option names replaced (``--old=V`` too), each
    replacement noted on stderr; what follows ``--`` is left alone."""
    renames = RENAMED.get(command)
    if not renames:
        return list(args)
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
    """A Typer group that renames deprecated options (:data:`RENAMED`) of its commands."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[Any, Any, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        path = [name or ""]
        while ctx is not None and ctx.parent is not None:
            path.insert(0, ctx.info_name or "")
            ctx = ctx.parent
        return name, cmd, renamed_args(" ".join(path), rest)
