"""PaintBench as the Hub serves it: ``load_dataset("PaintBench/PaintBench", CONFIG, split=SPLIT)``.

A snapshot of the dataset repository (``medibench download paintbench --out DIR``, or
``hf download PaintBench/PaintBench --repo-type dataset``) holds one folder per config, with
the split's shards named as ``datasets``' ``push_to_hub`` names them::

    DIR/
      PaintBench/test-00000-of-00001.parquet       config PaintBench, split test
      PaintBench/dev-00000-of-00001.parquet        config PaintBench, split dev
      TinyGrafixBench/test-00000-of-00001.parquet  config TinyGrafixBench, split test
      README.md                                    the dataset card

The config folder may sit under ``data/``, and a split may be a folder of shards
(``PaintBench/test/*.parquet``). Columns: ``task, problem_id, mode, visual_condition,
instruction, metadata, input_image, answer_image`` (images as ``datasets`` ``Image()`` structs
``{bytes, path}``; ``metadata`` the problem's ``NNN.json`` object, as a JSON string or a struct).

Each row is the problem ``<task>/NNN`` (``NNN`` = ``problem_id`` with 3 digits, as the
generator names its files): the same sample, id and metadata as the generated tree gives (the
shared :func:`~medibench.benchmarks.paintbench.dataset.make_sample`), its images the cells'
bytes, unchanged, in ``.medibench-assets/`` beside the snapshot. The benchmark name official
outputs are filed under (``model_outputs/<model>/<config>/<task>/NNNN_output.png``) is the
config's, as PaintBench's inference names it for a Hub source.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from PIL import Image

from medibench.datasets._base import DatasetError
from medibench.sources import (
    ImageCellError,
    ParquetRow,
    cached_read,
    check_columns,
    iter_parquet_rows,
    store_image_cell,
)

__all__ = ["COLUMNS", "CONFIGS", "find_shards", "has_parquet", "read_rows", "shard_files"]

#: The columns of PaintBench's Hub Parquet (every one is read).
COLUMNS = tuple(
    "task problem_id mode visual_condition instruction metadata input_image answer_image".split()
)
#: The configs PaintBench publishes; the first is the default.
CONFIGS = ("PaintBench", "TinyGrafixBench")
#: Where the cells' image bytes are stored, under the snapshot folder.
ASSETS = ".medibench-assets"
_SHARD = re.compile(r"^(?P<split>[A-Za-z0-9_]+?)(?:-\d+(?:-of-\d+)?)?$")
_SPLIT_DIRS = frozenset({"test", "dev", "train", "validation"})
_DEPTH = 4
_BAD_ID = re.compile(r'[/\\:*?"<>|\s]')


def has_parquet(root: Path) -> bool:
    """Whether ``root`` (a folder or a ``.parquet`` file) holds PaintBench Parquet shards."""
    try:
        shards = shard_files(root)
        if not shards:
            return False
        check_columns(shards[0], COLUMNS)
    except DatasetError:
        return False
    return True


def find_shards(
    root: Path, *, config: str | None = None, split: str | None = None
) -> tuple[str, str, list[Path]]:
    """``(config, split, files)`` selected in ``root`` (default: ``PaintBench`` else the only
    config; ``test`` else the only split).

    Raises:
        DatasetError: no shards, or the config or split asked for (or needed) not there; the
            message lists those found.
    """
    groups: dict[tuple[str, str], list[Path]] = {}
    for file in shard_files(root):
        groups.setdefault(_config_split(root, file), []).append(file)
    if not groups:
        raise DatasetError(f"PaintBench folder {root} holds no .parquet shards")
    configs = sorted({c for c, _ in groups})
    config = config or _default(configs, CONFIGS[0])
    if config not in configs:
        raise DatasetError(
            f"{root}: no PaintBench config '{config}' (found: {', '.join(configs)}); "
            f"choose one as paintbench:{root}/<config>"
        )
    splits = sorted({s for c, s in groups if c == config})
    split = split or _default(splits, "test")
    if split not in splits:
        raise DatasetError(
            f"{root}: config '{config}' has no split '{split}' (found: {', '.join(splits)}); "
            f"choose one as paintbench:{root}/{config}/<split>"
        )
    return config, split, groups[(config, split)]


def read_rows(
    files: list[Path],
    *,
    snapshot: Path,
    include_diagnostic: bool,
    problems: list[str],
) -> list[tuple[str, str, str, dict[str, Any], str, str]]:
    """``(where, task, NNN, metadata, input file, answer file)`` per row (``where``: the
    shard and row), in the folder
    reader's order (task, then problem id); rows that cannot be a problem are reported and
    left out. Image bytes are stored, unchanged, under ``snapshot/.medibench-assets``; what a
    read found is kept there too (:func:`~medibench.sources.cached_read`), so loading unchanged
    shards again reads no rows.

    Raises:
        DatasetError: a shard without PaintBench's columns (naming missing and found ones), or
            one that is not Parquet or is cut off.
    """
    assets = _assets(snapshot)

    def read() -> dict[str, Any]:
        found: list[str] = []
        rows = _read(files, snapshot, assets, include_diagnostic, found)
        return {"rows": rows, "problems": found}

    value = cached_read(
        assets,
        files,
        read,
        paths=lambda v: [path for row in v["rows"] for path in row[4:6]],
        what="paintbench-rows" + ("-diagnostic" if include_diagnostic else ""),
    )
    problems.extend(value["problems"])
    return [tuple(row) for row in value["rows"]]


def _read(
    files: list[Path],
    snapshot: Path,
    assets: Path,
    include_diagnostic: bool,
    problems: list[str],
) -> list[tuple[str, str, str, dict[str, Any], str, str]]:
    for file in files:
        check_columns(file, COLUMNS)
    rows: dict[tuple[str, str], tuple[str, str, str, dict[str, Any], str, str]] = {}
    skipped_diagnostic = 0
    for row in iter_parquet_rows(files, COLUMNS):
        key = _key(row, problems)
        if key is None:
            continue
        task, num = key
        if task == "preservation" and not include_diagnostic:
            skipped_diagnostic += 1
            continue
        if key in rows:
            problems.append(f"{row.where()}: problem {task}/{num} again; the first kept")
            continue
        meta = _metadata(row, problems)
        if meta is None:
            continue
        for column, field in (("mode", "mode"), ("visual_condition", "visual_condition")):
            value = row.values.get(column)
            if isinstance(value, str) and value and not meta.get(field):  # null: the column
                meta[field] = value
        instruction = row.values.get("instruction")
        if isinstance(instruction, str) and instruction.strip():  # the column, as PaintBench's
            meta["instruction"] = instruction  # Hub source reads it
        try:
            input_file = _store(row, "input_image", assets, snapshot)
            answer = row.values.get("answer_image")
            answer_file = None if answer is None else _store(row, "answer_image", assets, snapshot)
        except ImageCellError as exc:
            problems.append(f"{exc}; problem '{task}-{num}' skipped")
            continue
        if answer_file is None:
            problems.append(
                f"{row.where('answer_image')}: problem {task}/{num} has no answer image; skipped"
            )
            continue
        rows[key] = (row.where(), task, num, meta, input_file, answer_file)
    if skipped_diagnostic:
        problems.append(
            f"{snapshot}: the diagnostic 'preservation' task was left out "
            f"(include_diagnostic=False); {skipped_diagnostic} problems skipped"
        )
    return [rows[k] for k in sorted(rows)]


# --- helpers ---------------------------------------------------------------------------------


def shard_files(root: Path) -> list[Path]:
    """The ``.parquet`` files of ``root`` (itself, or those up to 4 folders down, not hidden)."""
    if root.is_file():
        return [root] if root.suffix.lower() == ".parquet" else []
    found: list[Path] = []
    for depth in range(1, _DEPTH + 1):
        for path in root.glob("/".join(["*"] * depth)):
            rel = path.relative_to(root).parts
            if path.suffix.lower() == ".parquet" and path.is_file():
                if not any(part.startswith(".") for part in rel):
                    found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _config_split(root: Path, file: Path) -> tuple[str, str]:
    if root.is_file():
        m = _SHARD.match(file.stem)
        return file.parent.name, m["split"] if m else file.stem
    folders = [p for p in file.relative_to(root).parts[:-1] if p != "data"]
    split = None
    if folders and folders[-1] in _SPLIT_DIRS:
        split = folders.pop()
    if split is None:
        m = _SHARD.match(file.stem)
        split = m["split"] if m else file.stem
    config = folders[0] if folders else root.name
    return config, split


def _default(found: list[str], preferred: str) -> str:
    if preferred in found or len(found) != 1:
        return preferred
    return found[0]


def _key(row: ParquetRow, problems: list[str]) -> tuple[str, str] | None:
    task, pid = row.values.get("task"), row.values.get("problem_id")
    if not isinstance(task, str) or not task or _BAD_ID.search(task) or task in {".", ".."}:
        problems.append(f"{row.where('task')}: not a task name ({task!r}); row skipped")
        return None
    try:
        number = int(pid)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = -1
    if isinstance(pid, bool) or number < 0 or (isinstance(pid, float) and pid != number):
        problems.append(f"{row.where('problem_id')}: not a problem id ({pid!r}); row skipped")
        return None
    return task, f"{number:03d}"


def _metadata(row: ParquetRow, problems: list[str]) -> dict[str, Any] | None:
    raw = row.values.get("metadata")
    where = row.where("metadata")
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not valid JSON ({exc}); row skipped")
            return None
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a JSON object, got {type(raw).__name__}; row skipped")
        return None
    return dict(raw)


def _store(row: ParquetRow, column: str, assets: Path, snapshot: Path) -> str:
    path = store_image_cell(
        row.values.get(column), assets, file=row.file, row=row.index, column=column, base=snapshot
    )
    try:  # the header and (for PNG) every chunk's CRC, without decompressing the pixels
        with Image.open(path) as image:
            image.verify()
    except Exception as exc:  # PIL raises many kinds for bytes that are not an image
        raise ImageCellError(row.file, row.index, column, f"not a readable image ({exc})") from None
    return str(path)


def _assets(snapshot: Path) -> Path:
    folder = snapshot / ASSETS
    try:
        folder.mkdir(exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "medibench" / "paintbench-assets"
