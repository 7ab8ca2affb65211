"""Labelled image datasets for few-shot prompt tuning, and the seeded class-balanced shots.

A dataset ``SPEC`` is ``PATH`` or ``PATH@SPLIT``; ``PATH`` is one of:

* **MVC-Bench's layout**: a folder with ``classnames.txt`` (each line ``<folder> <class name>``,
  as its Dassl ``read_classnames`` reads it) and one sub-folder of images per class, either in
  the folder itself or in its ``images/`` sub-folder. Labels follow the sorted folder names, as
  its ``read_data``. ``@SPLIT`` reads a CoOp-style split file ``split*.json`` in the folder
  (``{"train": [[relative path, label, class name], ...], "val": ..., "test": ...}``, paths
  relative to the image folder).
* **medibench's native layout** (``samples.jsonl``): each sample's ``input`` image and its
  ``metadata["label"]`` (a class index or a class name); ``@SPLIT`` keeps the samples whose
  ``metadata["split"]`` is ``SPLIT``.
* **Parquet** (a ``.parquet`` file or a folder of them): an ``image`` column (bytes/path struct
  or path string) and a ``label`` column (index or name); ``id`` and ``split`` columns are used
  when present.

For native and Parquet data a ``classnames.txt`` beside it (one class name per line, line ``i``
naming class ``i``) gives the class names and their order; without it, string labels are the
class names in sorted order and integer labels are refused (they name no class).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medibench.datasets._base import DatasetError

__all__ = ["LabelledImages", "few_shot_indices", "read_labelled", "split_spec"]

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".dcm"}


@dataclass(frozen=True)
class LabelledImages:
    """``n`` images with integer ``labels`` (n,) into ``class_names``, unique string ``ids`` and
    a loader ``load(i) -> uint8 RGB (H, W, 3)``; ``source`` names the data in messages."""

    ids: list[str]
    labels: np.ndarray
    class_names: list[str]
    loader: Callable[[int], np.ndarray]
    source: str

    def __len__(self) -> int:
        return len(self.ids)

    def image(self, i: int) -> np.ndarray:
        return self.loader(i)

    def subset(self, indices: Sequence[int]) -> LabelledImages:
        """The images at ``indices``, in that order."""
        idx = [int(i) for i in indices]
        return LabelledImages(
            ids=[self.ids[i] for i in idx],
            labels=self.labels[idx],
            class_names=self.class_names,
            loader=lambda j: self.loader(idx[j]),
            source=self.source,
        )


def split_spec(spec: str) -> tuple[Path, str | None]:
    """``"PATH@SPLIT"`` -> ``(PATH, SPLIT)``; ``"PATH"`` -> ``(PATH, None)``."""
    path, sep, split = str(spec).rpartition("@")
    if not sep or "/" in split or not split:
        return Path(spec), None
    return Path(path), split


def read_labelled(spec: str) -> LabelledImages:
    """Read a labelled dataset from ``spec`` (module doc).

    Raises:
        DatasetError: no such path, an unknown layout, a class folder missing from
            ``classnames.txt``, a split that is not in the split file, a sample without a
            label, an unknown class name, fewer than 2 classes, no images.
    """
    path, split = split_spec(spec)
    if not path.exists():
        raise DatasetError(f"dataset {path} does not exist")
    if (
        path.is_dir()
        and (path / "classnames.txt").is_file()
        and not (path / "samples.jsonl").exists()
    ):
        data = _read_mvcbench(path, split)
    elif path.is_dir() and (path / "samples.jsonl").is_file():
        data = _read_native(path, split)
    elif path.suffix.lower() == ".parquet" or (path.is_dir() and any(path.rglob("*.parquet"))):
        data = _read_parquet(path, split)
    else:
        raise DatasetError(
            f"{path}: not a labelled dataset (expected a folder with classnames.txt and class "
            "folders, a native folder with samples.jsonl, or Parquet with image and label columns)"
        )
    if len(data) == 0:
        raise DatasetError(f"{data.source}: no images" + (f" in split {split!r}" if split else ""))
    if len(data.class_names) < 2:
        raise DatasetError(f"{data.source}: {len(data.class_names)} class; at least 2 are needed")
    return data


def few_shot_indices(data: LabelledImages, shots: int, seed: int) -> list[int]:
    """``shots`` images per class, drawn without replacement by ``numpy.random.default_rng(seed)``
    from each class's ids in sorted order (so the draw depends on the ids, not on file order);
    classes in label order, each class's draw sorted by id.

    Raises:
        ValueError: ``shots < 1``, or a class with fewer than ``shots`` images (naming it).
    """
    if shots < 1:
        raise ValueError(f"--shots must be at least 1, got {shots}")
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for label, name in enumerate(data.class_names):
        members = sorted(np.flatnonzero(data.labels == label), key=lambda i: data.ids[i])
        if len(members) < shots:
            raise ValueError(
                f"{data.source}: class {name!r} (label {label}) has {len(members)} image(s), "
                f"fewer than --shots {shots}; lower --shots or add images"
            )
        picked = rng.choice(len(members), size=shots, replace=False)
        chosen += sorted((int(members[i]) for i in picked), key=lambda i: data.ids[i])
    return chosen


# --- layouts ---------------------------------------------------------------------------------


def _read_mvcbench(root: Path, split: str | None) -> LabelledImages:
    from medibench.io import read_image

    mapping: dict[str, str] = {}
    for number, line in enumerate((root / "classnames.txt").read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        folder, _, name = line.strip().partition(" ")
        if not name.strip():
            raise DatasetError(
                f"{root / 'classnames.txt'} line {number}: expected '<folder> <class name>', "
                f"got {line.strip()!r}"
            )
        mapping[folder] = name.strip()
    image_dir = root / "images" if (root / "images").is_dir() else root
    folders = sorted(
        p.name for p in image_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    unknown = [f for f in folders if f not in mapping]
    if unknown:
        raise DatasetError(
            f"{image_dir}: class folder(s) {', '.join(unknown)} are not in "
            f"{root / 'classnames.txt'}"
        )
    absent = [f for f in mapping if f not in folders]
    if absent:
        raise DatasetError(
            f"{root / 'classnames.txt'}: class(es) {', '.join(absent)} have no folder in "
            f"{image_dir}"
        )
    names = [mapping[f] for f in folders]
    if split is not None:
        rel, labels = _split_items(root, split, names)
    else:
        rel, labels = [], []
        for label, folder in enumerate(folders):
            files = sorted(
                p.name
                for p in (image_dir / folder).iterdir()
                if p.suffix.lower() in _IMAGE_SUFFIXES and not p.name.startswith(".")
            )
            rel += [f"{folder}/{f}" for f in files]
            labels += [label] * len(files)
    paths = [image_dir / r for r in rel]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise DatasetError(f"{root}: {len(missing)} image file(s) missing, first {missing[0]}")
    return LabelledImages(
        ids=rel,
        labels=np.asarray(labels, dtype=np.int64),
        class_names=names,
        loader=lambda i: read_image(paths[i], mode="rgb"),
        source=f"{root}" + (f"@{split}" if split else ""),
    )


def _split_items(root: Path, split: str, names: list[str]) -> tuple[list[str], list[int]]:
    files = sorted(root.glob("split*.json"))
    if not files:
        raise DatasetError(f"{root}: split {split!r} asked for but there is no split*.json file")
    if len(files) > 1:
        raise DatasetError(f"{root}: several split files ({', '.join(f.name for f in files)})")
    try:
        table = json.loads(files[0].read_text("utf-8"))
    except ValueError as exc:
        raise DatasetError(f"{files[0]}: not valid JSON ({exc})") from None
    if split not in table:
        raise DatasetError(f"{files[0]}: no split {split!r} (splits: {', '.join(sorted(table))})")
    rel, labels = [], []
    for k, item in enumerate(table[split]):
        if not (isinstance(item, list) and len(item) >= 2):
            raise DatasetError(f"{files[0]}: {split}[{k}] is not [path, label, class name]")
        label = int(item[1])
        if not 0 <= label < len(names):
            raise DatasetError(
                f"{files[0]}: {split}[{k}]: label {label} is not in 0..{len(names) - 1}"
            )
        rel.append(str(item[0]))
        labels.append(label)
    return rel, labels


def _read_native(root: Path, split: str | None) -> LabelledImages:
    from medibench.datasets.native import read_native
    from medibench.io import read_image

    ds = read_native(root)
    samples = [s for s in ds if split is None or s.metadata.get("split") == split]
    raw = []
    for s in samples:
        if "label" not in s.metadata:
            raise DatasetError(
                f"{root / 'samples.jsonl'}: sample '{s.sample_id}' has no metadata.label"
            )
        raw.append(s.metadata["label"])
    names, labels = _class_labels(
        raw, root / "classnames.txt", f"{root / 'samples.jsonl'}", [s.sample_id for s in samples]
    )
    paths = [s.input for s in samples]
    return LabelledImages(
        ids=[s.sample_id for s in samples],
        labels=labels,
        class_names=names,
        loader=lambda i: read_image(paths[i], mode="rgb"),
        source=f"{root}" + (f"@{split}" if split else ""),
    )


def _read_parquet(path: Path, split: str | None) -> LabelledImages:
    from medibench.sources._cells import decode_image_cell
    from medibench.sources._parquet import check_columns, iter_parquet_rows, parquet_files

    files = parquet_files(path)
    cells, raw, ids, where = [], [], [], []
    for file in files:
        found = check_columns(file, ["image", "label"])
        cols = ["image", "label"] + [c for c in ("id", "split") if c in found]
        for row in iter_parquet_rows(file, cols):
            if split is not None and row.values.get("split") != split:
                continue
            cells.append(row.values["image"])
            raw.append(row.values["label"])
            rid = row.values.get("id")
            ids.append(str(rid) if rid is not None else f"{file.name}:{row.index}")
            where.append((file, row.index))
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DatasetError(f"{path}: duplicate id {dup!r}")
    base = path if path.is_dir() else path.parent
    names, labels = _class_labels(raw, base / "classnames.txt", str(path), ids)

    def load(i: int) -> np.ndarray:
        file, row = where[i]
        return decode_image_cell(cells[i], file=file, row=row, column="image", base=file.parent)

    return LabelledImages(ids, labels, names, load, f"{path}" + (f"@{split}" if split else ""))


def _class_labels(
    raw: list[Any], names_file: Path, source: str, ids: list[str]
) -> tuple[list[str], np.ndarray]:
    given = (
        [ln.strip() for ln in names_file.read_text("utf-8").splitlines() if ln.strip()]
        if names_file.is_file()
        else None
    )
    if all(isinstance(v, str) for v in raw):
        names = given or sorted(set(raw))
        index = {n: i for i, n in enumerate(names)}
        for v, sid in zip(raw, ids, strict=True):
            if v not in index:
                raise DatasetError(
                    f"{source}: sample '{sid}': label {v!r} is not a known class "
                    f"({', '.join(names)})"
                )
        return names, np.asarray([index[v] for v in raw], dtype=np.int64)
    for v, sid in zip(raw, ids, strict=True):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise DatasetError(
                f"{source}: sample '{sid}': label {v!r} is neither a class index nor a name"
            )
    if given is None:
        raise DatasetError(
            f"{source}: integer labels need class names: write {names_file} (one name per line, "
            "line i naming class i)"
        )
    labels = np.asarray(raw, dtype=np.int64)
    bad = np.flatnonzero((labels < 0) | (labels >= len(given)))
    if bad.size:
        raise DatasetError(
            f"{source}: sample '{ids[int(bad[0])]}': label {int(labels[bad[0]])} is out of range "
            f"for the {len(given)} classes of {names_file}"
        )
    return given, labels
