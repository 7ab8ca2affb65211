"""A list that keeps its items pickled: what a stage holds for each of 100,000 items.

A live pydantic record (a ``Prediction``, a ``Sample``) takes one to three kilobytes; pickled it
takes a few hundred bytes and is rebuilt in microseconds when taken. A stage that must hold an
item per sample (the predictions left to score, sorted by sample) holds them this way, so its
memory stays small at the size of MieDB-100k.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

__all__ = ["MadeWhenTaken", "PackedList"]


class MadeWhenTaken(Sequence[T], Generic[T]):
    """A sequence whose items are made when taken (:meth:`_take`), never all at once."""

    def _take(self, index: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._take(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} items")
        return self._take(index)

    def __iter__(self) -> Iterator[T]:
        return (self._take(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """Equal to a list, tuple or such sequence of equal items in the same order."""
        if not isinstance(other, (MadeWhenTaken, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list


class PackedList(MadeWhenTaken[T]):
    """A sequence of picklable items kept pickled; each item is rebuilt when taken."""

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._packed: list[bytes] = [pickle.dumps(x, protocol=5) for x in items]

    def append(self, item: T) -> None:
        self._packed.append(pickle.dumps(item, protocol=5))

    def sort(self, *, key: Callable[[T], Any]) -> None:
        """Sort in place (stable), by ``key`` of each item rebuilt once."""
        keys = [key(pickle.loads(b)) for b in self._packed]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        self._packed = [self._packed[i] for i in order]

    def __len__(self) -> int:
        return len(self._packed)

    def _take(self, index: int) -> T:
        return pickle.loads(self._packed[index])
