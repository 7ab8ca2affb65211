"""MedGEN-Bench's three formats: the files and Parquet configs that hold them, which of them a
path names, and their records as samples (:mod:`medibench.benchmarks.medgen.formats`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from medibench.benchmarks.medgen._edit_samples import _to_sample
from medibench.benchmarks.medgen._release import CACHE, _record, _shards, release_root, store_images
from medibench.benchmarks.medgen.records import answer_sample
from medibench.datasets._base import DatasetError, collect_samples, read_jsonl
from medibench.samples import Sample
from medibench.sources import check_columns, iter_parquet_rows

__all__ = ["EDIT_FILE", "FORMATS", "format_samples", "normalise_formats", "select_formats"]

EDIT_FILE = "edit.jsonl"
#: format key -> (prepared-folder file, Parquet config)
FORMATS = {
    "edit": (EDIT_FILE, "image_editing"),
    "vqa": ("vqa.jsonl", "vqa"),
    "gen": ("gen.jsonl", "multimodal_generation"),
}


def select_formats(path: Path) -> tuple[Path, tuple[str, ...] | None]:
    """``(dataset root, formats)`` a path names (module docstring); ``None``: not a format's
    own file or folder."""
    for key, (file, config) in FORMATS.items():
        if path.name == file and path.is_file():
            return path.parent, (key,)
        if path.name == config and path.parent.name == "parquet" and path.is_dir():
            return path.parent.parent, (key,)
    return path, None


def normalise_formats(formats: str | Sequence[str]) -> tuple[str, ...]:
    """``"all"`` or format keys -> the keys in :data:`FORMATS` order; ``ValueError`` otherwise."""
    if formats == "all":
        return tuple(FORMATS)
    wanted = (formats,) if isinstance(formats, str) else tuple(formats)
    unknown = [f for f in wanted if f not in FORMATS]
    if unknown or not wanted:
        raise ValueError(f"unknown MedGEN-Bench format(s) {unknown}; known: {', '.join(FORMATS)}")
    return tuple(f for f in FORMATS if f in wanted)


def format_samples(
    root: Path, formats: str | Sequence[str]
) -> tuple[Path, list[Sample], list[str], tuple[str, ...]]:
    """``(dataset root, samples, problems, format keys)`` of ``formats`` from the prepared folder
    or Parquet release at ``root`` (:func:`.formats.read_formats` makes them a dataset).

    Raises:
        DatasetError: none of the formats' files is there, or no sample is left.
    """
    root = root.absolute()
    release = release_root(root) or (root if (root / "parquet").is_dir() else None)
    problems: list[str] = []
    entries: list[tuple[str, str, dict[str, Any], str]] = []
    found = []
    formats = normalise_formats(formats)
    for key in formats:
        file, config = FORMATS[key]
        if (root / file).is_file():
            found.append(str(root / file))
            entries += [
                (f"{root / file} line {n}", f"{file} line {n}", rec, key)
                for n, rec in read_jsonl(root / file)
            ]
        elif release is not None and (release / "parquet" / config).is_dir():
            found.append(str(release / "parquet" / config))
            entries += [(*e, key) for e in _release_records(release, config, problems)]
    if not found:
        files = ", ".join(f"{FORMATS[f][0]} or parquet/{FORMATS[f][1]}/" for f in formats)
        raise DatasetError(f"{root} has none of the MedGEN-Bench files asked for: {files}")
    in_folder = any((root / FORMATS[f][0]).is_file() for f in formats)
    base = root if in_folder or release is None else release
    by_where = {where: key for where, _, _, key in entries}

    def to_sample(record: dict[str, Any], where: str):
        if by_where[where] == "edit":
            return _to_sample(record, where, base, problems)
        return answer_sample(record, where, base, problems)

    samples = collect_samples(
        ((where, label, record) for where, label, record, _ in entries),
        to_sample,
        problems,
        source=", ".join(found),
        duplicate=lambda s, first: (
            f"sample '{s.metadata['medgen_sample_id']}' has the same id as {first}"
        ),
    )
    return base, samples, problems, formats


def _release_records(
    root: Path, config: str, problems: list[str]
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """The release's rows of ``config`` as prepared records, images stored in the cache."""
    assets = root / CACHE / "images" / "assets"
    for file in _shards(root, config):
        found = check_columns(file, ("input_images", "instruction", "task"))
        optional = ("output_images", "subtask", "modality", "answer", "choice", "choices")
        columns = ["input_images", "instruction", "task", *(c for c in optional if c in found)]
        for row in iter_parquet_rows(file, columns):
            record = _record(config, file, row.index, row.values)
            record["answer"] = row.values.get("answer")
            choices = row.values.get("choice") or row.values.get("choices")
            if isinstance(choices, list | tuple) and choices:
                record["choice"] = [str(c) for c in choices]
            if store_images(record, row, assets, root, file, problems):
                yield row.where(), f"{file.name} row {row.index}", record
