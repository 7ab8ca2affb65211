"""Ahead: results made on a thread, in order, a bounded number of items ahead."""

from __future__ import annotations

import threading

import pytest

from medibench.calls import Ahead


def _drain(ahead: Ahead) -> None:
    ahead._pool.submit(lambda: None).result()  # its one thread has made what was queued


def test_ahead_makes_items_in_order_up_to_depth_then_fewer_when_large():
    made: list[int] = []
    lock = threading.Lock()

    def make(i: int) -> bytes:
        with lock:
            made.append(i)
        return bytes(100)

    ahead = Ahead(list(range(10)), make, 3, max_bytes=150)  # room for 1.5 results of 100 bytes
    try:
        assert ahead.take(0).result() == bytes(100)
        _drain(ahead)
        assert made == [0, 1, 2, 3]  # this one and three ahead, in order
        ahead.account(100)
        ahead.take(1).result()
        ahead.take(2).result()
        _drain(ahead)
        assert made == [0, 1, 2, 3]  # one ahead of item 2 is 3, made already
        ahead.take(3).result()
        _drain(ahead)
        assert made == [0, 1, 2, 3, 4]  # one ahead now, not three
    finally:
        ahead.close()


def test_ahead_returns_the_error_of_an_item_and_goes_on():
    def make(i: int) -> int:
        if i == 1:
            raise OSError(f"cannot read item {i}")
        return i * 10

    ahead = Ahead([0, 1, 2], make, 2)
    try:
        assert ahead.take(0).result() == 0
        with pytest.raises(OSError, match="cannot read item 1"):
            ahead.take(1).result()
        assert ahead.take(2).result() == 20
        with pytest.raises(KeyError):  # each index is taken once
            ahead.take(2)
    finally:
        ahead.close()


def test_ahead_depth_zero_makes_each_item_when_taken():
    made: list[int] = []
    ahead = Ahead([0, 1, 2], made.append, 0)
    try:
        ahead.take(0).result()
        _drain(ahead)
        assert made == [0]
    finally:
        ahead.close()
