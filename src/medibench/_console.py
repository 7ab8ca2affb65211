"""The command line's consoles: results on stdout, notes and errors on stderr.

Output never depends on the terminal in a way users or tests trip on:

- stdout is as wide as ``COLUMNS`` when it is set, else the terminal, else 120 columns (a pipe
  or a CI log); a table that cannot fit that width without cutting a number or a name is
  printed in a long format instead (one block per row, one ``column: value`` line per cell);
- plain messages are never wrapped (a path or an error stays one greppable line);
- message text is printed as it is: ``[hf]`` in ``pip install 'medibench[hf]'`` is not read as
  rich markup (:func:`labelled` styles only the label).
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = [
    "PIPE_WIDTH",
    "CliConsole",
    "labelled",
    "long_format",
    "stderr_console",
    "stdout_console",
]

#: Width of stdout when it is not a terminal and ``COLUMNS`` is not set.
PIPE_WIDTH = 120


class CliConsole(Console):
    """A rich ``Console`` whose ``print`` shows a table too wide to fit in :func:`long_format`."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        fitted = [
            long_format(o) if isinstance(o, Table) and not fits(self, o) else o for o in objects
        ]
        super().print(*fitted, **kwargs)


def stdout_console() -> CliConsole:
    """Tables and results: ``COLUMNS`` wide when set, else the terminal's, else 120."""
    columns = os.environ.get("COLUMNS", "")
    width = None if columns.isdigit() or Console().is_terminal else PIPE_WIDTH
    return CliConsole(width=width, soft_wrap=True)


def stderr_console() -> CliConsole:
    """Notes and errors, never wrapped."""
    return CliConsole(stderr=True, soft_wrap=True)


def labelled(label: str, text: object, style: str = "bold red") -> Text:
    """``label: text``, the label styled and ``text`` printed verbatim (no markup)."""
    return Text.assemble((f"{label}:", style), " ", str(text))


def fits(console: Console, table: Table) -> bool:
    """Whether ``table`` fits the console's width with every cell's longest word whole."""
    unbounded = console.options.update_width(1_000_000)  # the measure is clipped to the width
    return Measurement.get(console, unbounded, table).minimum <= console.width


def long_format(table: Table) -> Text:
    """``table`` as text: its title, then per row the first cell, and ``column: value`` lines
    for the others (blank cells left out)."""
    lines = []
    if table.title:
        lines.append(_plain(table.title))
    headers = [_plain(c.header) for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    for i in range(table.row_count):
        row = [_plain(col[i]) if i < len(col) else "" for col in cells]
        lines.append(f"{headers[0]}: {row[0]}" if headers else "")
        lines += [f"  {h}: {v}" for h, v in zip(headers[1:], row[1:], strict=True) if v.strip()]
    if table.caption:
        lines.append(_plain(table.caption))
    return Text("\n".join(lines))


def _plain(renderable: Any) -> str:
    if isinstance(renderable, Text):
        return renderable.plain
    if isinstance(renderable, str):
        return Text.from_markup(renderable).plain
    return str(renderable)
