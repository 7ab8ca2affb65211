"""Export any dataset to a layout others read (docs/sources.md, ``medibench export-dataset``).

Formats (:data:`FORMATS`):

- ``hf-parquet``: the Hugging Face Hub's conventions. ``data/<split>-NNNNN-of-NNNNN.parquet``,
  one row per sample with every :class:`~medibench.samples.Sample` field; ``input``, ``target``
  and ``mask`` are ``datasets`` ``Image()`` structs ``{bytes, path}`` (the file's bytes,
  unchanged), ``paraphrases`` and ``overlay_color`` lists of strings, ``source`` and
  ``metadata`` JSON strings. The ``datasets`` features are in each file's schema metadata, and
  ``README.md`` is a dataset card whose YAML front matter names the configs (data files per
  split), the features, the splits and the licence (from the samples' ``source``). It loads
  with ``datasets.load_dataset(DIR)`` and ``load_dataset("parquet", data_files=...)``, and
  back into medibench as ``native:DIR``.
- ``native``: ``samples.jsonl`` and the images (:func:`~medibench.datasets.write_native`).
- ``miedb``: the MieDB-100k layout, ``dataBenchmark/metadata.json`` (``idx``, ``category``,
  ``input_image``, ``output_image``, ``prompt``, ``note``) with perception targets named
  ``<id>_red|_green|_blue<suffix>`` (readable as ``miedb:DIR``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medibench.datasets._base import DatasetError
from medibench.io import atomic_write_text
from medibench.samples import Sample

__all__ = [
    "FORMATS",
    "HF_COLUMNS",
    "HF_DATA",
    "HF_FEATURES",
    "ExportResult",
    "export_dataset",
]

#: The export formats, for ``--format``.
FORMATS = ("hf-parquet", "native", "miedb")
#: The folder of the Parquet shards in an ``hf-parquet`` export.
HF_DATA = "data"
_IMAGE = {"_type": "Image"}
_STRING = {"dtype": "string", "_type": "Value"}
_STRINGS = {"feature": _STRING, "_type": "List"}
#: The ``datasets`` features of an ``hf-parquet`` export, one column per Sample field.
HF_FEATURES: dict[str, dict[str, Any]] = {
    "sample_id": _STRING,
    "benchmark": _STRING,
    "input": _IMAGE,
    "instruction": _STRING,
    "target": _IMAGE,
    "mask": _IMAGE,
    "split": _STRING,
    "task": _STRING,
    "region": _STRING,
    "modality": _STRING,
    "perspective": _STRING,
    "description": _STRING,
    "paraphrases": _STRINGS,
    "overlay_color": _STRINGS,
    "source": _STRING,
    "metadata": _STRING,
}
HF_COLUMNS = tuple(HF_FEATURES)
_IMAGE_FIELDS = ("input", "target", "mask")
_JSON_FIELDS = ("source", "metadata")
#: Bytes a shard holds before the next one starts (images dominate).
_SHARD_BYTES = 500_000_000
_ROW_GROUP = 64
#: Image files ``datasets`` (Pillow) decodes; others are written as PNG, noted.
_PIL_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp", ".gif"}
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")


@dataclass
class ExportResult:
    """What an export wrote: the folder, the samples, the files, and notes (conversions,
    samples the format cannot hold)."""

    out: Path
    format: str
    samples: int
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def export_dataset(
    samples: Iterable[Sample],
    out: str | os.PathLike,
    *,
    format: str,
    name: str = "dataset",
    overwrite: bool = False,
) -> ExportResult:
    """Write ``samples`` (absolute image paths, as every adapter gives) to ``out`` in ``format``.

    Raises:
        ValueError: an unknown format (naming the known ones).
        DatasetError: ``out`` holds files and ``overwrite`` is false; no samples; a split name
            the Hub refuses; an image file missing.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise DatasetError(f"export folder {folder} is a file")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite:
        raise DatasetError(
            f"export folder {folder} is not empty; pass --overwrite to write into it"
        )
    items = list(samples)
    if not items:
        raise DatasetError(f"nothing to export to {folder}: the dataset has no samples")
    folder.mkdir(parents=True, exist_ok=True)
    result = ExportResult(folder, format, len(items))
    if format == "native":
        from medibench.datasets.native import MANIFEST, write_native

        write_native(folder, items, overwrite=True)
        result.files.append(folder / MANIFEST)
    elif format == "miedb":
        _benchmark_writer(format)(folder, items, result)
    else:
        _write_hf(folder, items, name, result)
    return result


# --- hf-parquet ------------------------------------------------------------------------------


def _write_hf(folder: Path, samples: list[Sample], name: str, result: ExportResult) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            "the hf-parquet export needs pyarrow: pip install 'medibench[hf]'"
        ) from None
    by_split: dict[str, list[Sample]] = {}
    for sample in samples:
        if not _SPLIT_NAME.match(sample.split):
            raise DatasetError(
                f"sample '{sample.sample_id}': split {sample.split!r} is not a name the Hub "
                "accepts (letters, digits, '_', dots between)"
            )
        by_split.setdefault(sample.split, []).append(sample)
    schema = _arrow_schema(pa)
    data = folder / HF_DATA
    data.mkdir(exist_ok=True)
    for old in data.glob("*.parquet"):  # an overwrite leaves no stale shard behind
        old.unlink()
    for split, members in by_split.items():
        shards = _shards(members)
        for i, shard in enumerate(shards):
            path = data / f"{split}-{i:05d}-of-{len(shards):05d}.parquet"
            tmp = path.with_name(f".{path.name}.tmp")
            with pq.ParquetWriter(tmp, schema) as writer:
                for start in range(0, len(shard), _ROW_GROUP):
                    rows = [_hf_row(s, result.notes) for s in shard[start : start + _ROW_GROUP]]
                    writer.write_table(pa.Table.from_pylist(rows, schema=schema))
            os.replace(tmp, path)
            result.files.append(path)
    card = folder / "README.md"
    atomic_write_text(card, _card(name, by_split))
    result.files.append(card)


def _arrow_schema(pa: Any) -> Any:
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    types = {"Image": image, "Value": pa.string(), "List": pa.list_(pa.string())}
    fields = [pa.field(col, types[spec["_type"]]) for col, spec in HF_FEATURES.items()]
    meta = {"huggingface": json.dumps({"info": {"features": HF_FEATURES}})}
    return pa.schema(fields, metadata=meta)


def _shards(samples: list[Sample]) -> list[list[Sample]]:
    shards: list[list[Sample]] = [[]]
    size = 0
    for sample in samples:
        weight = sum(
            _size(getattr(sample, f)) for f in _IMAGE_FIELDS if getattr(sample, f) is not None
        )
        if shards[-1] and size + weight > _SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(sample)
        size += weight
    return shards


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _hf_row(sample: Sample, notes: list[str]) -> dict[str, Any]:
    row = sample.model_dump(mode="json")
    for f in _IMAGE_FIELDS:
        value = getattr(sample, f)
        row[f] = None if value is None else _image_cell(sample, f, value, notes)
    for f in _JSON_FIELDS:
        row[f] = json.dumps(row[f], ensure_ascii=False, sort_keys=True)
    return row


def _image_cell(sample: Sample, role: str, value: str, notes: list[str]) -> dict[str, Any]:
    path = Path(value)
    if not path.is_file():
        raise DatasetError(f"sample '{sample.sample_id}': {role} image {path} does not exist")
    suffix = "".join(path.suffixes[-2:]).lower() if path.name.lower().endswith(".gz") else ""
    suffix = suffix or path.suffix.lower()
    if suffix in _PIL_SUFFIXES:
        return {"bytes": path.read_bytes(), "path": f"{sample.sample_id}_{role}{suffix}"}
    notes.append(
        f"sample '{sample.sample_id}': {role} {path.name} written as PNG (decoded as medibench "
        "reads it), a format the Hub's Image feature cannot decode"
    )
    return {"bytes": _as_png(path, role), "path": f"{sample.sample_id}_{role}.png"}


def _as_png(path: Path, role: str) -> bytes:
    import numpy as np

    from medibench.io import encode_image, read_image, read_mask

    if role == "mask":
        mask = read_mask(path)
        image = np.repeat((mask.astype(np.uint8) * 255)[..., None], 3, axis=2)
    else:
        image = read_image(path, mode="rgb")
    return encode_image(image, ".png", where=str(path))


def _card(name: str, by_split: dict[str, list[Sample]]) -> str:
    import yaml

    sources: list[dict[str, str]] = []
    for members in by_split.values():
        for s in members:
            if s.source and s.source not in sources:
                sources.append(dict(s.source))
    licences = sorted(
        {v for src in sources for k, v in src.items() if k in ("licence", "license") and v}
    )
    front: dict[str, Any] = {
        "pretty_name": name,
        "license": _licence_id(licences),
        "tags": ["medical", "image-editing", "medibench"],
        "configs": [
            {
                "config_name": "default",
                "data_files": [
                    {"split": split, "path": f"{HF_DATA}/{split}-*.parquet"} for split in by_split
                ],
            }
        ],
        "dataset_info": {
            "features": [_yaml_feature(col, spec) for col, spec in HF_FEATURES.items()],
            "splits": [
                {"name": split, "num_examples": len(members)} for split, members in by_split.items()
            ],
        },
    }
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {name}",
        "",
        "Exported by `medibench export-dataset --format hf-parquet`: one row per sample, every "
        "medibench `Sample` field; `input`, `target` and `mask` are images (their files' bytes, "
        "unchanged), `source` and `metadata` JSON strings. Read it back with "
        "`medibench score --dataset native:DIR`, or `datasets.load_dataset(DIR)`.",
        "",
        f"Licence: {', '.join(licences) if licences else 'not stated by the samples'}.",
        "",
        "## Sources",
        "",
    ]
    lines += ["- " + ", ".join(f"{k}: {v}" for k, v in sorted(src.items())) for src in sources] or [
        "- not recorded"
    ]
    return "\n".join(lines) + "\n"


def _benchmark_writer(name: str) -> Any:
    """The writer the benchmark ``name`` registers for its own layout (``Benchmark.write``)."""
    from medibench._benchmark import BENCHMARKS

    writer = BENCHMARKS.get(name).writer()
    if writer is None:
        raise ValueError(f"benchmark {name!r} declares no writer for its layout")
    return writer


def _licence_id(licences: Sequence[str]) -> str | list[str]:
    """Hub licence identifiers (``cc-by-nc-4.0``, ``mit``) from the samples' licence names."""
    if not licences:
        return "unknown"
    ids = [re.sub(r"[\s_]+", "-", x.strip()).lower() for x in licences]
    return ids[0] if len(ids) == 1 else ids


def _yaml_feature(col: str, spec: dict[str, Any]) -> dict[str, str]:
    if spec["_type"] == "Image":
        return {"name": col, "dtype": "image"}
    if spec["_type"] == "List":
        return {"name": col, "list": "string"}
    return {"name": col, "dtype": "string"}
