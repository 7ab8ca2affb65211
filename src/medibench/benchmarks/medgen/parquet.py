"""MedGEN-Bench's current release: Parquet shards, read as the official preparation reads them.

``hf download Jack04810/MedGEN-Bench --include "parquet/**"`` gives::

    root/parquet/image_editing/*.parquet           the editing records (3,872)
    root/parquet/multimodal_generation/*.parquet   optional: kept in ``other_records["gen"]``
    root/parquet/vqa/*.parquet                     optional: kept in ``other_records["vqa"]``

with columns ``input_images`` / ``output_images`` (lists of ``{bytes, path}``, the ``datasets``
``Sequence(Image())`` encoding), ``instruction``, ``task``, ``subtask``, ``modality`` and
``answer`` (absent or empty for editing rows). The path may also be ``root/parquet``.

The official eval repository's ``prepare_medgen_data.py`` turns this into the prepared folder
that :func:`~medibench.benchmarks.medgen.dataset.read_medgen` reads; this module makes the same
records without that step, so the two loads give the same samples:

* ``sample_id`` is ``medgen:<config>:<shard file stem>:<row, 0-based within the shard, 6
  digits>``, shards of a config in name order (``medgen:image_editing:train-00000-of-00002:
  000003``); official outputs keyed by those ids are found;
* each image's bytes are written, unchanged, to ``root/parquet.medibench/images/assets/<first 2
  hex digits>/<sha256><ext>`` (the official ``images/assets`` layout, under a cache folder beside
  ``parquet/``), ``<ext>`` being the stored name's (``.jpeg`` as ``.jpg``) when it is an image
  suffix the official script knows, else the format the bytes are in. An existing file is kept;
* the record fields are the official ones (``category`` ``ImageEdit``, ``paper_task`` = ``task``,
  ``paper_subtask``, ``sub-category``, ``modality``, ``instruction``, the image lists and the first
  of each as the singular field); as in the official script, editing records carry no ``answer``.

A shard whose columns do not include ``input_images``, ``output_images``, ``instruction``,
``task`` and ``modality`` is a :class:`~medibench.sources.SourceError` naming the missing and the
found columns. A row whose image cell is null, malformed or not an image is that sample's problem
(skipped, reported in ``problems``); the rest loads. The other two configs are read without their
image columns (not materialised): their records have the official ids and text fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medibench.benchmarks.medgen._dataset import MedGenDataset
from medibench.benchmarks.medgen._edit_samples import _to_sample
from medibench.benchmarks.medgen._release import (
    _CONFIGS,
    _TEXT_COLUMNS,
    CACHE,
    EDIT_COLUMNS,
    _clean,
    _record,
    _shards,
    release_root,
    store_images,
)
from medibench.datasets._base import collect_samples
from medibench.sources import cached_read, check_columns, iter_parquet_rows

__all__ = ["CACHE", "EDIT_COLUMNS", "read_release", "release_root"]


def read_release(root: Path, name: str = "medgen") -> MedGenDataset:
    """Read the Parquet release at ``root`` (see :func:`release_root`) as a MedGEN dataset.

    Raises:
        DatasetError: a shard that is not Parquet, lacks a column (the missing and the found are
            named), or is cut off; a cache folder that cannot be written; no editing sample.
    """
    root = root.absolute()
    problems: list[str] = []
    files = _shards(root, "image_editing")

    def read() -> dict[str, Any]:
        found: list[str] = []
        return {"entries": list(_edit_records(root, files, found)), "problems": found}

    # What a read found is kept beside the images: unchanged shards load without reading rows.
    value = cached_read(root / CACHE, files, read, paths=_image_refs(root), what="image_editing")
    problems.extend(value["problems"])
    samples = collect_samples(
        (tuple(entry) for entry in value["entries"]),
        lambda record, where: _to_sample(record, where, root, problems),
        problems,
        source=root / "parquet" / "image_editing",
        duplicate=lambda s, first: (
            f"sample '{s.metadata['medgen_sample_id']}' has the same id as {first}"
        ),
    )
    other = {
        key: _text_records(root, config)
        for config, (_, _, key) in _CONFIGS.items()
        if key and _shards(root, config)
    }
    return MedGenDataset(name, root, samples, problems=problems, other_records=other)


# --- helpers ---------------------------------------------------------------------------------


def _image_refs(root: Path) -> Any:
    def refs(value: dict[str, Any]) -> list[str]:
        return [
            str(root / ref)
            for _, _, record in value["entries"]
            for field in ("input_images", "ground_truth_images")
            for ref in record.get(field) or ()
        ]

    return refs


def _edit_records(
    root: Path, files: list[Path], problems: list[str]
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    assets = root / CACHE / "images" / "assets"
    for file in files:
        found = check_columns(file, EDIT_COLUMNS)
        columns = list(EDIT_COLUMNS) + [c for c in ("subtask",) if c in found]
        for row in iter_parquet_rows(file, columns):
            record = _record("image_editing", file, row.index, row.values)
            if store_images(record, row, assets, root, file, problems):
                yield row.where(), f"{file.name} row {row.index}", record


def _text_records(root: Path, config: str) -> list[dict[str, Any]]:
    records = []
    for file in _shards(root, config):
        found = check_columns(file, ("instruction", "task"))
        for row in iter_parquet_rows(file, [c for c in _TEXT_COLUMNS if c in found]):
            record = _record(config, file, row.index, row.values)
            record["answer"] = _clean(row.values.get("answer"))
            records.append(record)
    return records


