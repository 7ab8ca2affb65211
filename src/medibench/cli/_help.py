"""Help texts rewrapped by the terminal: a docstring's line breaks inside a paragraph are its
source layout, not the reader's, so each paragraph becomes one line that rich wraps at the
terminal's width. Lists (``- ``, ``* ``, ``1. ``) and indented lines keep their breaks."""

from __future__ import annotations

import inspect
import re

import typer

__all__ = ["rewrap", "rewrap_app_help"]

_KEEP = re.compile(r"^(\s|[-*] |\d+\. )")


def rewrap(text: str) -> str:
    """``text`` with the line breaks inside each paragraph (blank-line separated) joined."""
    paragraphs = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        lines: list[str] = []
        for line in para.splitlines():
            if lines and not _KEEP.match(line):
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line.rstrip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def rewrap_app_help(app: typer.Typer) -> None:
    """Give every command and group of ``app`` (recursively) its rewrapped docstring as help."""
    for info in app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = rewrap(info.callback.__doc__)
        elif info.help:
            info.help = rewrap(info.help)
    for group in app.registered_groups:
        if group.help and isinstance(group.help, str):
            group.help = rewrap(group.help)
        if group.typer_instance is not None:
            rewrap_app_help(group.typer_instance)
