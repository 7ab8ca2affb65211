"""MedEBench from a Parquet conversion: ``editing_metadata.json``'s fields as columns.

A conversion of the ``editing/`` tree to Parquet (``datasets.Dataset.from_json`` on the metadata
with the three image columns cast to ``Image()``, as the Hub's converter or
``medibench export-dataset`` would write it) has one row per metadata record::

    id, Organ, Task, prompt, rephrased_prompt, detailed_prompt, url      the metadata's text
    previous_image, changed_image, previous_mask                          images

An image column holds the ``datasets`` encoding, a struct ``{bytes, path}``, or a path string
relative to the folder holding the Parquet files (the repository root, when the conversion sits
beside ``editing/``). A file or a folder of shards is read, shards in name order.

The rows become the same samples as the folder's (:func:`~medibench.benchmarks.medebench.dataset.
read_medebench`): the same ids (``str(id)``), fields and rules, the same problems. Embedded bytes
are written, unchanged, to ``<folder>/medebench-parquet.medibench/images/<xx>/<sha256><ext>`` so
that samples point at files that decode to the cell's pixels. A shard without the required
columns (``id``, ``Organ``, ``Task``, ``prompt``, ``previous_image``, ``changed_image``) is a
:class:`~medibench.sources.SourceError` naming the missing and the found ones; an image cell that
is not an image is that sample's problem (an input or ground truth: skipped; a mask: left out).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medibench import sources
from medibench.benchmarks.medebench._records import MedEBenchDataset, _to_sample
from medibench.datasets._base import DatasetError, collect_samples

__all__ = ["CACHE", "REQUIRED_COLUMNS", "is_medebench_parquet", "read_medebench_parquet"]

#: The cache folder, beside the Parquet files, that embedded images are written to.
CACHE = "medebench-parquet.medibench"
#: The columns every shard must have (the metadata's required fields).
REQUIRED_COLUMNS = ("id", "Organ", "Task", "prompt", "previous_image", "changed_image")
_IMAGE_COLUMNS = ("previous_image", "changed_image", "previous_mask")


def is_medebench_parquet(path: Path) -> bool:
    """Whether ``path`` is a ``.parquet`` file, or a folder whose top level holds some, with the
    MedEBench metadata columns (the schema is read, not the rows)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.parquet"))
    else:
        files = [path] if path.suffix.lower() == ".parquet" and path.is_file() else []
    if not files:
        return False
    try:
        sources.check_columns(files[0], REQUIRED_COLUMNS)
    except (DatasetError, ImportError):
        return False
    return True


def read_medebench_parquet(path: str | os.PathLike, *, name: str = "medebench") -> Any:
    """Read a MedEBench Parquet conversion (a ``.parquet`` file or a folder of shards).

    Returns:
        A :class:`~medibench.benchmarks.medebench.dataset.MedEBenchDataset` whose root is the
        folder holding the Parquet files.

    Raises:
        DatasetError: not Parquet, a missing column (named, with those found), a damaged
            shard, a cache folder that cannot be written, no sample left.
    """
    path = Path(path)
    files = sources.parquet_files(path, what="MedEBench Parquet")
    root = (path if path.is_dir() else path.parent).resolve()
    problems: list[str] = []

    def read() -> dict[str, Any]:
        found: list[str] = []
        return {"entries": list(_records(root, files, found)), "problems": found}

    value = sources.cached_read(
        root / CACHE,
        files,
        read,
        paths=lambda v: [
            str(root / record[c]) for _, _, record in v["entries"] for c in _IMAGE_COLUMNS
            if record.get(c)
        ],
    )
    problems.extend(value["problems"])
    samples = collect_samples(
        (tuple(entry) for entry in value["entries"]),
        lambda record, where: _to_sample(record, where, root, problems),
        problems,
        source=path,
        duplicate=lambda s, first: f"duplicate id {s.sample_id!r} (first at {first})",
    )
    return MedEBenchDataset(name, root, samples, problems=problems)


def _records(
    root: Path, files: list[Path], problems: list[str]
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(where, label, record)`` per row: the metadata record, image cells as paths."""
    images = root / CACHE / "images"
    for file in files:
        sources.check_columns(file, REQUIRED_COLUMNS)
        for row in sources.iter_parquet_rows(file):
            record, skip = dict(row.values), False
            for column in _IMAGE_COLUMNS:
                if record.get(column) is None:
                    continue  # a missing required image is the record's problem, as in JSON
                try:
                    record[column] = _stored(record[column], images, root, file, row.index, column)
                except sources.ImageCellError as exc:
                    skip = column in REQUIRED_COLUMNS
                    what = "skipped" if skip else "left out"
                    problems.append(f"{row.where()} (id {record.get('id')}): {exc.problem}; {what}")
                    record[column] = None
                    if skip:
                        break
            if not skip:
                yield row.where(), f"{file.name} row {row.index}", record


def _stored(cell: Any, images: Path, root: Path, file: Path, row: int, column: str) -> str:
    """The cell's image as a path relative to ``root`` (embedded bytes stored first)."""
    data, _ = sources.image_cell_bytes(cell, file=file, row=row, column=column, base=root)
    if data is None:  # a path cell: the metadata's own relative path
        return cell if isinstance(cell, str) else str(cell.get("path"))
    sources.image_format(data, file=file, row=row, column=column)
    return sources.store_image_ref(cell, images, root, file=file, row=row, column=column)
