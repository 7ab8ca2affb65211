"""A native dataset whose counts, sizes, masks and patients the dataset-command tests know."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medibench.io import write_image

#: sample id -> (patient, task, region, (height, width), mask rows filled or None)
CLINIC = {
    "c00": ("P0", "remove-lesion", "brain", (6, 8), 3),
    "c01": ("P0", "remove-lesion", "brain", (6, 8), 6),
    "c02": ("P1", "remove-lesion", "liver", (6, 8), 1),
    "c03": ("P1", "denoise", "liver", (12, 16), None),
    "c04": ("P2", "denoise", "brain", (12, 16), 6),
    "c05": ("P2", "denoise", "brain", (12, 16), 12),
    "c06": ("P3", "remove-lesion", "chest", (6, 8), 2),
    "c07": ("P3", "denoise", "chest", (6, 8), None),
    "c08": ("P4", "remove-lesion", "brain", (6, 8), 3),
    "c09": ("P4", "denoise", "brain", (6, 8), 6),
}


def write_clinic(root: Path, *, patients: bool = True, ids: dict | None = None) -> Path:
    """:data:`CLINIC` as a native dataset in ``root``: gray inputs of the given size, a mask
    whose first ``rows`` rows are inside (fraction ``rows / height``), the patient in
    ``metadata.patient`` (left out with ``patients=False``)."""
    lines = []
    for n, (sid, (patient, task, region, (h, w), rows)) in enumerate((ids or CLINIC).items()):
        image = np.full((h, w, 3), 20 * n, np.uint8)
        write_image(root / "img" / f"{sid}.png", image)
        write_image(root / "img" / f"{sid}_t.png", 255 - image)
        record = {
            "sample_id": sid,
            "benchmark": "clinic",
            "input": f"img/{sid}.png",
            "target": f"img/{sid}_t.png",
            "instruction": "Remove the lesion.",
            "perspective": "modification",
            "task": task,
            "region": region,
            "modality": "MRI",
            "metadata": {"patient": patient} if patients else {},
        }
        if rows is not None:
            mask = np.zeros((h, w), bool)
            mask[:rows] = True
            write_image(root / "img" / f"{sid}_m.png", mask)
            record["mask"] = f"img/{sid}_m.png"
        lines.append(json.dumps(record))
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def clinic(tmp_path: Path) -> Path:
    return write_clinic(tmp_path / "clinic")
