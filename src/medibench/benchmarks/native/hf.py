"""``native:DIR`` for an ``hf-parquet`` export (``medibench export-dataset``, docs/sources.md).

A folder with ``samples.jsonl`` is read by :func:`~medibench.datasets.read_native`; a folder
whose ``data/`` holds Parquet shards with the export's columns (or one such ``.parquet`` file)
is read row group by row group: each image cell's bytes are written once, unchanged, to
``.medibench-images/<sha256[:2]>/<sha256><suffix>`` beside the shards' folder (content
addressed, so a second load writes nothing), and the samples point at those files, giving the
same samples and pixels as the dataset exported. A row whose image cell holds no bytes is that
sample's problem (reported in ``problems``), the rest load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from medibench import sources
from medibench.datasets._base import DatasetError, require_samples
from medibench.datasets._export import HF_COLUMNS, HF_DATA
from medibench.datasets.native import NativeDataset, read_native_path
from medibench.datasets.native import detect as detect_native
from medibench.samples import Sample

__all__ = ["ASSETS", "detect", "read", "read_hf_export"]

#: Where a read writes the image cells' bytes, next to the shards' folder.
ASSETS = ".medibench-images"
_REQUIRED = ("sample_id", "benchmark", "input", "instruction", "perspective")
_IMAGES = ("input", "target", "mask")


def detect(root: Path) -> bool:
    """A native folder (``samples.jsonl``) or an ``hf-parquet`` export. Never raises."""
    return detect_native(root) or is_hf_export(root)


def is_hf_export(root: Path) -> bool:
    """Whether ``root/data/`` (or ``root`` itself, a file) holds Parquet with the export's
    columns. Reads one file's footer only."""
    try:
        files = sources.parquet_files(_shards(Path(root)))
        sources.check_columns(files[0], _REQUIRED)
    except (sources.SourceError, ImportError, OSError):
        return False
    return True


def read(path: str | os.PathLike | None = None) -> NativeDataset:
    """Registry factory of ``native:<path>``: a native folder, or an ``hf-parquet`` export."""
    if path is not None and str(path) and not detect_native(Path(path)):
        if Path(path).exists() and is_hf_export(Path(path)):
            return read_hf_export(path)
    return read_native_path(path)


def read_hf_export(path: str | os.PathLike, *, name: str | None = None) -> NativeDataset:
    """Read an ``hf-parquet`` export (its folder, its ``data/`` folder or one shard).

    Raises:
        SourceError: a shard that is not Parquet or lacks the export's columns (naming them).
        DatasetError: a duplicate ``sample_id``; no sample left.
        RecordError: a row that is not a valid sample.
    """
    given = Path(path)
    root = (given if given.is_dir() else given.parent).resolve()
    shards = _shards(given)
    assets = root / ASSETS
    files = sources.parquet_files(shards, what="hf-parquet export")

    def read() -> dict[str, Any]:
        found: list[str] = []
        samples = _read_rows(files, assets, found)
        require_samples(samples, shards, found)
        return {"samples": [s.model_dump(mode="json") for s in samples], "problems": found}

    # The samples of unchanged shards come from the index beside the assets: a second read
    # costs what reading a native folder costs (no Parquet rows, no hashing).
    value = sources.cached_read(assets, files, read, paths=_image_paths)
    samples = [Sample.parse(d, where=f"{assets}") for d in value["samples"]]
    return NativeDataset(name or root.name, root, samples, problems=value["problems"])


def _read_rows(files: list[Path], assets: Path, problems: list[str]) -> list[Sample]:
    samples: list[Sample] = []
    seen: dict[str, str] = {}
    for file in files:
        sources.check_columns(file, HF_COLUMNS)

    def store(row: sources.ParquetRow) -> dict[str, str]:
        return {
            field: str(
                sources.store_image_cell(cell, assets, file=row.file, row=row.index, column=field)
            )
            for field in _IMAGES
            if (cell := row.values[field]) is not None
        }

    rows = sources.iter_parquet_rows(files, HF_COLUMNS)
    for row, stored in sources.map_rows_in_threads(store, rows):
        values = dict(row.values)
        sid = values.get("sample_id")
        if sid in seen:
            raise DatasetError(f"{row.where()}: duplicate sample_id '{sid}' (first: {seen[sid]})")
        seen[str(sid)] = row.where()
        if isinstance(stored, sources.ImageCellError):
            problems.append(f"{stored}; sample '{sid}' skipped")
            continue
        values.update(stored)
        for field in ("source", "metadata"):
            values[field] = json.loads(values[field]) if values[field] else {}
        values["paraphrases"] = values["paraphrases"] or ()
        values["overlay_color"] = values["overlay_color"] or ()
        samples.append(Sample.parse(values, where=row.where()))
    return samples


def _image_paths(value: dict[str, Any]) -> list[str]:
    return [d[f] for d in value["samples"] for f in _IMAGES if d.get(f)]


def _shards(root: Path) -> Path:
    """The file or folder of shards ``root`` stands for: ``root/data`` when there is one."""
    return root / HF_DATA if (root / HF_DATA).is_dir() else root
