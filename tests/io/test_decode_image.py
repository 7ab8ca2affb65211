"""decode_image: the bytes of a file decode to exactly the pixels read_image gives the file."""

from __future__ import annotations

import numpy as np
import pytest
from pydicom.data import get_testdata_file

from medibench.io import ImageReadError, decode_image, encode_image, read_image


def _random(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
@pytest.mark.parametrize("mode", ["rgb", "rgba", "gray", "unchanged"])
def test_bytes_and_file_give_identical_pixels(tmp_path, fmt, mode):
    data = encode_image(_random((24, 32, 3)), f".{fmt}")
    path = tmp_path / f"image.{fmt}"
    path.write_bytes(data)
    got = decode_image(data, name="cell", mode=mode)
    np.testing.assert_array_equal(got, read_image(path, mode=mode))


def test_alpha_is_composited_and_noted_as_for_files(tmp_path):
    rgba = _random((8, 8, 4), seed=1)
    data = encode_image(rgba, ".png")
    notes: list[str] = []
    got = decode_image(data, name="shard.parquet row 2, column 'image'", notes=notes)
    path = tmp_path / "a.png"
    path.write_bytes(data)
    np.testing.assert_array_equal(got, read_image(path))
    assert notes and notes[0].startswith("shard.parquet row 2, column 'image': ")


def test_dicom_bytes_decode_like_the_file():
    path = get_testdata_file("CT_small.dcm")
    with open(path, "rb") as fh:
        data = fh.read()
    np.testing.assert_array_equal(decode_image(data, name="ct"), read_image(path))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty image"),
        (b"hello, not an image", "not an image"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "truncated PNG"),
    ],
)
def test_bad_bytes_name_the_source(data, problem):
    with pytest.raises(ImageReadError, match=rf"^cell 7: .*{problem}"):
        decode_image(data, name="cell 7")


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be"):
        decode_image(b"x", name="x", mode="cmyk")  # type: ignore[arg-type]
