"""read_dicom and read_dicom_seg: hand-computed windows on synthetic files, pydicom's test files."""

from __future__ import annotations

import numpy as np
import pydicom
import pytest
from pydicom.data import get_testdata_file
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.pixels import apply_color_lut, apply_windowing, get_decoder, pixel_array
from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

from medibench.io import ImageReadError, read_dicom, read_dicom_seg, read_image

# Stored [[312, 462], [512, 612]] with slope 2, intercept -1024 -> HU [[-400, -100], [0, 200]].
STORED = np.array([[312, 462], [512, 612]], dtype=np.uint16)
HU = [[-400.0, -100.0], [0.0, 200.0]]
# LINEAR, c=0, w=1001: y = (v + 0.5) / 1000 + 0.5 -> 0.1005, 0.4005, 0.5005, 0.7005;
# times 255: 25.63, 102.13, 127.63, 178.63. (The plain (v - c) / w + 0.5 would give 178 for 200.)
LINEAR_0_1001 = [[26, 102], [128, 179]]
# LINEAR_EXACT, c=-50, w=1000: y = (v + 50) / 1000 + 0.5 -> 0.15, 0.45, 0.55, 0.75 -> *255:
# 38.25, 114.75, 140.25, 191.25.
EXACT_M50_1000 = [[38, 115], [140, 191]]


def _write(path, pixels, *, photometric="MONOCHROME2", slope=2, intercept=-1024, **elements):
    """A small uncompressed DICOM with known pixels; ``elements`` are set on the dataset."""
    pixels = np.asarray(pixels, dtype=np.uint16)
    meta = FileMetaDataset()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = CTImageStorage
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Modality = "CT"
    ds.Rows, ds.Columns = pixels.shape[-2:]
    if pixels.ndim == 3:
        ds.NumberOfFrames = pixels.shape[0]
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = photometric
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    if slope is not None:
        ds.RescaleSlope, ds.RescaleIntercept = slope, intercept
    for keyword, value in elements.items():
        setattr(ds, keyword, value)
    ds.PixelData = pixels.tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


# ---- synthetic files: every step by hand ------------------------------------------------------


def test_rescale_gives_modality_units(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED)
    out = read_dicom(path, output="float", window=None)
    assert out.dtype == np.float64 and out.tolist() == HU


def test_file_window_uses_the_standard_linear_formula(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED, WindowCenter=0, WindowWidth=1001)
    out = read_dicom(path)
    assert out.dtype == np.uint8 and out.tolist() == LINEAR_0_1001
    np.testing.assert_array_equal(read_dicom(path, window=(0, 1001)), out)


def test_monochrome1_is_inverted_for_display_only(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED, photometric="MONOCHROME1",
                  WindowCenter=0, WindowWidth=1001)
    assert read_dicom(path).tolist() == [[229, 153], [127, 76]]  # 255 - LINEAR_0_1001
    assert read_dicom(path, output="float", window=None).tolist() == HU


def test_float_output_clips_to_the_window(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED, WindowCenter=0, WindowWidth=1001)
    assert read_dicom(path, window=(0, 300), output="float").tolist() == [[-150, -100], [0, 150]]
    clipped = read_dicom(path, output="float")  # file window: [-500.5, 500.5] clips nothing
    assert clipped.tolist() == HU


def test_min_max_when_the_file_has_no_window(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED)
    # (v + 400) / 600 * 255 = 0, 127.5 (tie -> 128), 170, 255
    assert read_dicom(path).tolist() == [[0, 128], [170, 255]]
    flat = _write(tmp_path / "flat.dcm", np.full((2, 2), 7))
    assert read_dicom(flat).tolist() == [[0, 0], [0, 0]]


def test_linear_exact_and_sigmoid_from_the_file(tmp_path):
    exact = _write(tmp_path / "e.dcm", STORED, WindowCenter=-50, WindowWidth=1000,
                   VOILUTFunction="LINEAR_EXACT")
    assert read_dicom(exact).tolist() == EXACT_M50_1000
    sigmoid = _write(tmp_path / "s.dcm", STORED, WindowCenter=0, WindowWidth=400,
                     VOILUTFunction="SIGMOID")
    # 255 / (1 + exp(-4 v / 400)): 4.59, 68.57, 127.5 (tie -> 128), 224.61
    assert read_dicom(sigmoid).tolist() == [[5, 69], [128, 225]]
    # An explicit window is always LINEAR, whatever the file says.
    assert read_dicom(sigmoid, window=(0, 1001)).tolist() == LINEAR_0_1001


def test_first_of_several_windows_and_width_one_step(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED, WindowCenter=[0, 40], WindowWidth=[1001, 80])
    assert read_dicom(path).tolist() == LINEAR_0_1001
    # Width 1: at or below c - 0.5 is black, above is white.
    assert read_dicom(path, window=(0, 1)).tolist() == [[0, 0], [255, 255]]


def test_no_rescale_means_stored_values(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED, slope=None)
    assert read_dicom(path, output="float", window=None).tolist() == STORED.tolist()


def test_multi_frame_needs_a_frame(tmp_path):
    frames = np.stack([STORED, STORED + 1, STORED + 2])
    path = _write(tmp_path / "mf.dcm", frames)
    with pytest.raises(ImageReadError, match=r"has 3 frames; choose one with frame=0\.\.2"):
        read_dicom(path)
    out = read_dicom(path, frame=2, output="float", window=None)
    assert out.tolist() == (np.asarray(HU) + 4).tolist()
    with pytest.raises(ImageReadError, match=r"frame 3 is out of range: the file has 3 frame"):
        read_dicom(path, frame=3)
    with pytest.raises(ImageReadError, match="out of range"):
        read_dicom(path, frame=-1)
    with pytest.raises(ValueError, match="frame must be an int"):
        read_dicom(path, frame=1.0)


def test_enhanced_functional_groups_per_frame(tmp_path):
    shared = Dataset()
    transform = Dataset()
    transform.RescaleSlope, transform.RescaleIntercept, transform.RescaleType = 2, -1024, "HU"
    shared.PixelValueTransformationSequence = [transform]
    per_frame = []
    for centre, width, function in ((0, 1001, "LINEAR"), (-50, 1000, "LINEAR_EXACT")):
        voi = Dataset()
        voi.WindowCenter, voi.WindowWidth, voi.VOILUTFunction = centre, width, function
        item = Dataset()
        item.FrameVOILUTSequence = [voi]
        per_frame.append(item)
    path = _write(tmp_path / "enh.dcm", np.stack([STORED, STORED]), slope=None,
                  SharedFunctionalGroupsSequence=[shared],
                  PerFrameFunctionalGroupsSequence=per_frame)
    assert read_dicom(path, frame=0, output="float", window=None).tolist() == HU
    assert read_dicom(path, frame=0).tolist() == LINEAR_0_1001
    assert read_dicom(path, frame=1).tolist() == EXACT_M50_1000


def test_argument_errors(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED)
    with pytest.raises(ValueError, match="only valid with output='float'"):
        read_dicom(path, window=None)
    with pytest.raises(ValueError, match=">= 1"):
        read_dicom(path, window=(40, 0))
    with pytest.raises(ValueError, match="window must be"):
        read_dicom(path, window="lung")
    with pytest.raises(ValueError, match="output must be"):
        read_dicom(path, output="uint16")


def test_invalid_window_in_file(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED, WindowCenter=0, WindowWidth=0)
    with pytest.raises(ImageReadError, match=r"invalid WindowWidth 0\.0.*pass window="):
        read_dicom(path)


# ---- bad files ---------------------------------------------------------------------------------


def test_bad_files(tmp_path):
    with pytest.raises(ImageReadError, match="file not found"):
        read_dicom(tmp_path / "missing.dcm")
    empty = tmp_path / "empty.dcm"
    empty.write_bytes(b"")
    with pytest.raises(ImageReadError, match="empty file"):
        read_dicom(empty)
    text = tmp_path / "text.dcm"
    text.write_text("not a dicom at all\n" * 20)
    with pytest.raises(ImageReadError, match="not a DICOM file") as err:
        read_dicom(text)
    assert str(err.value).startswith(str(text))
    with pytest.raises(ImageReadError, match="not a DICOM file"):
        read_image(text)  # the .dcm suffix routes it to read_dicom


def test_truncated_pixel_data(tmp_path):
    data = _write(tmp_path / "a.dcm", STORED).read_bytes()
    cut = tmp_path / "cut.dcm"
    cut.write_bytes(data[:-3])
    with pytest.raises(ImageReadError, match="pixel data could not be decoded"):
        read_dicom(cut)


def test_no_pixel_data(tmp_path):
    path = _write(tmp_path / "a.dcm", STORED)
    ds = pydicom.dcmread(path)
    del ds.PixelData
    ds.save_as(path)
    with pytest.raises(ImageReadError, match="has no pixel data"):
        read_dicom(path)


def test_compressed_without_decoder_names_packages():
    path = get_testdata_file("JPEG-LL.dcm")
    ds = pydicom.dcmread(path)
    if get_decoder(ds.file_meta.TransferSyntaxUID).is_available:
        pytest.skip("a JPEG Lossless decoder is installed here")
    with pytest.raises(ImageReadError, match=r"compressed with JPEG Lossless.*install.*pylibjpeg"):
        read_dicom(path)


# ---- pydicom's test files ----------------------------------------------------------------------


def _raw(name):
    ds = pydicom.dcmread(get_testdata_file(name))
    return ds, pixel_array(ds)


def test_ct_small_hounsfield_units():
    ds, raw = _raw("CT_small.dcm")
    out = read_dicom(get_testdata_file("CT_small.dcm"), output="float", window=None)
    np.testing.assert_array_equal(out, raw.astype(np.float64) - 1024)
    assert out.shape == (128, 128)


def test_ct_693_window_matches_hand_formula_and_pydicom():
    ds, raw = _raw("693_UNCR.dcm")
    hu = raw.astype(np.float64) * float(ds.RescaleSlope) + float(ds.RescaleIntercept)
    centre, width = float(ds.WindowCenter), float(ds.WindowWidth)
    assert (centre, width) == (40.0, 100.0)
    expected = np.rint(np.clip((hu - 39.5) / 99 + 0.5, 0, 1) * 255).astype(np.uint8)
    out = read_dicom(get_testdata_file("693_UNCR.dcm"))
    np.testing.assert_array_equal(out, expected)
    # pydicom's own LINEAR window, normalised to 0..1, agrees to float precision.
    ref = apply_windowing(hu, ds)
    ref = (ref - ref.min()) / (ref.max() - ref.min())
    np.testing.assert_allclose(np.clip((hu - 39.5) / 99 + 0.5, 0, 1), ref, atol=1e-9)


def test_mr2_fractional_rescale_slope():
    ds, raw = _raw("MR2_UNCR.dcm")
    out = read_dicom(get_testdata_file("MR2_UNCR.dcm"), output="float", window=None)
    np.testing.assert_allclose(out, raw * 3.774114 + 0.000061)
    assert read_dicom(get_testdata_file("MR_small.dcm")).shape == (64, 64)


def test_monochrome1_radiographs_show_dense_as_bright():
    rg1 = read_dicom(get_testdata_file("RG1_UNCR.dcm"))
    assert rg1.shape == (1955, 1841)
    # Air above the shoulders (high stored values) is darker than the mediastinum (low ones).
    assert rg1[:50, :50].mean() < 100 and rg1[950:1000, 900:950].mean() > 200
    _, raw = _raw("RG3_UNCR.dcm")
    rg3 = read_dicom(get_testdata_file("RG3_UNCR.dcm"))
    # Window 550/1024 on stored values: stored 0 (collimated, unexposed) is white.
    assert raw[0, 0] == 0 and rg3[0, 0] == 255
    expected = 255 - np.rint(np.clip((raw - 549.5) / 1023 + 0.5, 0, 1) * 255).astype(np.uint8)
    np.testing.assert_array_equal(rg3, expected)


def test_rgb_ultrasound_and_ybr():
    _, raw = _raw("US1_UNCR.dcm")
    out = read_dicom(get_testdata_file("US1_UNCR.dcm"))
    assert out.shape == (480, 640, 3) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, raw)
    ybr = read_dicom(get_testdata_file("SC_ybr_full_uncompressed.dcm"))
    rgb = read_dicom(get_testdata_file("SC_rgb.dcm"))
    assert ybr[0, 0].tolist() == [254, 0, 0] and rgb[0, 0].tolist() == [255, 0, 0]
    assert np.abs(ybr.astype(int) - rgb).max() <= 8  # YCbCr round trip
    with pytest.raises(ImageReadError, match="colour image; a window applies to grayscale"):
        read_dicom(get_testdata_file("US1_UNCR.dcm"), window=(40, 400))


def test_palette_colour():
    ds, raw = _raw("OBXXXX1A.dcm")
    lut = apply_color_lut(raw, ds)
    out = read_dicom(get_testdata_file("OBXXXX1A.dcm"))
    assert out.shape == (600, 800, 3) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, lut >> 8)
    as_float = read_dicom(get_testdata_file("OBXXXX1A.dcm"), output="float")
    np.testing.assert_array_equal(as_float, lut.astype(np.float64))


def test_multi_frame_test_files():
    _, raw = _raw("SC_rgb_2frame.dcm")
    np.testing.assert_array_equal(read_dicom(get_testdata_file("SC_rgb_2frame.dcm"), frame=1),
                                  raw[1])
    emri = get_testdata_file("emri_small.dcm")
    with pytest.raises(ImageReadError, match="has 10 frames"):
        read_dicom(emri)
    assert read_dicom(emri, frame=9).shape == (64, 64)
    with pytest.raises(ImageReadError, match="frame 10 is out of range.*10 frame"):
        read_dicom(emri, frame=10)


def test_seg_liver():
    segments = read_dicom_seg(get_testdata_file("liver.dcm"))
    assert list(segments) == [1]
    liver = segments[1]
    assert liver.shape == (3, 512, 512) and liver.dtype == bool
    assert liver.sum(axis=(1, 2)).tolist() == [36233, 35645, 35220]


def test_seg_refuses_images():
    with pytest.raises(ImageReadError, match="is not a DICOM SEG"):
        read_dicom_seg(get_testdata_file("CT_small.dcm"))
