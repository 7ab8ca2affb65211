"""medibench's own dataset layout: a folder with ``samples.jsonl`` and the images.

``samples.jsonl`` holds one :class:`~medibench.samples.Sample` JSON object per line; its image
fields (``input``, ``target``, ``mask``) are paths relative to the folder. Reading checks every
line and refuses any path that leaves the folder (absolute, ``..`` or a symbolic link), and
reports all missing image files together::

    root/
      samples.jsonl
      images/perception-000_input.png
      ...

Example:
    >>> ds = read_native("/data/my-bench")            # doctest: +SKIP
    >>> len(ds), ds.sample_ids()[:2]                   # doctest: +SKIP
    (24, ['perception-000', 'perception-001'])
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from medibench.datasets._base import DatasetError, require_samples, resolve_inside
from medibench.datasets._dataset import Dataset
from medibench.io import atomic_write_bytes, atomic_write_text, json_lines
from medibench.samples import Sample

__all__ = ["MANIFEST", "NativeDataset", "read_native", "read_native_path", "write_native"]

#: File name of the manifest inside a native dataset folder.
MANIFEST = "samples.jsonl"

_IMAGE_FIELDS = ("input", "target", "mask")


class NativeDataset(Dataset):
    """The samples of a native dataset folder, in manifest order, with absolute image paths.

    Predictions are found in medibench's own layout (``<model>/<sample_id>_<k>.png``).
    """

    default_protocols = ("native@1",)


def detect(root: Path) -> bool:
    """Whether the folder ``root`` is a native dataset (has ``samples.jsonl``)."""
    return (Path(root) / MANIFEST).is_file()


def read_native(root: str | os.PathLike, *, name: str | None = None) -> NativeDataset:
    """Read and validate the native dataset in folder ``root``.

    Raises:
        DatasetError: no folder or no manifest; a manifest with no sample (empty, or blank
            lines only); a line that is not JSON; a duplicate
            ``sample_id``; an image path that is absolute or leaves the folder (``..`` or a
            symbolic link); image files that do not exist (all of them listed in one error,
            each with its line, sample id, field and path). Messages name the manifest line.
        RecordError: a line that is JSON but not a valid sample (missing or bad field).
    """
    folder = Path(root)
    manifest = folder / MANIFEST
    if not folder.is_dir():
        raise DatasetError(f"dataset folder {folder} does not exist or is not a folder")
    if not manifest.is_file():
        raise DatasetError(f"{folder} is not a native dataset: it has no {MANIFEST}")
    folder = folder.resolve()
    dataset = NativeDataset(name or folder.name, folder, _read_manifest(folder, manifest))
    require_samples(dataset, manifest)
    return dataset


def write_native(
    root: str | os.PathLike, samples: Iterable[Sample], *, overwrite: bool = False
) -> NativeDataset:
    """Write ``samples`` as a native dataset in folder ``root`` and return it, read back.

    An image path may be relative to ``root`` (the file must already be there), absolute inside
    ``root`` (stored relative), or absolute elsewhere: then the file is copied to
    ``images/<sample_id>_<field><suffix>`` in ``root``. The manifest is written atomically.

    Raises:
        DatasetError: ``root`` already holds a manifest and ``overwrite`` is false; a duplicate
            ``sample_id``; a relative path that leaves ``root``; any image file missing.
    """
    folder = Path(root)
    folder.mkdir(parents=True, exist_ok=True)
    folder = folder.resolve()
    manifest = folder / MANIFEST
    if manifest.exists() and not overwrite:
        raise DatasetError(f"{manifest} already exists; pass overwrite=True to replace it")
    lines: list[str] = []
    seen: set[str] = set()
    for sample in samples:
        sid = sample.sample_id
        if sid in seen:
            raise DatasetError(f"write_native({folder}): duplicate sample_id '{sid}'")
        seen.add(sid)
        update = {}
        for field in _IMAGE_FIELDS:
            value = getattr(sample, field)
            if value is not None:
                update[field] = _store(folder, sid, field, value)
        lines.append(sample.model_copy(update=update).to_json())
    atomic_write_text(manifest, "".join(line + "\n" for line in lines))
    return read_native(folder)


def read_native_path(path: str | os.PathLike | None = None) -> NativeDataset:
    """Registry factory of ``native:<path>``: :func:`read_native` with a required ``path``."""
    if path is None or str(path) == "":
        raise DatasetError("the native dataset needs a folder: use 'native:/path/to/folder'")
    return read_native(path)


# --- helpers ---------------------------------------------------------------------------------


def _read_manifest(folder: Path, manifest: Path) -> Iterator[Sample]:
    """The manifest's samples, one at a time (the dataset packs each as it comes), with their
    image paths resolved; every missing image file is reported together at the end."""
    first_line: dict[str, int] = {}
    missing: list[str] = []
    with open(manifest, encoding="utf-8") as fh:
        for number, line, data, exc in json_lines(fh):
            where = f"{manifest} line {number}"
            if exc is not None:
                raise DatasetError(f"{where}{_guess_id(line)}: not valid JSON ({exc})") from None
            sample = Sample.parse(data, where=where)
            sid = sample.sample_id
            if sid in first_line:
                raise DatasetError(
                    f"{where}: duplicate sample_id '{sid}' (first used on line {first_line[sid]})"
                )
            first_line[sid] = number
            resolved = {}
            for field in _IMAGE_FIELDS:
                value = getattr(sample, field)
                if value is None:
                    continue
                path = resolve_inside(
                    folder, value, what=f"{where}, sample '{sid}', field '{field}'"
                )
                if not path.is_file():
                    missing.append(f"line {number} sample '{sid}' {field} '{value}'")
                resolved[field] = str(path)
            yield sample.model_copy(update=resolved)
    if missing:
        raise DatasetError(
            f"{manifest}: {len(missing)} image file(s) missing: " + "; ".join(missing)
        )


def _store(folder: Path, sample_id: str, field: str, value: str) -> str:
    """The manifest path for one image, copying it into ``folder`` when it lives elsewhere."""
    path = Path(value)
    what = f"write_native({folder}), sample '{sample_id}', field '{field}'"
    if not path.is_absolute():
        resolve_inside(folder, value, what=what)
        return Path(value).as_posix()
    resolved = path.resolve()
    if folder in resolved.parents:
        return resolved.relative_to(folder).as_posix()
    if not resolved.is_file():
        raise DatasetError(f"{what}: image file {path} does not exist")
    relative = f"images/{sample_id}_{field}{path.suffix.lower()}"
    atomic_write_bytes(folder / relative, resolved.read_bytes())
    return relative


_ID_IN_LINE = re.compile(r'"sample_id"\s*:\s*"([^"\\]*)"')


def _guess_id(line: str) -> str:
    # A broken line cannot be parsed, but its sample_id is often still readable: name it.
    match = _ID_IN_LINE.search(line)
    return f" (sample '{match.group(1)}'?)" if match else ""
