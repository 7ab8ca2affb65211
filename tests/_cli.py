"""Running a ``medibench`` command in-process and reading its one error line."""

from __future__ import annotations

from collections.abc import Sequence

from typer.testing import CliRunner

from medibench.cli import app


def invoke(args: Sequence[object]):
    """``medibench *args`` through Typer's runner; fails on an exception other than an exit."""
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output[-2000:]
    return res


def error_line(res) -> str:
    """The ``error:`` line of the output, whitespace joined (no terminal-width wrap)."""
    text = " ".join(res.output.split())
    assert text.count("error:") == 1 and "Traceback" not in text, res.output[-2000:]
    return text[text.index("error:") :]
