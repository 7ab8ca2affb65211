"""Exports of a build: through :func:`medibench.datasets._export.export_dataset` (``native``,
``miedb``, ``hf-parquet``) and OmniGen2-style training JSONL (``omnigen2``).

OmniGen2's training data (``OmniGen2TrainDataset``) reads JSONL records with ``task_type``,
``instruction``, ``input_images`` (a list of paths) and ``output_image``, listed in a YAML data
config (``data: [{path, type, ratio}]``). ``exports/omnigen2.jsonl`` has one record per sample
with absolute image paths (``task_type`` ``"edit"``, plus medibench's ``sample_id``, ``split``
and ``perspective``), and ``exports/omnigen2.yml`` the config that points at it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from medibench.build._errors import BuildError
from medibench.io import atomic_write_text
from medibench.samples import Sample

__all__ = ["EXPORTS", "export_build", "write_omnigen2"]

#: Export formats a build writes into ``OUT/exports/``.
EXPORTS = ("native", "miedb", "hf-parquet", "omnigen2")


def export_build(
    folder: Path, samples: Sequence[Sample], *, formats: Sequence[str], name: str
) -> dict[str, Path]:
    """Write each of ``formats`` under ``folder/exports`` from ``samples`` (the build's, with
    absolute image paths, as exporters take them); return ``{format: path}``."""
    from medibench.datasets._export import export_dataset

    unknown = [f for f in formats if f not in EXPORTS]
    if unknown:
        raise BuildError(f"unknown export format(s) {unknown}; choose from {', '.join(EXPORTS)}")
    absolute = list(samples)
    out: dict[str, Path] = {}
    for fmt in formats:
        if fmt == "omnigen2":
            out[fmt] = write_omnigen2(folder / "exports", absolute)
            continue
        target = folder / "exports" / fmt
        export_dataset(absolute, target, format=fmt, name=name, overwrite=True)
        out[fmt] = target
    return out


def write_omnigen2(folder: Path, samples: Sequence[Sample]) -> Path:
    """``omnigen2.jsonl`` (one training record per sample) and ``omnigen2.yml``; the JSONL's
    path."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for s in samples:
        if s.target is None:
            continue
        record = {"task_type": "edit", "instruction": s.instruction, "input_images": [s.input],
                  "output_image": s.target, "sample_id": s.sample_id, "split": s.split,
                  "perspective": s.perspective.value}  # fmt: skip
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    path = folder / "omnigen2.jsonl"
    atomic_write_text(path, "".join(lines))
    config = {"data": [{"path": str(path), "type": "edit", "ratio": 1}]}
    atomic_write_text(folder / "omnigen2.yml", yaml.safe_dump(config, sort_keys=False))
    return path
