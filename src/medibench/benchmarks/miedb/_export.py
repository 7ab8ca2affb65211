"""MieDB-100k's own layout as an export format (``export-dataset --format miedb``): the
writer its :class:`~medibench.benchmarks.Benchmark` registers (``write``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from medibench.benchmarks.miedb.dataset import BENCHMARK_FOLDER, METADATA, MULTICLASS
from medibench.datasets._base import DatasetError
from medibench.io import atomic_write_bytes, atomic_write_text
from medibench.samples import Perspective, Sample

__all__ = ["write_miedb"]


def write_miedb(folder: Path, samples: list[Sample], result: Any) -> None:
    """Write ``samples`` into ``folder`` in MieDB-100k's layout (``dataBenchmark/input``,
    ``output``, ``metadata.json``), noting skipped samples on ``result`` (an
    :class:`~medibench.datasets.ExportResult`); ``medibench export-dataset --format miedb``."""
    bench = folder / BENCHMARK_FOLDER
    records: list[dict[str, Any]] = []
    for s in samples:
        if s.target is None:
            result.notes.append(f"sample '{s.sample_id}': skipped, MieDB needs a target image")
            continue
        colours = s.overlay_color
        note = s.task
        if s.perspective is Perspective.perception:
            if not colours:
                result.notes.append(
                    f"sample '{s.sample_id}': skipped, a MieDB perception sample needs an "
                    "overlay colour"
                )
                continue
            note = MULTICLASS if len(colours) > 1 else ("" if note == MULTICLASS else note)
            out_name = f"{s.sample_id}_{colours[0]}{Path(s.target).suffix.lower()}"
        else:
            out_name = f"{s.sample_id}_target{Path(s.target).suffix.lower()}"
        in_name = f"input/{s.sample_id}{Path(s.input).suffix.lower()}"
        for name, src in ((in_name, s.input), (f"output/{out_name}", s.target)):
            atomic_write_bytes(bench / name, Path(src).read_bytes())
        records.append(
            {
                "idx": s.sample_id,
                "category": s.perspective.value.capitalize(),
                "input_image": in_name,
                "output_image": f"output/{out_name}",
                "prompt": s.instruction,
                "note": note,
            }
        )
    if not records:
        raise DatasetError(f"no sample fits the MieDB layout: {'; '.join(result.notes[:3])}")
    manifest = bench / METADATA
    atomic_write_text(manifest, json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    result.files.append(manifest)
    result.samples = len(records)
