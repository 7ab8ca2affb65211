"""Work made ahead of need: ``fn(item)`` on a thread, a bounded number of items ahead.

Concurrent callers (the judges' calls, the runner's API edits) take their items in order from
one list; :class:`Ahead` runs ``fn`` (read the images and encode a request body, read an input)
for the next items on its own thread while the requests are in flight, so a worker whose answer
came back finds its next request ready instead of making it then (the whole wave of answers that
lands together would otherwise wait for its bodies one after another).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

__all__ = ["Ahead"]

T = TypeVar("T")
R = TypeVar("R")


class Ahead(Generic[T, R]):
    """``fn(items[i])`` made on one thread, up to ``depth`` items ahead of the last taken.

    Args:
        items: the items, in the order they are taken.
        fn: what to make for an item (its exception comes back through the future).
        depth: items made ahead at most.
        max_bytes: with :meth:`account` told the size of what was used, fewer items ahead
            when they are large: about ``max_bytes`` of them at the mean size seen.
        name: the thread's name prefix.
    """

    def __init__(
        self,
        items: Sequence[T],
        fn: Callable[[T], R],
        depth: int,
        *,
        max_bytes: int | None = None,
        name: str = "medibench-ahead",
    ) -> None:
        self.items, self.fn = items, fn
        self.depth, self.max_bytes = max(0, int(depth)), max_bytes
        self._futures: dict[int, Future[R]] = {}
        self._next = 0  # the next item to submit
        self._bytes, self._count = 0, 0  # sizes told by account()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def take(self, index: int) -> Future[R]:
        """The future result for ``items[index]`` (submitted now if it was not yet); the items
        up to ``depth`` after it are submitted too. Each index is taken once."""
        depth = self.depth
        if self.max_bytes is not None and self._count:
            depth = min(depth, self.max_bytes * self._count // max(1, self._bytes))
        while self._next < len(self.items) and self._next <= index + depth:
            self._futures[self._next] = self._pool.submit(self._make, self.items[self._next])
            self._next += 1
        return self._futures.pop(index)

    def _make(self, item: T) -> R:
        try:
            return self.fn(item)
        finally:
            # Let go of the GIL between items: the event loop waiting for it after a socket call
            # would otherwise wait for the switch interval (5 ms) while a burst is made.
            time.sleep(0)

    def account(self, size: int) -> None:
        """Tell the size (bytes) of a result used: it bounds how many are made ahead."""
        self._bytes, self._count = self._bytes + size, self._count + 1

    def close(self) -> None:
        """Drop what was made ahead and not taken; wait for the one being made."""
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
        self._pool.shutdown(wait=True)
