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
    samples: list[Sample] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    files = sources.parquet_files(shards, what="hf-parquet export")
    for file in files:
        sources.check_columns(file, HF_COLUMNS)
    for row in sources.iter_parquet_rows(files, HF_COLUMNS):
        values = dict(row.values)
        sid = values.get("sample_id")
        if sid in seen:
            raise DatasetError(f"{row.where()}: duplicate sample_id '{sid}' (first: {seen[sid]})")
        seen[str(sid)] = row.where()
        try:
            for field in _IMAGES:
                if values[field] is not None:
                    values[field] = str(
                        sources.store_image_cell(
                            values[field], assets, file=row.file, row=row.index, column=field
                        )
                    )
        except sources.ImageCellError as exc:
            problems.append(f"{exc}; sample '{sid}' skipped")
            continue
        for field in ("source", "metadata"):
            values[field] = json.loads(values[field]) if values[field] else {}
        values["paraphrases"] = values["paraphrases"] or ()
        values["overlay_color"] = values["overlay_color"] or ()
        samples.append(Sample.parse(values, where=row.where()))
    require_samples(samples, shards, problems)
    return NativeDataset(name or root.name, root, samples, problems=problems)


def _shards(root: Path) -> Path:
    """The file or folder of shards ``root`` stands for: ``root/data`` when there is one."""
    return root / HF_DATA if (root / HF_DATA).is_dir() else root
