"""The shell blocks of README.md and docs/*.md, and the checked-in table of how each is run
(``tests/docs/blocks.md``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = Path(__file__).with_name("blocks.md")
_FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```", re.S | re.M)
_SHELL = {"bash", "sh", "shell", "console"}
_COMMANDS = ("medibench ", "python ", "make ", "git ", "pip ")


@dataclass(frozen=True)
class Block:
    """One shell block: its file (relative to the repository), ordinal in the file (1-based),
    line of its opening fence, and text."""

    file: str
    ordinal: int
    line: int
    text: str

    @property
    def first(self) -> str:
        """Its first line, trimmed to 50 characters (the table's check that a row is current)."""
        return self.text.splitlines()[0].strip()[:50]


def shell_blocks() -> list[Block]:
    """Every fenced block marked bash/sh/shell/console, or unmarked and starting with a command."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        n = 0
        for m in _FENCE.finditer(text):
            lang, body = m.group(1), m.group(2)
            if lang in _SHELL or (not lang and body.lstrip().startswith(_COMMANDS)):
                n += 1
                line = text[: m.start()].count("\n") + 1
                out.append(Block(str(path.relative_to(ROOT)), n, line, body))
    return out


@dataclass(frozen=True)
class Row:
    """A row of tests/docs/blocks.md: how a block is covered (``runs``, ``partly``, ``not yet``)
    and why."""

    file: str
    ordinal: int
    first: str
    status: str
    why: str


def table_rows() -> list[Row]:
    rows = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 5 and cells[1].isdigit():
            first = cells[2].strip("`").replace("\\|", "|")
            rows.append(Row(cells[0], int(cells[1]), first, cells[3], cells[4]))
    return rows
