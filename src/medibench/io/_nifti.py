"""Reading one 2-D slice of a NIfTI volume, in a fixed display orientation."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from medibench.io._errors import ImageReadError, require_file

__all__ = ["read_nifti_slice"]

_PLANES = {0: "sagittal", 1: "coronal", 2: "axial"}


def read_nifti_slice(
    path_or_image: str | os.PathLike | object,
    *,
    axis: int = 2,
    index: int | None = None,
    canonical: bool = True,
) -> np.ndarray:
    """Read one slice of a 3-D NIfTI volume as a float64 ``(rows, columns)`` array.

    With ``canonical=True`` the volume is first reordered by ``nibabel.as_closest_canonical``
    to RAS+ (array axis 0 runs left -> right, 1 posterior -> anterior, 2 inferior -> superior),
    so ``axis`` 0/1/2 give sagittal/coronal/axial slices and ``index`` counts along that RAS+
    axis. The slice ``s`` (indexed ``s[u, v]`` by the two remaining axes in order) is returned
    as ``np.rot90(s)``: rows run top -> bottom along ``v`` reversed and columns left -> right
    along ``u``. That is:

    * axial (``axis=2``): top = anterior, left of the image = patient's left;
    * coronal (``axis=1``): top = superior, left of the image = patient's left;
    * sagittal (``axis=0``): top = superior, left of the image = posterior.

    This is the neurological convention (patient's left on the image's left, as nilearn
    draws); ``np.fliplr`` gives the radiological one. With ``canonical=False`` the stored axes
    are used as they are, and the same ``rot90`` is applied, so the anatomical statements above
    hold only if the file is already RAS+.

    Values are the stored values with the header's ``scl_slope``/``scl_inter`` applied. A 4-D
    volume whose extra dimensions all have length 1 is treated as 3-D.

    Args:
        path_or_image: a ``.nii``/``.nii.gz`` path, or a nibabel image (such as nilearn's
            ``load_mni152_template()``).
        axis: 0, 1 or 2.
        index: slice number along ``axis`` (after the canonical reorder), 0-based;
            ``None`` = the middle slice, ``shape[axis] // 2``.
        canonical: reorder to RAS+ first.

    Raises:
        ImageReadError: the path is missing, empty or not a volume nibabel can read.
        ValueError: a volume that is not 3-D, an ``axis`` outside 0..2 or an ``index`` outside
            the volume (the message gives the volume's shape).
    """
    import nibabel as nib

    image, name = _load(path_or_image)
    if canonical:
        image = nib.as_closest_canonical(image)
    shape = tuple(int(s) for s in image.shape)
    if len(shape) < 3 or any(s != 1 for s in shape[3:]):
        raise ValueError(f"{name}: expected a 3-D volume, got shape {shape}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or axis not in _PLANES:
        raise ValueError(
            f"{name}: axis must be 0, 1 or 2 for a volume of shape {shape}, got {axis!r}"
        )
    size = shape[axis]
    if index is None:
        index = size // 2
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < size:
        raise ValueError(
            f"{name}: index {index!r} is out of range for axis {axis} ({_PLANES[axis]}) of a "
            f"volume of shape {shape}: valid indices are 0..{size - 1}"
        )
    slicer: list[int | slice] = [slice(None)] * 3 + [0] * (len(shape) - 3)
    slicer[axis] = int(index)
    plane = np.asarray(image.dataobj[tuple(slicer)], dtype=np.float64)
    return np.ascontiguousarray(np.rot90(plane))


def _load(path_or_image: str | os.PathLike | object) -> tuple[Any, str]:
    """A nibabel image and the name to use in messages.

    The image is duck-typed (``dataobj``, ``shape``, ``affine``): ``nib.load`` is annotated as
    returning ``FileBasedImage``, which declares none of them, and in-memory images are
    accepted by those attributes alone, so the image is typed ``Any``.
    """
    import nibabel as nib

    if isinstance(path_or_image, (str, os.PathLike)):
        require_file(path_or_image)
        try:
            return nib.load(os.fspath(path_or_image)), os.fspath(path_or_image)
        except Exception as exc:  # nibabel raises ImageFileError, EOFError, zlib errors...
            raise ImageReadError(
                path_or_image, f"not a volume nibabel can read ({type(exc).__name__}: {exc})"
            ) from exc
    if not (hasattr(path_or_image, "dataobj") and hasattr(path_or_image, "affine")):
        raise TypeError(
            "read_nifti_slice: expected a path or a nibabel image, "
            f"got {type(path_or_image).__name__}"
        )
    filename = path_or_image.get_filename() if hasattr(path_or_image, "get_filename") else None
    return path_or_image, filename or f"<{type(path_or_image).__name__} in memory>"
