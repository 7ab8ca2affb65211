"""A rich progress bar that can be switched off, yielding an ``advance()`` callable."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

__all__ = ["progress_bar"]


class progress_bar:
    """A rich progress bar (or nothing), yielding an ``advance()`` callable."""

    def __init__(self, enabled: bool, console: Console | None, label: str, total: int) -> None:
        self.enabled, self.console, self.label, self.total = enabled, console, label, total
        self._bar: Progress | None = None

    def __enter__(self):
        if not self.enabled or self.total == 0:
            return lambda: None
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=self.console or Console(stderr=True),
            transient=False,
        )
        self._bar.__enter__()
        task = self._bar.add_task(self.label, total=self.total)
        return lambda: self._bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
