"""The command line's consoles: results on stdout, notes and errors on stderr.

Output never depends on the terminal in a way users or tests trip on:

- stdout is as wide as ``COLUMNS`` when it is set, else the terminal, else 120 columns (a pipe
  or a CI log); no table is ever cut: a table fits when its first column (the row's name) and
  its ``no_wrap`` columns are whole and every other cell's longest word too, and it is then
  printed at column widths set here (rich itself would shrink the widest column first and cut
  it with "…"); a table that does not fit is split into tables of fewer columns, each repeating
  its leading left-aligned (key) columns, or, when even that does not fit, printed in a long
  format (one block per row, one ``column: value`` line per cell);
- plain messages are never wrapped (a path or an error stays one greppable line);
- message text is printed as it is: ``[hf]`` in ``pip install 'medibench[hf]'`` is not read as
  rich markup (:func:`labelled` styles only the label).
"""

from __future__ import annotations

import copy
import os
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = [
    "PIPE_WIDTH",
    "CliConsole",
    "console",
    "err",
    "fail",
    "labelled",
    "long_format",
    "stderr_console",
    "stdout_console",
]

#: Width of stdout when it is not a terminal and ``COLUMNS`` is not set.
PIPE_WIDTH = 120


class CliConsole(Console):
    """A rich ``Console`` whose ``print`` shows a table too wide to fit as :func:`fitted`."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        shown: list[Any] = []
        for o in objects:
            shown += fitted(self, o) if isinstance(o, Table) else [o]
        super().print(*shown, **kwargs)


def fitted(console: Console, table: Table) -> list[Any]:
    """``[table]`` when it fits; else the table split by columns, the leading left-aligned
    (key) columns repeated in each part; else its :func:`long_format`."""
    if fits(console, table):
        return [_sized(console, table)]
    keys = 0
    while keys < len(table.columns) - 1 and table.columns[keys].justify == "left":
        keys += 1
    parts: list[list[int]] = []
    for i in range(max(keys, 1), len(table.columns)):
        if parts and fits(console, _columns(table, [*range(keys), *parts[-1], i])):
            parts[-1].append(i)
        elif fits(console, _columns(table, [*range(keys), i])):
            parts.append([i])
        else:
            return [long_format(table)]
    if len(parts) < 2:
        return [long_format(table)]
    tables = [_sized(console, _columns(table, [*range(keys), *part])) for part in parts]
    for n, t in enumerate(tables, start=1):
        t.title = f"{_plain(table.title or '')} ({n}/{len(parts)})".lstrip()
        t.caption = table.caption if n == len(parts) else None
    return tables


def _columns(table: Table, indices: list[int]) -> Table:
    """A copy of ``table`` with the columns at ``indices`` only (no title or caption)."""
    out = Table(box=table.box, show_header=table.show_header)
    for i in indices:
        c = table.columns[i]
        out.add_column(c.header, justify=c.justify, no_wrap=c.no_wrap, overflow=c.overflow)
    cells = [list(table.columns[i].cells) for i in indices]
    for r in range(table.row_count):
        out.add_row(*(col[r] if r < len(col) else "" for col in cells))
    return out


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


#: The consoles every command prints on (the CLI groups beside their packages included).
console = stdout_console()
err = stderr_console()


def fail(message: str) -> NoReturn:
    """Print ``error: MESSAGE`` on stderr and exit 2."""
    import typer

    err.print(labelled("error", message))
    raise typer.Exit(code=2)


def fits(console: Console, table: Table) -> bool:
    """Whether ``table`` fits the console's width with its first column and its ``no_wrap``
    columns whole and every other cell's longest word whole."""
    return sum(_widths(console, table)[0]) + table._extra_width <= console.width


def _sized(console: Console, table: Table) -> Table:
    """``table`` (which :func:`fits`) with its column widths set so that rich cuts nothing:
    each column at least its :func:`fits` minimum, the room left shared toward the widest
    layout; a cell wider than its column wraps at spaces (``fold`` where it could not)."""
    least, most = _widths(console, table)
    room = console.width - table._extra_width - sum(least)
    if sum(most) <= console.width - table._extra_width:
        return table  # rich prints the widest layout as it is
    widths = list(least)
    while room > 0:  # one character at a time to each column still short of its widest
        short = [i for i, w in enumerate(widths) if w < most[i]]
        for i in short[:room]:
            widths[i] += 1
        room -= len(short[:room])
    out = copy.copy(table)
    out.columns = [copy.copy(c) for c in table.columns]
    for i, (column, width) in enumerate(zip(out.columns, widths, strict=True)):
        column.width = width - table._get_padding_width(i)
        column.overflow = "fold"
    return out


def _widths(console: Console, table: Table) -> tuple[list[int], list[int]]:
    """Per column (padding included): the least width that keeps it uncut (its widest cell for
    the first column and ``no_wrap`` columns, else its longest word) and its widest layout."""
    unbounded = console.options.update_width(1_000_000)  # a measure is clipped to the width
    ranges = [table._measure_column(console, unbounded, c) for c in table.columns]
    least = [
        r.maximum if i == 0 or c.no_wrap else r.minimum
        for i, (r, c) in enumerate(zip(ranges, table.columns, strict=True))
    ]
    return least, [r.maximum for r in ranges]


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
