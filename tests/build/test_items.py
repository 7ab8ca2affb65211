"""Items as slices: NIfTI, DICOM + SEG and PNG pairs read through medibench.io, binned; the bad
inputs of the issue, each with its error."""

from __future__ import annotations

import shutil

import nibabel as nib
import numpy as np
import pytest
from pydicom.data import get_testdata_file

from medibench.build import BuildError, bin_size, item_slices, read_source
from medibench.io import read_dicom_seg, read_nifti_slice, write_image


def _nifti_source(tmp_path, image, label, extra=""):
    nib.save(nib.Nifti1Image(image.astype(np.float32), np.eye(4)), tmp_path / "t1.nii.gz")
    nib.save(nib.Nifti1Image(label.astype(np.uint8), np.eye(4)), tmp_path / "lab.nii.gz")
    (tmp_path / "SOURCE.yaml").write_text(
        "name: vol\nmodality: MRI\nlicence: test\n"
        "items:\n  - {image: t1.nii.gz, label: lab.nii.gz, patient: p}\n"
        "labels: {1: a, 2: b}\nsplit: {by: patient, test: 0.2}\nbins: [32]\n" + extra,
        encoding="utf-8",
    )
    return read_source(tmp_path / "SOURCE.yaml")


def _volume(shape=(32, 32, 4)):
    rng = np.random.default_rng(0)
    image = rng.uniform(0, 100, shape)
    label = np.zeros(shape, np.uint8)
    label[4:12, 4:12, 1:3] = 1
    label[16:28, 16:28, 2:4] = 2
    return image, label


def test_nifti_slices_match_read_nifti_slice_and_skip_empty_slices(tmp_path):
    image, label = _volume()
    spec = _nifti_source(tmp_path, image, label, "intensity: [0, 100]\n")
    slices = list(item_slices(spec, spec.items[0]))
    assert [s.index for s in slices] == [1, 2, 3]  # slice 0 holds no label
    one = slices[1]
    expected = np.rint(np.clip(read_nifti_slice(tmp_path / "t1.nii.gz", index=2), 0, 100) * 2.55)
    np.testing.assert_array_equal(one.image[..., 0], expected.astype(np.uint8))
    assert one.grayscale and one.image.shape == (32, 32, 3) and one.bin == 32
    lab = read_nifti_slice(tmp_path / "lab.nii.gz", index=2)
    np.testing.assert_array_equal(one.structures["a"], lab == 1)
    np.testing.assert_array_equal(one.structures["b"], lab == 2)
    assert set(slices[0].structures) == {"a"} and set(slices[2].structures) == {"b"}


def test_a_label_map_whose_shape_differs_from_its_image(tmp_path):
    image, label = _volume()
    spec = _nifti_source(tmp_path, image, label[:, :30])
    with pytest.raises(BuildError, match=r"label map .*lab.nii.gz has shape \(32, 30, 4\) but its "
                       r"image .*t1.nii.gz has shape \(32, 32, 4\)"):  # fmt: skip
        list(item_slices(spec, spec.items[0]))


def test_a_label_map_whose_shape_differs_from_its_png_image(tmp_path):
    write_image(tmp_path / "i.png", np.zeros((20, 20), np.uint8))
    write_image(tmp_path / "l.png", np.ones((20, 24), np.uint8))
    (tmp_path / "SOURCE.yaml").write_text(
        "name: png\nmodality: X-ray\nlicence: t\nitems:\n  - {image: i.png, label: l.png}\n"
        "labels: {1: a}\nsplit: {by: item, test: 0.2}\n", encoding="utf-8")  # fmt: skip
    spec = read_source(tmp_path / "SOURCE.yaml")
    with pytest.raises(BuildError, match=r"item 'i': label map .*l.png has shape \(20, 24\)"):
        list(item_slices(spec, spec.items[0]))


def test_labels_named_in_the_yaml_but_absent(tmp_path):
    image, label = _volume()
    label[label == 2] = 0
    spec = _nifti_source(tmp_path, image, label)
    absent = r"labels named in the source are absent from .*lab.nii.gz: 2 \(b\); the map holds"
    with pytest.raises(BuildError, match=absent + r" values \[1\]"):
        list(item_slices(spec, spec.items[0]))
    spec = _nifti_source(tmp_path, image, label, "missing_labels: skip\n")
    assert all(set(s.structures) == {"a"} for s in item_slices(spec, spec.items[0]))


def test_a_volume_with_no_foreground(tmp_path):
    image, label = _volume()
    spec = _nifti_source(tmp_path, image, np.zeros_like(label))
    with pytest.raises(BuildError, match=r"label map .*lab.nii.gz has no foreground"):
        list(item_slices(spec, spec.items[0]))


def test_a_corrupt_dicom(tmp_path):
    folder = tmp_path / "ct"
    folder.mkdir()
    data = open(get_testdata_file("CT_small.dcm"), "rb").read()
    (folder / "a.dcm").write_bytes(data[:-5000])  # pixel data cut short
    write_image(tmp_path / "l.png", np.ones((128, 128), np.uint8))
    (tmp_path / "SOURCE.yaml").write_text(
        "name: ct\nmodality: CT\nlicence: t\nitems:\n  - {image: ct/a.dcm, label: l.png}\n"
        "labels: {1: body}\nsplit: {by: item, test: 0.2}\n", encoding="utf-8")  # fmt: skip
    spec = read_source(tmp_path / "SOURCE.yaml")
    with pytest.raises(BuildError, match=r"item 'a': .*ct/a.dcm: (damaged DICOM|pixel data could "
                       r"not be decoded)"):  # fmt: skip
        list(item_slices(spec, spec.items[0]))
    (folder / "a.dcm").write_bytes(b"\0" * 128 + b"DICM" + b"\xff" * 300)  # garbage header
    with pytest.raises(
        BuildError,
        match=r"item .a.: .*ct/a.dcm: (not a readable DICOM file|has no pixel data|not a complete)",
    ):
        list(item_slices(spec, spec.items[0]))


def test_dicom_series_with_its_seg_matches_frames_by_referenced_uid(demo_sources):
    spec = read_source(demo_sources["liver"])
    slices = list(item_slices(spec, spec.items[0]))
    seg = read_dicom_seg(get_testdata_file("liver.dcm"))[1]
    assert len(slices) == 3 and all(s.raw is not None and s.bin == 512 for s in slices)
    # frame i references the CT of InstanceNumber i + 1 (the demo writes them in SEG order)
    for i, s in enumerate(slices):
        np.testing.assert_array_equal(s.structures["liver"], seg[i])
    assert [int(s.structures["liver"].sum()) for s in slices] == [36233, 35645, 35220]


def test_a_seg_frame_without_its_image_is_named(demo_sources, tmp_path):
    folder = tmp_path / "liver"
    shutil.copytree(demo_sources["liver"].parent, folder)
    (folder / "ct" / "ct2.dcm").unlink()
    spec = read_source(folder / "SOURCE.yaml")
    with pytest.raises(BuildError, match=r"SEG .*liver_seg.dcm frame 1 refers to image 1.2.392"):
        list(item_slices(spec, spec.items[0]))


def test_png_items_and_binary_maps_per_structure(tmp_path):
    rgb = np.random.default_rng(1).integers(0, 255, (40, 60, 3), dtype=np.uint8)
    write_image(tmp_path / "i.png", rgb)
    a = np.zeros((40, 60), bool)
    a[5:15, 5:25] = True
    write_image(tmp_path / "a.png", a)
    (tmp_path / "SOURCE.yaml").write_text(
        "name: png\nmodality: dermoscopy\nlicence: t\nitems:\n"
        "  - {image: i.png, labels: {lesion: a.png}}\nsplit: {by: item, test: 0.2}\n"
        "bins: [64]\n", encoding="utf-8")  # fmt: skip
    spec = read_source(tmp_path / "SOURCE.yaml")
    (s,) = item_slices(spec, spec.items[0])
    assert not s.grayscale and s.image.shape == (48, 64, 3) and s.original_shape == (40, 60)
    assert s.structures["lesion"].shape == (48, 64)


@pytest.mark.parametrize(
    "shape, expected",
    [((117, 99), (128, 128, 112)), ((512, 512), (512, 512, 512)), ((300, 200), (256, 256, 176)),
     ((40, 60), (64, 48, 64)), ((2000, 1000), (512, 512, 256))],
)  # fmt: skip
def test_bin_size_is_the_nearest_bin_in_log_scale(shape, expected):
    bins = (64, 128, 256, 512) if shape == (40, 60) else (128, 256, 512)
    assert bin_size(shape, bins) == expected
