"""Reading medical images into arrays, encoding them, atomic writes and content hashes.

Images: ``read_image`` (PNG/JPEG/TIFF/BMP, and DICOM by dispatch) and ``decode_image`` (the same
decode from bytes: a Parquet cell gives the pixels its file would), ``read_mask``, ``read_dicom``,
``read_dicom_seg``, ``read_nifti_slice``; in-memory helpers ``to_uint8``, ``to_mask`` (and
``mask_with_note``: a mask with values other than 0 and its maximum is binarised at half its
maximum, noted) and ``composite_alpha`` (RGBA to RGB on black, white, or dropped).
``encode_image`` is the one encoder (PNG, JPEG, WebP bytes of an RGB array); ``write_image``
writes its bytes atomically. Every file that cannot be read raises ``ImageReadError`` (a
``ValueError``) naming the file and the problem. pydicom and nibabel are imported only when a
DICOM or NIfTI file is read.
"""

from medibench.io._arrays import (
    AlphaPolicy,
    composite_alpha,
    mask_with_note,
    to_mask,
    to_uint8,
)
from medibench.io._dicom import read_dicom, read_dicom_seg
from medibench.io._errors import ImageReadError
from medibench.io._images import decode_image, may_have_alpha, read_image, read_mask
from medibench.io._jsonl import finite_or_null, json_lines
from medibench.io._nifti import read_nifti_slice
from medibench.io._write import (
    atomic_write_bytes,
    atomic_write_text,
    encode_image,
    sha256_bytes,
    sha256_file,
    write_image,
)

__all__ = [
    "AlphaPolicy",
    "ImageReadError",
    "atomic_write_bytes",
    "atomic_write_text",
    "composite_alpha",
    "decode_image",
    "encode_image",
    "finite_or_null",
    "json_lines",
    "mask_with_note",
    "may_have_alpha",
    "read_dicom",
    "read_dicom_seg",
    "read_image",
    "read_mask",
    "read_nifti_slice",
    "sha256_bytes",
    "sha256_file",
    "to_mask",
    "to_uint8",
    "write_image",
]
