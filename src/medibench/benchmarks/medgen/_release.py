"""MedGEN-Bench's Parquet release, row by row: its shards, each row as the record the official
``prepare_medgen_data.py`` makes, and the row's images stored in the cache (the layout and the
rules are in :mod:`medibench.benchmarks.medgen.parquet`, which reads the editing rows).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from medibench.sources import ImageCellError, image_cell_bytes, image_format, store_image_ref

__all__ = ["CACHE", "EDIT_COLUMNS", "release_root", "store_images"]

#: The cache folder, beside ``parquet/``, that the images are written to.
CACHE = "parquet.medibench"
#: The columns an ``image_editing`` shard must have.
EDIT_COLUMNS = ("input_images", "output_images", "instruction", "task", "modality")
_TEXT_COLUMNS = ("instruction", "task", "subtask", "modality", "answer")
# config -> (category, paper_format, key in other_records)
_CONFIGS = {
    "image_editing": ("ImageEdit", "ImageEditing", ""),
    "multimodal_generation": ("MMGeneration", "MultimodalGeneration", "gen"),
    "vqa": ("VQA", "VQA", "vqa"),
}
# Suffixes the official script keeps from the stored name; other names: the bytes' format.
_KNOWN_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"})
_FORMAT_SUFFIX = {"jpeg": ".jpg", "tiff": ".tiff"}


def release_root(root: Path) -> Path | None:
    """The folder holding ``parquet/image_editing/*.parquet`` (``root`` or, for ``root/parquet``,
    its parent), or ``None``."""
    for candidate in (root, root.parent) if root.name == "parquet" else (root,):
        if _shards(candidate, "image_editing"):
            return candidate
    return None


def _shards(root: Path, config: str) -> list[Path]:
    folder = root / "parquet" / config
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.parquet") if p.is_file())


def _record(config: str, file: Path, index: int, values: dict[str, Any]) -> dict[str, Any]:
    category, paper_format, _ = _CONFIGS[config]
    task = _clean(values.get("task"))
    record: dict[str, Any] = {
        "sample_id": f"medgen:{config}:{file.stem}:{index:06d}",
        "category": category,
        "paper_format": paper_format,
        "paper_task": task,
        "paper_subtask": _clean(values.get("subtask")),
        "sub-category": task,
        "modality": _clean(values.get("modality")),
        "instruction": _clean(values.get("instruction")),
        "dataset_source": {"config": config, "shard": file.name, "row_index": index},
    }
    return record


def store_images(
    record: dict[str, Any], row: Any, assets: Path, root: Path, file: Path, problems: list[str]
) -> bool:
    """Store a row's ``input_images`` / ``output_images`` cells in ``assets`` and set the
    record's image fields (lists and first paths); ``False`` with the problem added when a cell
    is not an image."""
    try:
        for column, fields in (
            ("input_images", ("input_images", "input_image")),
            ("output_images", ("ground_truth_images", "ground_truth_image")),
        ):
            refs = _store_all(row.values.get(column), assets, root, file, row.index, column)
            if refs:
                record[fields[0]], record[fields[1]] = refs, refs[0]
    except ImageCellError as exc:
        problems.append(f"{row.where()} (sample '{record['sample_id']}'): {exc}; skipped")
        return False
    return True


def _store_all(cell: Any, assets: Path, root: Path, file: Path, row: int, column: str) -> list[str]:
    """The cell's images stored in ``assets``, as paths relative to ``root``."""
    cells = cell if isinstance(cell, list) else [] if cell is None else [cell]
    refs = []
    for i, item in enumerate(cells):
        where = f"{column}[{i}]"
        data, name = image_cell_bytes(item, file=file, row=row, column=where, base=root)
        if data is not None:
            stored = item.get("path") if isinstance(item, dict) else None
            suffix = _official_suffix(data, stored, file, row, where)
            item = {"bytes": data, "path": f"image{suffix}"}
        refs.append(store_image_ref(item, assets, root, file=file, row=row, column=where))
    return refs


def _official_suffix(data: bytes, stored: object, file: Path, row: int, column: str) -> str:
    """The extension prepare_medgen_data.py gives the image; the bytes must be an image."""
    detected = image_format(data, file=file, row=row, column=column)
    suffix = PurePosixPath(stored).suffix.lower() if isinstance(stored, str) else ""
    if suffix in _KNOWN_SUFFIXES:
        return ".jpg" if suffix == ".jpeg" else suffix
    return _FORMAT_SUFFIX.get(detected, f".{detected}")


def _clean(value: object) -> str | None:
    return (value.strip() or None) if isinstance(value, str) else None
