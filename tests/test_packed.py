"""``PackedList`` and ``PackedFile``: a list kept pickled (in memory, or in a temporary file)
behaves as the list it holds (issue 41)."""

from __future__ import annotations

import pytest

from medibench._packed import PackedFile, PackedList
from medibench.samples import Prediction


def test_a_packed_list_gives_back_equal_items_in_order_and_sorts_stably():
    preds = [Prediction(sample_id=s, model=m, k=0, seed=i) for i, (s, m) in
             enumerate([("b", "x"), ("a", "y"), ("b", "y"), ("a", "x")])]  # fmt: skip
    packed = PackedList(preds)
    assert len(packed) == 4 and list(packed) == preds and packed == preds == PackedList(preds)
    assert packed != preds[:3] and packed != "abcd"
    assert packed[-1] == preds[3] and packed[1:3] == preds[1:3]
    packed.sort(key=lambda p: p.sample_id)  # stable: a's and b's keep their order
    assert [(p.sample_id, p.model) for p in packed] == [("a", "y"), ("a", "x"), ("b", "x"),
                                                        ("b", "y")]  # fmt: skip
    packed.append(preds[0])
    assert packed[4] == preds[0] and packed[4] is not preds[0]
    with pytest.raises(IndexError, match="index 5 out of range for 5 items"):
        packed[5]


def test_a_packed_file_gives_back_equal_items_in_order_and_sorts_stably():
    preds = [Prediction(sample_id=s, model=m, k=0, seed=i) for i, (s, m) in
             enumerate([("b", "x"), ("a", "y"), ("b", "y"), ("a", "x")])]  # fmt: skip
    packed = PackedFile(preds)
    assert len(packed) == 4 and list(packed) == preds == PackedList(preds) and packed == preds
    assert packed[-1] == preds[3] and packed[1:3] == preds[1:3]
    packed.sort(key=lambda p: p.sample_id)  # stable: a's and b's keep their order
    assert [(p.sample_id, p.model) for p in packed] == [("a", "y"), ("a", "x"), ("b", "x"),
                                                        ("b", "y")]  # fmt: skip
    packed.append(preds[0])  # after a sort: at the end, read back while the file is written
    assert packed[4] == preds[0] and packed[4] is not preds[0] and packed[0] == preds[1]
    with pytest.raises(IndexError, match="index 5 out of range for 5 items"):
        packed[5]
