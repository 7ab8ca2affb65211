"""nilearn's MNI152 volumes at 2 mm, resampled once per machine rather than once per process.

nilearn ships the MNI152 template and its tissue maps at 1 mm and resamples them (third-order
splines) on every ``load_mni152_*(resolution=2)``: about 1 s of CPU per volume, paid by every
``medibench suite``, ``run --dataset suite``, ``demo``, ``build demo-sources`` and the MNI152
calibration example in each new process. :func:`load_mni152` keeps each resampled volume (its
array exactly as nilearn gives it, the affine and the header) in medibench's cache folder, under
a key of the nilearn, nibabel and scipy versions that computed it; a missing, stale or unreadable
file is computed again by nilearn and rewritten.
"""

from __future__ import annotations

import io
import os
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from medibench.io._write import atomic_write_bytes

__all__ = ["KINDS", "cache_root", "load_mni152"]

#: the volumes nilearn resamples: ``load_mni152_<kind>``
KINDS = ("template", "brain_mask", "gm_mask", "wm_mask", "gm_template", "wm_template")


def cache_root() -> Path:
    """medibench's cache folder: ``$MEDIBENCH_CACHE``, else ``$XDG_CACHE_HOME/medibench``, else
    ``~/.cache/medibench``."""
    base = os.environ.get("MEDIBENCH_CACHE")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medibench"


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return "-".join(f"{name}{version(name)}" for name in ("nilearn", "nibabel", "scipy"))
    except PackageNotFoundError as exc:
        raise ImportError(
            f"the MNI152 volumes need {exc.name or 'nilearn'}: pip install 'medibench[demo-data]'"
        ) from exc


def _path(kind: str, resolution: int) -> Path:
    return cache_root() / f"mni152-{_versions()}" / f"{kind}-{int(resolution)}mm.npz"


def load_mni152(kind: str, resolution: int = 2) -> Any:
    """``nilearn.datasets.load_mni152_<kind>(resolution=resolution)`` as an in-memory
    ``nibabel.Nifti1Image``: the same array (values and dtype), affine and header, read from the
    cache folder when an earlier process computed it. A new image (and array) on every call, as
    nilearn's: a caller may change it."""
    import nibabel as nib

    data, affine, header = _stored(kind, int(resolution))
    return nib.Nifti1Image(data.copy(), affine.copy(), nib.Nifti1Header(binaryblock=header))


@cache
def _stored(kind: str, resolution: int) -> tuple[np.ndarray, np.ndarray, bytes]:
    """The volume's array, affine and header bytes: from the cache folder, or computed by nilearn
    and written there (once per process; read-only arrays, copied by :func:`load_mni152`)."""
    import nibabel as nib

    if kind not in KINDS:
        raise ValueError(f"unknown MNI152 volume {kind!r}: one of {', '.join(KINDS)}")
    path = _path(kind, resolution)  # an ImportError naming the extra without nilearn
    try:
        with np.load(path, allow_pickle=False) as stored:
            data, affine = stored["data"], stored["affine"]
            header = stored["header"].tobytes()
        nib.Nifti1Header(binaryblock=header)  # a header nibabel cannot read is unreadable
    except (OSError, KeyError, ValueError):  # missing, half-old or unreadable: compute again
        import nilearn.datasets  # only here: a volume read back needs none of nilearn's imports

        image = getattr(nilearn.datasets, f"load_mni152_{kind}")(resolution=resolution)
        data, affine = np.asanyarray(image.dataobj), np.asarray(image.affine)
        header = bytes(image.header.binaryblock)
        buffer = io.BytesIO()
        np.savez(buffer, data=data, affine=affine, header=np.frombuffer(header, dtype=np.uint8))
        atomic_write_bytes(path, buffer.getvalue(), durable=False)
    for array in (data, affine):
        array.setflags(write=False)
    return data, affine, header
