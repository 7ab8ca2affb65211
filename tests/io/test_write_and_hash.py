"""Atomic writes and content hashes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import medibench.io._write as write_module
from medibench.io import (
    atomic_write_bytes,
    atomic_write_text,
    sha256_bytes,
    sha256_file,
    write_image,
)


def test_atomic_write_leaves_only_the_file(tmp_path):
    target = tmp_path / "sub" / "out.bin"
    atomic_write_bytes(target, b"first")
    atomic_write_bytes(target, b"second")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.bin"]


def test_failed_write_keeps_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    atomic_write_text(target, "old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(write_module.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_write_in_pieces_is_the_whole_or_nothing(tmp_path):
    target = tmp_path / "records.jsonl"
    atomic_write_bytes(target, (f"{i}\n".encode() for i in range(3)))
    assert target.read_bytes() == b"0\n1\n2\n"

    def cut_short():
        yield b"3\n"
        raise RuntimeError("the records ran out")

    with pytest.raises(RuntimeError, match="the records ran out"):
        atomic_write_bytes(target, cut_short())
    assert target.read_bytes() == b"0\n1\n2\n"  # the old file, and no temp file beside it
    assert [p.name for p in tmp_path.iterdir()] == ["records.jsonl"]


def test_sha256_matches_hashlib(tmp_path):
    data = bytes(range(256)) * 5000  # over one 1 MiB chunk
    path = atomic_write_bytes(tmp_path / "d.bin", data)
    expected = hashlib.sha256(data).hexdigest()
    assert sha256_file(path) == expected
    assert sha256_file(path, chunk_size=1000) == expected
    assert sha256_bytes(data) == expected
    assert sha256_bytes(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_write_image_refuses_float_and_odd_shapes(tmp_path):
    with pytest.raises(ValueError, match="float64.*never guesses"):
        write_image(tmp_path / "f.png", np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"got \(2, 2, 2\)"):
        write_image(tmp_path / "s.png", np.zeros((2, 2, 2), np.uint8))
    assert list(tmp_path.iterdir()) == []
