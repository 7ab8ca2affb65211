"""A list that keeps its items pickled: what a stage holds for each of 100,000 items.

A live pydantic record (a ``Prediction``, a ``Sample``) takes one to three kilobytes; pickled it
takes a few hundred bytes and is rebuilt in microseconds when taken. A stage that must hold an
item per sample (the predictions left to score, sorted by sample) holds them this way, so its
memory stays small at the size of MieDB-100k.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

__all__ = ["MadeWhenLookedUp", "MadeWhenTaken", "PackedFile", "PackedList"]


class MadeWhenLookedUp(Mapping[str, T], Generic[T]):
    """A mapping over the keys of a dict it holds (``_stored``, in its order), each value made
    from what is stored under its key when looked up (:meth:`_make`), never all at once."""

    _stored: dict[str, Any]

    def _make(self, key: str, stored: Any) -> T:
        raise NotImplementedError

    def __getitem__(self, key: str) -> T:
        return self._make(key, self._stored[key])

    def __contains__(self, key: object) -> bool:
        return key in self._stored

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)


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


class PackedFile(MadeWhenTaken[T]):
    """A sequence of picklable items kept pickled in an unnamed temporary file; in memory only
    where each one starts (8 bytes an item). Each item is read back and rebuilt when taken: a
    stage that holds an item per sample for 100,000 samples (the score records) holds
    kilobytes, not tens of megabytes."""

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._file = tempfile.TemporaryFile(prefix="medibench-packed-")
        self._starts = array("q")  # where each item starts, in item order
        self._ends = array("q")
        self._size = 0
        for item in items:
            self.append(item)

    def append(self, item: T) -> None:
        data = pickle.dumps(item, protocol=5)
        self._file.seek(self._size)
        self._file.write(data)
        self._starts.append(self._size)
        self._size += len(data)
        self._ends.append(self._size)

    def sort(self, *, key: Callable[[T], Any]) -> None:
        """Sort in place (stable), by ``key`` of each item rebuilt once; the file stays as it
        is, only the order of its items changes."""
        keys = [key(self._take(i)) for i in range(len(self))]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        self._starts = array("q", (self._starts[i] for i in order))
        self._ends = array("q", (self._ends[i] for i in order))

    def __len__(self) -> int:
        return len(self._starts)

    def _take(self, index: int) -> T:
        self._file.flush()
        start = self._starts[index]
        return pickle.loads(os.pread(self._file.fileno(), self._ends[index] - start, start))
