"""A rich progress bar that can be switched off, yielding an ``advance()`` callable."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

__all__ = ["progress_bar"]


class progress_bar:
    """A rich progress bar (or nothing), yielding an ``advance(steps=1)`` callable."""

    def __init__(self, enabled: bool, console: Console | None, label: str, total: int) -> None:
        self.enabled, self.console, self.label, self.total = enabled, console, label, total
        self._bar: Progress | None = None

    def __enter__(self) -> Callable[..., None]:
        if not self.enabled or self.total == 0:
            return lambda steps=1: None
        bar = self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=self.console or Console(stderr=True),
            transient=False,
        )
        bar.__enter__()
        task = bar.add_task(self.label, total=self.total)
        return lambda steps=1: bar.advance(task, steps)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
