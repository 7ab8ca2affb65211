"""What every dataset adapter shares: the error type, the loaded images of a sample, safe paths.

An adapter turns one on-disk layout into :class:`~medibench.samples.Sample` records whose image
paths are absolute. :func:`load_images` then reads those paths into arrays.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medibench.samples import Sample

__all__ = ["DatasetError", "SampleImages", "load_images", "resolve_inside"]


class DatasetError(ValueError):
    """A dataset cannot be read or written: the message names the file, line, sample and problem."""


@dataclass(frozen=True)
class SampleImages:
    """The pixels of one sample.

    Attributes:
        input: uint8 RGB ``(H, W, 3)``.
        target: uint8 RGB ``(H', W', 3)``, or ``None`` when the sample has no target.
        mask: bool ``(H'', W'')``, True inside the ROI, or ``None`` when the sample has no mask.
            Sizes are returned as stored: resizing is a protocol's decision, not the loader's.
    """

    input: np.ndarray
    target: np.ndarray | None
    mask: np.ndarray | None


def load_images(sample: Sample, *, root: str | os.PathLike | None = None) -> SampleImages:
    """Read the input, target and mask of ``sample`` (``read_image(mode="rgb")``, ``read_mask``).

    Paths are used as they are when absolute (as every dataset adapter returns them); a relative
    path is taken relative to ``root`` and is an error without one.
    """
    from medibench.io import read_image, read_mask  # the readers pull in pydicom and nibabel

    def where(path: str) -> Path:
        p = Path(path)
        if p.is_absolute():
            return p
        if root is None:
            raise DatasetError(
                f"sample '{sample.sample_id}': path '{path}' is relative; pass root= or load the "
                "sample through a dataset adapter (which makes paths absolute)"
            )
        return Path(root) / p

    return SampleImages(
        input=read_image(where(sample.input), mode="rgb"),
        target=None if sample.target is None else read_image(where(sample.target), mode="rgb"),
        mask=None if sample.mask is None else read_mask(where(sample.mask)),
    )


def resolve_inside(root: Path, relative: str, *, what: str) -> Path:
    """Resolve ``relative`` against the resolved ``root``, refusing anything that leaves it.

    Refused: an absolute path, a path whose ``..`` parts climb out of ``root``, and a path that
    a symbolic link inside ``root`` sends outside it. ``what`` starts the error message (for
    example ``"samples.jsonl line 3, sample 'a', field 'input'"``). The file need not exist.
    """
    rel = Path(relative)
    if (
        rel.is_absolute()
        or relative.startswith(("/", "\\"))
        or (len(relative) > 1 and relative[1] == ":")
    ):
        raise DatasetError(
            f"{what}: path '{relative}' is absolute; image paths must be relative to the dataset "
            f"folder {root}"
        )
    lexical = Path(os.path.normpath(root / rel))
    if not _is_within(lexical, root):
        raise DatasetError(
            f"{what}: path '{relative}' escapes the dataset folder {root} (via '..')"
        )
    resolved = (root / rel).resolve()
    if not _is_within(resolved, root):
        raise DatasetError(
            f"{what}: path '{relative}' escapes the dataset folder {root} through a symbolic "
            f"link (it resolves to {resolved})"
        )
    return resolved


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
