"""``SOURCE.yaml``: what a build reads (docs/build.md).

A source names a segmentation dataset: its images and label maps (NIfTI volumes, DICOM with
DICOM SEG, PNG/JPEG pairs), what each label value means, which labels are lesions, how volumes
are sliced and filtered, and how samples are split. :func:`read_source` checks every key and
value and resolves item paths against the YAML's folder; an unknown key is an error that names
it and the known ones.
"""

from __future__ import annotations

import glob as globbing
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medibench.build._calls import ModelCall, model_call
from medibench.build._errors import BuildError
from medibench.datasets._base import inside_problem

__all__ = ["ItemSpec", "SourceSpec", "SplitRule", "read_source", "source_from_dict"]

#: Top-level keys of SOURCE.yaml, with whether each is required.
SOURCE_KEYS: dict[str, bool] = {
    "name": True,
    "modality": True,
    "licence": True,
    "items": True,
    "labels": False,
    "lesions": False,
    "axis": False,
    "min_fraction": False,
    "max_fraction": False,
    "split": True,
    "region": False,
    "bins": False,
    "window": False,
    "intensity": False,
    "operators": False,
    "dedupe_bits": False,
    "label_threshold": False,
    "missing_labels": False,
    "rephrase": False,
    "verify": False,
}
ITEM_KEYS = ("image", "label", "labels", "patient", "id", "region", "split")
GLOB_KEYS = ("glob", "label", "patient", "region", "split")
SPLIT_KEYS = ("by", "test", "val", "seed")
SPLIT_BY = ("patient", "item")
#: ``split: source``: every item names its split (the source dataset's own), kept as it is.
SOURCE_SPLIT = "source"
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class SplitRule:
    """``split:`` of SOURCE.yaml: group samples ``by`` patient (or item), ``test`` and ``val``
    fractions of the groups, drawn with ``seed``; ``by == "source"`` (``split: source``):
    each item's own ``split``, kept."""

    by: str
    test: float
    val: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class ItemSpec:
    """One source item: an image (volume, DICOM file or series folder, PNG/JPEG) and its labels.

    ``label`` is one multi-valued label map (values named by the source's ``labels``);
    ``labels`` maps structure names to one binary map each. ``patient`` groups items for the
    split; ``split`` is the item's split in its source dataset (kept by ``split: source``).
    """

    id: str
    image: Path
    label: Path | None = None
    labels: dict[str, Path] = field(default_factory=dict)
    patient: str | None = None
    region: str = ""
    split: str | None = None


@dataclass(frozen=True)
class SourceSpec:
    """A checked SOURCE.yaml (paths absolute); ``rephrase`` and ``verify`` are its optional
    chat-model steps (:mod:`medibench.build._calls`)."""

    path: Path | None
    name: str
    modality: str
    licence: str
    items: tuple[ItemSpec, ...]
    split: SplitRule
    labels: dict[int, str] = field(default_factory=dict)
    lesions: tuple[str, ...] = ()
    axis: int = 2
    min_fraction: float = 0.01
    max_fraction: float = 0.9
    region: str = ""
    bins: tuple[int, ...] = (128, 256, 512)
    window: tuple[float, float] | None = None
    intensity: tuple[float, float] | None = None
    operators: tuple[str, ...] | None = None
    dedupe_bits: int = 0
    label_threshold: float = 0.0
    missing_labels: str = "error"
    rephrase: ModelCall | None = None
    verify: ModelCall | None = None

    def structure_names(self) -> list[str]:
        """Every structure name the source declares (label values, then binary maps)."""
        names = list(self.labels.values())
        for item in self.items:
            names += [n for n in item.labels if n not in names]
        return names


def read_source(path: str | os.PathLike) -> SourceSpec:
    """Read and check ``SOURCE.yaml``; item paths are relative to its folder.

    Raises:
        BuildError: the file is missing or not YAML, or any key or value is wrong (the message
            names the file, the key and what is expected).
    """
    import yaml

    file = Path(path)
    if not file.is_file():
        raise BuildError(f"source file {file} does not exist")
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when present
        data = yaml.load(file.read_text(encoding="utf-8"), Loader=loader)
    except yaml.YAMLError as exc:
        raise BuildError(f"{file}: not valid YAML ({exc})") from None
    return source_from_dict(data, base=file.parent.resolve(), where=str(file))


def source_from_dict(data: Any, *, base: Path, where: str = "source") -> SourceSpec:
    """:func:`read_source` on already parsed YAML (``base`` resolves relative paths)."""
    if not isinstance(data, dict):
        raise BuildError(f"{where}: expected a mapping of keys (name, modality, items, ...)")
    _known(data, SOURCE_KEYS, where)
    missing = [k for k, required in SOURCE_KEYS.items() if required and k not in data]
    if missing:
        raise BuildError(f"{where}: missing required key(s) {', '.join(missing)}")
    name = _text(data, "name", where)
    if not _NAME.match(name):
        raise BuildError(
            f"{where}: name {name!r} must be usable in sample ids (letters, digits, '_', '-', '.')"
        )
    labels = _labels(data.get("labels") or {}, where)
    items = _items(data["items"], base, where, data.get("region") or "")
    split = _split(data["split"], where)
    given = [it.id for it in items if it.split is not None]
    if given and split.by != SOURCE_SPLIT:
        raise BuildError(
            f"{where}: item '{given[0]}' names its split but 'split' is {{by: {split.by}, ...}}; "
            "use 'split: source' to keep the items' splits"
        )
    lesions = tuple(_list_of_text(data, "lesions", where))
    spec = SourceSpec(
        path=Path(where) if where != "source" else None,
        name=name,
        modality=_text(data, "modality", where),
        licence=_text(data, "licence", where),
        items=items,
        split=split,
        labels=labels,
        lesions=lesions,
        axis=_choice(data.get("axis", 2), (0, 1, 2), "axis", where),
        min_fraction=_fraction(data, "min_fraction", 0.01, where),
        max_fraction=_fraction(data, "max_fraction", 0.9, where),
        region=str(data.get("region") or ""),
        bins=_bins(data.get("bins", [128, 256, 512]), where),
        window=_pair(data.get("window"), "window", where),
        intensity=_pair(data.get("intensity"), "intensity", where),
        operators=tuple(_list_of_text(data, "operators", where)) if "operators" in data else None,
        dedupe_bits=_choice(data.get("dedupe_bits", 0), range(0, 65), "dedupe_bits", where),
        label_threshold=_number(data, "label_threshold", 0.0, where),
        missing_labels=_choice(
            data.get("missing_labels", "error"), ("error", "skip"), "missing_labels", where
        ),
        rephrase=model_call(data.get("rephrase"), "rephrase", where),
        verify=model_call(data.get("verify"), "verify", where),
    )
    if spec.min_fraction >= spec.max_fraction:
        raise BuildError(f"{where}: min_fraction must be below max_fraction")
    known = spec.structure_names()
    unknown = [lesion for lesion in lesions if lesion not in known]
    if unknown:
        raise BuildError(
            f"{where}: lesions {unknown} are not label names (labels: {', '.join(known)})"
        )
    for item in items:
        if item.label is not None and not labels:
            raise BuildError(
                f"{where}: item '{item.id}' has a label map but the source names no 'labels' "
                "(label value -> name)"
            )
    return spec


# --- checks ----------------------------------------------------------------------------------


def _known(data: dict, known: dict[str, bool] | tuple[str, ...], where: str) -> None:
    unknown = [k for k in data if k not in known]
    if unknown:
        raise BuildError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"known keys: {', '.join(known)}"
        )


def _text(data: dict, key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BuildError(f"{where}: '{key}' must be a non-empty string, got {value!r}")
    return value.strip()


def _list_of_text(data: dict, key: str, where: str) -> list[str]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BuildError(f"{where}: '{key}' must be a list of names, got {value!r}")
    return value


def _choice(value: Any, allowed: Any, key: str, where: str) -> Any:
    if isinstance(value, bool) or value not in allowed:
        shown = f"{allowed.start}..{allowed.stop - 1}" if isinstance(allowed, range) else allowed
        raise BuildError(f"{where}: '{key}' must be one of {shown}, got {value!r}")
    return value


def _fraction(data: dict, key: str, default: float, where: str) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise BuildError(f"{where}: '{key}' must be a number in [0, 1], got {value!r}")
    return float(value)


def _number(data: dict, key: str, default: float, where: str) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BuildError(f"{where}: '{key}' must be a number, got {value!r}")
    return float(value)


def _pair(value: Any, key: str, where: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2):
        raise BuildError(f"{where}: '{key}' must be a list of two numbers, got {value!r}")
    try:
        return float(value[0]), float(value[1])
    except (TypeError, ValueError):
        raise BuildError(f"{where}: '{key}' must be a list of two numbers, got {value!r}") from None


def _bins(value: Any, where: str) -> tuple[int, ...]:
    ok = (
        isinstance(value, list)
        and value
        and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 32 and v % 16 == 0
            for v in value
        )
    )
    if not ok:
        raise BuildError(
            f"{where}: 'bins' must be a list of sizes (multiples of 16, >= 32), got {value!r}"
        )
    return tuple(sorted(set(value)))


def _labels(value: Any, where: str) -> dict[int, str]:
    if not isinstance(value, dict):
        raise BuildError(f"{where}: 'labels' must map label values to names, got {value!r}")
    out: dict[int, str] = {}
    for k, v in value.items():
        try:
            number = int(k)
        except (TypeError, ValueError):
            raise BuildError(f"{where}: label value {k!r} is not an integer") from None
        if number <= 0 or not isinstance(v, str) or not v.strip():
            raise BuildError(
                f"{where}: label {k!r}: values must be positive integers naming a structure "
                f"(0 is background), got {k!r}: {v!r}"
            )
        out[number] = v.strip()
    if len(set(out.values())) != len(out):
        raise BuildError(f"{where}: two label values share a name: {out}")
    return out


def _split(value: Any, where: str) -> SplitRule:
    if value == SOURCE_SPLIT:
        return SplitRule(SOURCE_SPLIT, 0.0)
    if not isinstance(value, dict):
        raise BuildError(
            f"{where}: 'split' must be a mapping like {{by: patient, test: 0.2}}, or 'source' "
            f"(each item's own split), got {value!r}"
        )
    _known(value, SPLIT_KEYS, f"{where}: split")
    for key in ("by", "test"):
        if key not in value:
            raise BuildError(
                f"{where}: split is missing the field '{key}' (expected {{by: patient|item, "
                "test: FRACTION, val: FRACTION, seed: N}})"
            )
    by = _choice(value["by"], SPLIT_BY, "split.by", where)
    test = _fraction(value, "test", 0.0, f"{where}: split")
    val = _fraction(value, "val", 0.0, f"{where}: split")
    if test + val >= 1:
        raise BuildError(f"{where}: split test + val must leave something to train on")
    seed = value.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise BuildError(f"{where}: split.seed must be an integer, got {seed!r}")
    return SplitRule(by, test, val, seed)


def _items(value: Any, base: Path, where: str, region: str) -> tuple[ItemSpec, ...]:
    if isinstance(value, dict):  # a glob over images with a label pattern
        return _glob_items(value, base, where, region)
    if not isinstance(value, list) or not value:
        raise BuildError(f"{where}: 'items' must be a non-empty list, or {{glob: ..., label: ...}}")
    items: list[ItemSpec] = []
    for i, entry in enumerate(value):
        at = f"{where}: items[{i}]"
        if not isinstance(entry, dict) or "image" not in entry:
            raise BuildError(f"{at}: expected a mapping with at least 'image'")
        _known(entry, ITEM_KEYS, at)
        image = _path(base, entry["image"], at)
        labels = entry.get("labels") or {}
        if not isinstance(labels, dict):
            raise BuildError(f"{at}: 'labels' must map structure names to binary label files")
        if "label" not in entry and not labels:
            raise BuildError(f"{at}: needs 'label' (one label map) or 'labels' (name -> file)")
        item_id = str(entry.get("id") or _stem(image) or f"item{i}")
        if not _NAME.match(item_id):
            item_id = re.sub(r"[^A-Za-z0-9_.-]+", "-", item_id).strip("-") or f"item{i}"
        items.append(
            ItemSpec(
                id=item_id,
                image=image,
                label=_path(base, entry["label"], at) if entry.get("label") else None,
                labels={str(k): _path(base, v, at) for k, v in labels.items()},
                patient=None if entry.get("patient") is None else str(entry["patient"]),
                region=str(entry.get("region") or region),
                split=_item_split(entry, at),
            )
        )
    ids = [it.id for it in items]
    dupes = sorted({x for x in ids if ids.count(x) > 1})
    if dupes:
        raise BuildError(f"{where}: item ids {dupes} are used twice; give each item an 'id'")
    return tuple(items)


def _glob_items(value: dict, base: Path, where: str, region: str) -> tuple[ItemSpec, ...]:
    at = f"{where}: items"
    _known(value, GLOB_KEYS, at)
    if "glob" not in value or "label" not in value:
        raise BuildError(f"{at}: a glob needs 'glob' (images) and 'label' (pattern with {{stem}})")
    matches = sorted(globbing.glob(str(base / value["glob"]), recursive=True))
    if not matches:
        raise BuildError(f"{at}: glob {value['glob']!r} matches no file under {base}")
    entries = []
    for m in matches:
        fields = {"stem": _stem(Path(m)), "name": Path(m).name, "parent": Path(m).parent.name}
        try:
            label = str(value["label"]).format(**fields)
            patient = None if "patient" not in value else str(value["patient"]).format(**fields)
            split = None if "split" not in value else str(value["split"]).format(**fields)
        except KeyError as exc:
            raise BuildError(
                f"{at}: unknown placeholder {exc} (known: stem, name, parent)"
            ) from None
        entry = {"image": os.path.relpath(m, base), "label": label, "patient": patient,
                 "region": value.get("region"), "split": split}  # fmt: skip
        entries.append({k: v for k, v in entry.items() if v is not None})
    return _items(entries, base, where, region)


def _item_split(entry: dict, where: str) -> str | None:
    """An item's ``split``: a name of letters, digits and ``_`` (``train``, ``test``)."""
    if entry.get("split") is None:
        return None
    split = str(entry["split"])
    if not _SPLIT_NAME.match(split):
        raise BuildError(f"{where}: split {split!r} must be letters, digits and '_' (train, test)")
    return split


def _path(base: Path, value: Any, where: str) -> Path:
    """An item's file, which must lie in the YAML's folder (a symbolic link there to data
    elsewhere is followed: ``ln -s /data/raw raw``)."""
    if not isinstance(value, str) or not value:
        raise BuildError(f"{where}: a path must be a non-empty string, got {value!r}")
    problem = inside_problem(base, value, follow_links=True)
    if problem is not None:
        raise BuildError(
            f"{where}: path '{value}' {problem.replace('image paths', 'item paths')} (link "
            "data kept elsewhere into that folder: ln -s /data/raw raw)"
        )
    return base / os.path.normpath(value)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".nii.gz", ".nii", ".dcm", ".png", ".jpg", ".jpeg"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem
