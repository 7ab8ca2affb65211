"""Issue 10, item 6: alpha is composited (never silently dropped) and a mask with values other
than 0 and its maximum is binarised at half its maximum, each with a note."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.io import (
    composite_alpha,
    mask_with_note,
    read_image,
    read_mask,
    to_mask,
    write_image,
)


def _square_mask(tmp_path, suffix):
    """A 32x32 mask with a 14x14 = 196 px ROI (value 255), written as ``suffix``."""
    plane = np.zeros((32, 32), np.uint8)
    plane[9:23, 9:23] = 255
    return write_image(tmp_path / f"roi{suffix}", plane)


def test_jpeg_mask_keeps_its_196_px_roi_and_notes_the_halo(tmp_path):
    path = _square_mask(tmp_path, ".jpg")
    raw = read_image(path, mode="unchanged")
    halo = int(np.count_nonzero((raw != 0) & (raw != raw.max())))
    nonzero = int(np.count_nonzero(raw))
    assert halo > 0 and nonzero > 196  # what "any non-zero" used to count
    notes: list[str] = []
    mask = read_mask(path, notes=notes)
    assert int(mask.sum()) == 196
    assert notes == [
        f"mask {path}: {halo} pixels have values other than 0 and its maximum 255 (compression "
        "halos or soft edges?); binarised at half the maximum (value > 127.5): 196 pixels "
        f"inside ({nonzero} would be non-zero)"
    ]


def test_binary_masks_are_unchanged_and_not_noted(tmp_path):
    notes: list[str] = []
    mask = read_mask(_square_mask(tmp_path, ".png"), notes=notes)
    assert int(mask.sum()) == 196 and notes == []
    for plane in (np.array([[0, 1, 1]]), np.array([[0, 7, 0]]), np.array([[False, True]])):
        assert mask_with_note(plane)[1] is None
        assert to_mask(plane).tolist() == (plane != 0).tolist()


def test_half_maximum_rule_on_arrays():
    plane = np.array([[0, 10, 100, 101, 200]], dtype=np.uint8)
    mask, note = mask_with_note(plane, name="m")
    assert mask.tolist() == [[False, False, False, True, True]]
    assert note == (
        "m: 3 pixels have values other than 0 and its maximum 200 (compression halos or soft "
        "edges?); binarised at half the maximum (value > 100): 2 pixels inside (4 would be "
        "non-zero)"
    )
    with pytest.raises(ValueError, match="no positive value"):
        to_mask(np.array([[0, -1, -2]]), name="neg")


def test_rgba_is_composited_on_black_with_a_note(tmp_path):
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., :3] = (200, 100, 50)
    rgba[..., 3] = 255
    rgba[0, :, 3] = 0  # a transparent row
    rgba[1, 0, 3] = 128
    path = write_image(tmp_path / "in.png", rgba)
    notes: list[str] = []
    rgb = read_image(path, notes=notes)
    assert rgb[0].tolist() == [[0, 0, 0]] * 4
    assert rgb[1, 0].tolist() == [100, 50, 25]  # round(c * 128 / 255)
    assert rgb[2:].tolist() == [[[200, 100, 50]] * 4] * 2
    assert notes == [f"{path}: 5 of 16 pixels are not opaque (alpha < 255); composited on black"]
    # the declared alternatives
    assert read_image(path, alpha="white")[0, 0].tolist() == [255, 255, 255]
    dropped: list[str] = []
    assert read_image(path, alpha="drop", notes=dropped)[0, 0].tolist() == [200, 100, 50]
    assert dropped[0].endswith("alpha dropped (colour kept as stored)")
    assert read_image(path, mode="rgba").tolist() == rgba.tolist()


def test_opaque_alpha_changes_nothing_and_adds_no_note(tmp_path):
    rgba = np.full((3, 3, 4), 255, np.uint8)
    rgba[..., 0] = 9
    notes: list[str] = []
    assert read_image(write_image(tmp_path / "o.png", rgba), notes=notes).tolist() == (
        rgba[..., :3].tolist()
    )
    assert notes == []
    assert composite_alpha(rgba)[1] is None
