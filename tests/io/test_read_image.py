"""read_image: round trips, channel order, modes, and every kind of bad file."""

from __future__ import annotations

import io
import pickle

import cv2
import numpy as np
import pytest
from PIL import Image

from medibench.io import ImageReadError, read_image, write_image


def _png_bytes(image: Image.Image, **kwargs) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "PNG", **kwargs)
    return buf.getvalue()


def _random(shape, dtype=np.uint8, seed=0):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(0, int(info.max) + 1, shape, dtype=dtype)


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((5, 7), np.uint8), ((5, 7, 3), np.uint8), ((5, 7, 4), np.uint8), ((5, 7), np.uint16),
     ((5, 7, 3), np.uint16)],
)
def test_png_round_trip_is_exact(tmp_path, shape, dtype):
    image = _random(shape, dtype)
    path = write_image(tmp_path / "x.png", image)
    back = read_image(path, mode="unchanged")
    assert back.dtype == dtype
    np.testing.assert_array_equal(back, image)


@pytest.mark.parametrize("suffix", [".bmp", ".tiff"])
def test_lossless_formats_round_trip(tmp_path, suffix):
    image = _random((6, 4, 3))
    path = write_image(tmp_path / f"x{suffix}", image)
    np.testing.assert_array_equal(read_image(path), image)


def test_jpeg_reads_close_to_what_was_written(tmp_path):
    image = np.full((16, 16, 3), (200, 40, 90), dtype=np.uint8)
    path = write_image(tmp_path / "x.jpg", image)
    back = read_image(path)
    assert back.shape == (16, 16, 3) and back.dtype == np.uint8
    assert np.abs(back.astype(int) - image).max() <= 3  # lossy, but the channel order survives


def test_pure_red_pixel_is_rgb_on_both_sides(tmp_path):
    # Written by OpenCV itself in BGR order: red is (0, 0, 255) there.
    bgr = np.zeros((1, 1, 3), dtype=np.uint8)
    bgr[0, 0] = (0, 0, 255)
    path = tmp_path / "red.png"
    assert cv2.imwrite(str(path), bgr)
    assert read_image(path)[0, 0].tolist() == [255, 0, 0]
    # And write_image takes RGB: what OpenCV reads back raw is BGR.
    write_image(tmp_path / "red2.png", np.array([[[255, 0, 0]]], dtype=np.uint8))
    assert cv2.imread(str(tmp_path / "red2.png"))[0, 0].tolist() == [0, 0, 255]


def test_gray_mode_uses_bt601_luma(tmp_path):
    rgb = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255], [10, 20, 30]]],
                   dtype=np.uint8)
    path = write_image(tmp_path / "c.png", rgb)
    gray = read_image(path, mode="gray")
    # 0.299 R + 0.587 G + 0.114 B, rounded: 76.2, 149.7, 29.1, 255, 18.1
    assert gray.shape == (1, 5) and gray.dtype == np.uint8
    assert gray.tolist() == [[76, 150, 29, 255, 18]]


def test_rgb_mode_repeats_grayscale(tmp_path):
    gray = np.array([[0, 7], [128, 255]], dtype=np.uint8)
    path = write_image(tmp_path / "g.png", gray)
    rgb = read_image(path)
    assert rgb.shape == (2, 2, 3)
    for c in range(3):
        np.testing.assert_array_equal(rgb[:, :, c], gray)
    np.testing.assert_array_equal(read_image(path, mode="gray"), gray)


def test_palette_png_is_expanded_to_its_colours(tmp_path):
    image = Image.new("P", (2, 1))
    image.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    image.putpixel((1, 0), 1)
    path = tmp_path / "p.png"
    path.write_bytes(_png_bytes(image))
    assert read_image(path).tolist() == [[[255, 0, 0], [0, 0, 255]]]
    assert read_image(path, mode="unchanged").tolist() == [[[255, 0, 0], [0, 0, 255]]]


def test_gray_alpha_png(tmp_path):
    path = tmp_path / "la.png"
    path.write_bytes(_png_bytes(Image.new("LA", (2, 1), (100, 50))))
    assert read_image(path, mode="unchanged").tolist() == [[[100, 100, 100, 50]] * 2]
    # Composited on black (issue 10; it was dropped): round(100 * 50 / 255) = 20.
    assert read_image(path).tolist() == [[[20, 20, 20]] * 2]
    assert read_image(path, mode="gray").tolist() == [[20, 20]]
    assert read_image(path, alpha="drop").tolist() == [[[100, 100, 100]] * 2]


def test_rgba_png_keeps_alpha_only_when_unchanged(tmp_path):
    rgba = np.array([[[255, 0, 0, 10], [0, 255, 0, 255]]], dtype=np.uint8)
    path = write_image(tmp_path / "a.png", rgba)
    np.testing.assert_array_equal(read_image(path, mode="unchanged"), rgba)
    # Composited on black (issue 10; it was dropped): round(255 * 10 / 255) = 10.
    assert read_image(path).tolist() == [[[10, 0, 0], [0, 255, 0]]]


def test_16_bit_source_needs_unchanged_mode(tmp_path):
    path = write_image(tmp_path / "d.png", np.array([[0, 1000, 65535]], dtype=np.uint16))
    assert read_image(path, mode="unchanged").tolist() == [[0, 1000, 65535]]
    for mode in ("rgb", "gray"):
        with pytest.raises(ImageReadError, match=r"uint16.*mode='unchanged'.*to_uint8") as err:
            read_image(path, mode=mode)
        assert str(path) in str(err.value)


def test_dicom_is_dispatched_to_read_dicom():
    from pydicom.data import get_testdata_file

    from medibench.io import read_dicom

    path = get_testdata_file("CT_small.dcm")
    expected = read_dicom(path)
    np.testing.assert_array_equal(read_image(path, mode="unchanged"), expected)
    np.testing.assert_array_equal(read_image(path, mode="gray"), expected)
    rgb = read_image(path)
    assert rgb.shape == (*expected.shape, 3)
    np.testing.assert_array_equal(rgb[:, :, 1], expected)
    colour = read_image(get_testdata_file("US1_UNCR.dcm"), mode="gray")
    assert colour.shape == (480, 640)


# ---- bad input: each names the file and the problem -------------------------------------------


def _assert_read_error(path, pattern, **kwargs):
    with pytest.raises(ImageReadError, match=pattern) as err:
        read_image(path, **kwargs)
    assert str(err.value).startswith(str(path))
    assert err.value.path == str(path)
    return err.value


def test_missing_file(tmp_path):
    _assert_read_error(tmp_path / "nope.png", "file not found")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.png"
    path.write_bytes(b"")
    _assert_read_error(path, r"empty file \(0 bytes\)")


def test_directory(tmp_path):
    _assert_read_error(tmp_path, "is a directory")


def test_text_file_is_not_an_image(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("id,label\n1,liver\n")
    _assert_read_error(path, "not an image: the file holds text")


def test_unknown_binary_is_unsupported(tmp_path):
    path = tmp_path / "blob.png"
    path.write_bytes(bytes(range(256)) * 4)
    _assert_read_error(path, "not an image or an unsupported format")


@pytest.mark.parametrize("cut", [1, 12, 40, 300])
def test_truncated_png(tmp_path, cut):
    data = (write_image(tmp_path / "ok.png", _random((32, 32, 3)))).read_bytes()
    path = tmp_path / "cut.png"
    path.write_bytes(data[:-cut])
    _assert_read_error(path, "truncated PNG")


def test_truncated_jpeg(tmp_path):
    data = write_image(tmp_path / "ok.jpg", _random((32, 32, 3))).read_bytes()
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 2])
    _assert_read_error(path, "truncated JPEG")


def test_truncated_bmp(tmp_path):
    data = write_image(tmp_path / "ok.bmp", _random((32, 32, 3))).read_bytes()
    path = tmp_path / "cut.bmp"
    path.write_bytes(data[:-100])
    _assert_read_error(path, "truncated BMP")


def test_corrupt_png_body(tmp_path):
    data = bytearray(write_image(tmp_path / "ok.png", _random((32, 32, 3))).read_bytes())
    data[60:400] = bytes(340)  # wipe the start of the compressed stream, keep IEND
    path = tmp_path / "bad.png"
    path.write_bytes(bytes(data))
    _assert_read_error(path, "could not decode this PNG")


def test_nifti_points_to_read_nifti_slice(tmp_path):
    path = tmp_path / "vol.nii.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(100))
    _assert_read_error(path, r"NIfTI volume.*read_nifti_slice")


def test_bad_mode_is_a_value_error(tmp_path):
    path = write_image(tmp_path / "x.png", np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match="mode must be"):
        read_image(path, mode="bgr")


def test_image_read_error_is_a_value_error_and_pickles():
    err = ImageReadError("/data/x.png", "truncated PNG")
    assert isinstance(err, ValueError)
    assert str(err) == "/data/x.png: truncated PNG"
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, back.problem, str(back)) == (err.path, err.problem, str(err))


def test_importing_io_does_not_import_pydicom_or_nibabel():
    import subprocess
    import sys

    code = "import sys, medibench.io; print('pydicom' in sys.modules, 'nibabel' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
