"""read_mask, to_mask and to_uint8: hand-computed values and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.io import ImageReadError, read_mask, to_mask, to_uint8, write_image

# ---- to_uint8 ---------------------------------------------------------------------------------


def test_to_uint8_explicit_range():
    x = np.array([-1100.0, -1000.0, 0.0, 1.0, 1000.0, 2000.0])
    # (x + 1000) / 2000 * 255 = -12.75 (clip 0), 0, 127.5 (tie -> 128), 127.6275, 255, 382.5 (clip)
    assert to_uint8(x, data_range=(-1000, 1000)).tolist() == [0, 0, 128, 128, 255, 255]


def test_to_uint8_rounds_ties_to_even():
    # 0.5, 1.5, 2.5 after scaling with range (0, 255): rint gives 0, 2, 2
    assert to_uint8(np.array([0.5, 1.5, 2.5]), data_range=(0, 255)).tolist() == [0, 2, 2]


def test_to_uint8_minmax_is_explicit():
    x = np.array([[10, 20], [30, 50]], dtype=np.uint16)
    # (x - 10) / 40 * 255 = 0, 63.75, 127.5, 255
    assert to_uint8(x, data_range="minmax").tolist() == [[0, 64], [128, 255]]
    assert to_uint8(np.full((2, 2), 7.0), data_range="minmax").tolist() == [[0, 0], [0, 0]]


def test_to_uint8_keeps_shape_and_handles_bool():
    out = to_uint8(np.ones((2, 3, 3), dtype=bool), data_range=(0, 1))
    assert out.shape == (2, 3, 3) and out.dtype == np.uint8 and (out == 255).all()


@pytest.mark.parametrize("bad", [(5, 5), (5, 1), (0, np.inf), "auto", None, (1,)])
def test_to_uint8_refuses_bad_ranges(bad):
    with pytest.raises(ValueError, match="data_range"):
        to_uint8(np.zeros(3), data_range=bad)


def test_to_uint8_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        to_uint8(np.array([0.0, np.nan]), data_range=(0, 1))


# ---- to_mask ----------------------------------------------------------------------------------


def test_to_mask_nonzero_is_inside():
    # Binary (0 and one value): non-zero is inside.
    m = to_mask(np.array([[0, 7], [7, 0]], dtype=np.int16))
    assert m.dtype == bool and m.tolist() == [[False, True], [True, False]]
    # Other levels too: binarised at half the maximum (issue 10; any non-zero counted before).
    m = to_mask(np.array([[0, 1], [255, -3]], dtype=np.int16))
    assert m.tolist() == [[False, False], [True, False]]
    assert to_mask(np.array([[0.0, 0.2]])).tolist() == [[False, True]]
    assert to_mask(np.zeros((2, 2))).sum() == 0  # empty is allowed: the metric decides


def test_to_mask_identical_channels_accepted():
    plane = np.array([[0, 255], [255, 0]], dtype=np.uint8)
    for stacked in (np.stack([plane] * 3, axis=2), plane[:, :, None],
                    np.dstack([plane, plane, plane, np.full_like(plane, 255)])):
        assert to_mask(stacked).tolist() == [[False, True], [True, False]]


def test_to_mask_refuses_differing_channels():
    rgb = np.zeros((2, 2, 3), dtype=np.uint8)
    rgb[0, 0] = (255, 0, 0)
    rgb[1, 1] = (255, 255, 255)
    with pytest.raises(ValueError, match=r"lesion_3: .*identical channels, but 1 pixels differ"):
        to_mask(rgb, name="lesion_3")


def test_to_mask_refuses_transparency_nan_and_odd_shapes():
    rgba = np.zeros((2, 2, 4), dtype=np.uint8)
    with pytest.raises(ValueError, match="transparent"):
        to_mask(rgba)
    with pytest.raises(ValueError, match="NaN"):
        to_mask(np.array([[np.nan]]))
    with pytest.raises(ValueError, match=r"got \(2, 2, 2\)"):
        to_mask(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="dtype"):
        to_mask(np.array([["a"]]))


# ---- read_mask --------------------------------------------------------------------------------


def test_read_mask_gray_png(tmp_path):
    path = write_image(tmp_path / "m.png", np.array([[0, 255, 1]], dtype=np.uint8))
    # 1 is neither 0 nor the maximum: binarised at 127.5 (issue 10; any non-zero counted before).
    assert read_mask(path).tolist() == [[False, True, False]]


def test_read_mask_bool_and_16_bit(tmp_path):
    path = write_image(tmp_path / "b.png", np.array([[True, False]]))
    assert read_mask(path).tolist() == [[True, False]]
    path16 = write_image(tmp_path / "m16.png", np.array([[0, 300]], dtype=np.uint16))
    assert read_mask(path16).tolist() == [[False, True]]


def test_read_mask_three_identical_channels(tmp_path):
    plane = np.array([[0, 200], [200, 0]], dtype=np.uint8)
    path = write_image(tmp_path / "m3.png", np.stack([plane] * 3, axis=2))
    assert read_mask(path).tolist() == [[False, True], [True, False]]


def test_read_mask_refuses_colour_overlay(tmp_path):
    rgb = np.zeros((3, 3, 3), dtype=np.uint8)
    rgb[1, 1] = (255, 0, 0)
    path = write_image(tmp_path / "overlay.png", rgb)
    with pytest.raises(ImageReadError, match="identical channels") as err:
        read_mask(path)
    assert str(err.value).startswith(str(path))


def test_read_mask_missing_file(tmp_path):
    with pytest.raises(ImageReadError, match="file not found"):
        read_mask(tmp_path / "m.png")
