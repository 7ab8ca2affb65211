"""Real medical images that installed packages ship, read into uint8 arrays, with provenance.

Nothing here downloads: pydicom-data and pydicom carry the DICOM files, nilearn carries the
MNI152 template and its tissue masks, scikit-image carries a fundus photograph.
"""

from __future__ import annotations

from functools import cache

import cv2
import numpy as np

__all__ = [
    "SOURCES",
    "dicom_image",
    "mni_slice",
    "mni_mask",
    "retina_image",
    "to_square",
]

_PYDICOM_DATA = "pydicom-data (github.com/pydicom/pydicom-data)"
_NEMA = "NEMA WG04 compression test set (ftp://medical.nema.org/MEDICAL/Dicom/DataSets/WG04)"

#: Provenance and licence of every source image, stored in each sample's ``source`` field.
SOURCES: dict[str, dict[str, str]] = {
    "693_UNCR.dcm": {
        "dataset": _PYDICOM_DATA,
        "file": "693_UNCR.dcm",
        "content": "head CT, axial",
        "origin": "pydicom regression dataset for issue #693",
        "licence": "MIT",
    },
    "RG1_UNCR.dcm": {
        "dataset": _PYDICOM_DATA,
        "file": "RG1_UNCR.dcm",
        "content": "chest radiograph (CR), PA",
        "origin": _NEMA,
        "licence": "MIT",
    },
    "RG3_UNCR.dcm": {
        "dataset": _PYDICOM_DATA,
        "file": "RG3_UNCR.dcm",
        "content": "lower-leg radiograph (CR), non-ossifying fibroma of the distal tibia",
        "origin": _NEMA,
        "licence": "MIT",
    },
    "MR2_UNCR.dcm": {
        "dataset": _PYDICOM_DATA,
        "file": "MR2_UNCR.dcm",
        "content": "shoulder MR, coronal",
        "origin": _NEMA,
        "licence": "MIT",
    },
    "CT_small.dcm": {
        "dataset": "pydicom test files (github.com/pydicom/pydicom)",
        "file": "CT_small.dcm",
        "content": "chest CT, axial, downsized to 128x128",
        "origin": "NEMA WG04 file CT1_UNC, downsized by pydicom",
        "licence": "MIT",
    },
    "mni152": {
        "dataset": "nilearn (MNI152 template as shipped by nilearn.datasets)",
        "file": "mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz (+ gm/wm, brain mask), 2 mm",
        "content": "MNI ICBM152 2009a nonlinear T1 template, skull-stripped, axial slices",
        "origin": "McConnell Brain Imaging Centre, Montreal Neurological Institute",
        "licence": "ICBM 2009 template licence: free use, copy and distribution with the "
        "copyright notice (C) 1993-2009 Louis Collins, McConnell Brain Imaging Centre, "
        "Montreal Neurological Institute, McGill University",
    },
    "retina": {
        "dataset": "scikit-image (skimage.data.retina)",
        "file": "Fundus_photograph_of_normal_left_eye.jpg",
        "content": "fundus photograph of a normal left eye",
        "origin": "Mikael Haggstrom, Wikimedia Commons",
        "licence": "CC0 1.0 (public domain)",
    },
}

# Explicit display windows (centre, width) in the file's rescaled units: medibench never guesses
# a data range. The first three are the windows stored in the files themselves.
_WINDOWS: dict[str, tuple[float, float]] = {
    "693_UNCR.dcm": (40.0, 100.0),  # brain window, HU
    "RG1_UNCR.dcm": (15000.0, 30000.0),
    "RG3_UNCR.dcm": (550.0, 1024.0),
    "MR2_UNCR.dcm": (1000.0, 2000.0),
    "CT_small.dcm": (40.0, 400.0),  # soft-tissue window, HU (the file stores none)
}

_MNI_LOADERS = {  # nilearn's load_mni152_<volume>, through medibench.io's machine-wide cache
    "t1": "template",
    "brain": "brain_mask",
    "white matter": "wm_mask",
    "grey matter": "gm_mask",
}


@cache
def dicom_image(name: str) -> np.ndarray:
    """A pydicom test file as windowed uint8 ``(H, W)`` (MONOCHROME1 inverted: bone is bright)."""
    from pydicom.data import get_testdata_file

    from medibench.io import read_dicom

    path = get_testdata_file(name)
    if path is None:
        raise FileNotFoundError(f"pydicom cannot find its test file {name} (install pydicom-data)")
    image = read_dicom(path, window=_WINDOWS[name], output="uint8")
    image.setflags(write=False)
    return image


@cache
def mni_slice(index: int) -> np.ndarray:
    """Axial slice ``index`` of the 2 mm MNI152 T1 template as uint8 ``(H, W)``, anterior up.

    The template's intensities lie in ``[0, 1]``; that range maps onto 0-255.
    """
    from medibench.io import to_uint8

    image = to_uint8(_mni_axial("t1", index), data_range=(0.0, 1.0))
    image.setflags(write=False)
    return image


@cache
def mni_mask(structure: str, index: int) -> np.ndarray:
    """Mask of ``structure`` on axial slice ``index``, aligned with :func:`mni_slice`.

    ``structure`` is ``"brain"``, ``"white matter"`` or ``"grey matter"``; nilearn's mask is
    thresholded at 0.5. Returns bool ``(H, W)``.
    """
    mask = _mni_axial(structure, index) > 0.5
    mask.setflags(write=False)
    return mask


@cache
def retina_image() -> np.ndarray:
    """scikit-image's fundus photograph, uint8 RGB ``(1411, 1411, 3)``."""
    from skimage.data import retina

    image = retina()
    image.setflags(write=False)
    return image


def to_square(image: np.ndarray, size: int, *, nearest: bool = False) -> np.ndarray:
    """Pad ``image`` with zeros to a centred square, then resize it to ``size`` x ``size``.

    Images use OpenCV's area interpolation when shrinking and bilinear when enlarging; masks
    (``nearest=True``, bool in, bool out) use nearest neighbour.
    """
    arr = np.asarray(image)
    is_bool = arr.dtype == bool
    if is_bool:
        arr = arr.astype(np.uint8)
    h, w = arr.shape[:2]
    n = max(h, w)
    top, left = (n - h) // 2, (n - w) // 2
    pad = [(top, n - h - top), (left, n - w - left)] + [(0, 0)] * (arr.ndim - 2)
    square = np.pad(arr, pad)
    if nearest:
        interpolation = cv2.INTER_NEAREST
    else:
        interpolation = cv2.INTER_AREA if n > size else cv2.INTER_LINEAR
    out = cv2.resize(square, (size, size), interpolation=interpolation)
    return out.astype(bool) if is_bool else out


# --- helpers ---------------------------------------------------------------------------------


@cache
def _mni_volume(kind: str):
    import nibabel as nib

    from medibench.io._mni152 import load_mni152

    image = load_mni152(_MNI_LOADERS[kind], resolution=2)
    # Reorient and load once: slicing the canonical in-memory volume is then cheap (it was
    # 0.5 s per slice when every call reoriented the file-backed volume).
    canonical = nib.as_closest_canonical(image)
    return nib.Nifti1Image(np.asanyarray(canonical.dataobj), canonical.affine, canonical.header)


def _mni_axial(kind: str, index: int) -> np.ndarray:
    from medibench.io import read_nifti_slice

    # Anterior up, the subject's left on the image's left (neurological convention).
    return read_nifti_slice(_mni_volume(kind), axis=2, index=index, canonical=True)
