"""read_nifti_slice: canonical reorder and display orientation pinned by value; MNI152."""

from __future__ import annotations

import re

import nibabel as nib
import numpy as np
import pytest

from medibench.io import ImageReadError, read_image, read_nifti_slice

SHAPE = (4, 5, 6)


def _volume() -> np.ndarray:
    """data[i, j, k] = 100 i + 10 j + k: every voxel says where it is."""
    i, j, k = np.indices(SHAPE)
    return (100 * i + 10 * j + k).astype(np.float32)


def _save(tmp_path, data, affine, name="vol.nii.gz", **header):
    image = nib.Nifti1Image(data, affine)
    for key, value in header.items():
        image.header[key] = value
    path = tmp_path / name
    nib.save(image, path)
    return path


def test_canonical_image_slices_and_orientation(tmp_path):
    path = _save(tmp_path, _volume(), np.eye(4))  # already RAS+
    axial = read_nifti_slice(path, axis=2, index=2)
    # rot90: out[r, c] = data[c, J-1-r, 2]; rows top->bottom = anterior->posterior.
    expected = np.array([[100 * c + 10 * (4 - r) + 2 for c in range(4)] for r in range(5)])
    assert axial.dtype == np.float64 and axial.shape == (5, 4)
    np.testing.assert_array_equal(axial, expected)
    coronal = read_nifti_slice(path, axis=1, index=3)  # out[r, c] = data[c, 3, K-1-r]
    assert coronal.shape == (6, 4)
    assert coronal[0].tolist() == [35, 135, 235, 335]  # top row = most superior (k = 5)
    sagittal = read_nifti_slice(path, axis=0, index=1)  # out[r, c] = data[1, c, K-1-r]
    assert sagittal.shape == (6, 5)
    assert sagittal[:, 0].tolist() == [105, 104, 103, 102, 101, 100]  # left column = posterior


def test_flipped_x_is_reordered_by_value(tmp_path):
    affine = np.diag([-1.0, 1.0, 1.0, 1.0])  # LAS: voxel i runs right -> left
    path = _save(tmp_path, _volume(), affine)
    axial = read_nifti_slice(path, axis=2, index=2)
    # Canonical i_c = 3 - i, so the left column (patient's left) holds the stored i = 3.
    expected = np.array([[100 * (3 - c) + 10 * (4 - r) + 2 for c in range(4)] for r in range(5)])
    np.testing.assert_array_equal(axial, expected)
    raw = read_nifti_slice(path, axis=2, index=2, canonical=False)
    np.testing.assert_array_equal(raw, np.rot90(_volume()[:, :, 2]))


def test_permuted_and_flipped_axes_match_nibabel(tmp_path):
    # Voxel axis 0 -> world z (flipped), axis 1 -> x, axis 2 -> y.
    affine = np.array([[0, 2, 0, 0], [0, 0, 3, 0], [-1, 0, 0, 0], [0, 0, 0, 1]], dtype=float)
    path = _save(tmp_path, _volume(), affine)
    canonical = nib.as_closest_canonical(nib.load(path)).get_fdata()
    assert canonical.shape == (5, 6, 4)
    for axis in range(3):
        for index in range(canonical.shape[axis]):
            expected = np.rot90(np.take(canonical, index, axis=axis))
            np.testing.assert_array_equal(read_nifti_slice(path, axis=axis, index=index), expected)


def test_middle_slice_by_default_and_scaling(tmp_path):
    data = _volume().astype(np.int16)
    path = _save(tmp_path, data, np.eye(4), scl_slope=2.0, scl_inter=1.0)
    out = read_nifti_slice(path)  # axis 2, index 6 // 2 = 3
    np.testing.assert_array_equal(out, np.rot90(2.0 * data[:, :, 3] + 1.0))


def test_accepts_an_image_object_and_singleton_4d():
    image = nib.Nifti1Image(_volume()[..., None], np.eye(4))
    out = read_nifti_slice(image, axis=0, index=0)
    np.testing.assert_array_equal(out, np.rot90(_volume()[0]))


def test_bad_axis_and_index_name_the_shape(tmp_path):
    path = _save(tmp_path, _volume(), np.eye(4))
    shape = r"\(4, 5, 6\)"
    with pytest.raises(ValueError, match=rf"axis must be 0, 1 or 2 for a volume of shape {shape}"):
        read_nifti_slice(path, axis=3)
    with pytest.raises(ValueError, match=rf"index 6 is out of range for axis 2 .*{shape}.*0\.\.5"):
        read_nifti_slice(path, axis=2, index=6)
    with pytest.raises(ValueError, match="index -1 is out of range"):
        read_nifti_slice(path, index=-1)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        read_nifti_slice(path, axis=True)


def test_not_a_3d_volume(tmp_path):
    path = _save(tmp_path, np.zeros((3, 3, 3, 2), np.float32), np.eye(4))
    with pytest.raises(ValueError, match=r"expected a 3-D volume, got shape \(3, 3, 3, 2\)"):
        read_nifti_slice(path)
    with pytest.raises(TypeError, match="expected a path or a nibabel image"):
        read_nifti_slice(np.zeros((3, 3, 3)))


def test_bad_files(tmp_path):
    with pytest.raises(ImageReadError, match="file not found"):
        read_nifti_slice(tmp_path / "missing.nii.gz")
    text = tmp_path / "notes.nii"
    text.write_text("hello\n" * 100)
    with pytest.raises(ImageReadError, match="not a volume nibabel can read") as err:
        read_nifti_slice(text)
    assert str(err.value).startswith(str(text))


def test_read_image_sends_nifti_here(tmp_path):
    path = _save(tmp_path, _volume(), np.eye(4))
    with pytest.raises(ImageReadError, match="read_nifti_slice"):
        read_image(path)


def test_mni152_template_and_brain_mask_align():
    datasets = pytest.importorskip("nilearn.datasets")
    template = datasets.load_mni152_template(resolution=2)
    mask = datasets.load_mni152_brain_mask(resolution=2)
    shape = template.shape
    assert shape == mask.shape and len(shape) == 3
    for axis in range(3):
        t = read_nifti_slice(template, axis=axis)
        m = read_nifti_slice(mask, axis=axis)
        rest = [s for a, s in enumerate(shape) if a != axis]
        assert t.shape == m.shape == (rest[1], rest[0])
        assert set(np.unique(m)) <= {0.0, 1.0} and m.any()
        inside, outside = t[m > 0].mean(), t[m == 0].mean()
        assert inside > 3 * outside  # the mask sits on the brain, not shifted or flipped
