"""Tiny real runs for the report tests: a native dataset, identity and classical, native@1."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from medibench.io import write_image
from medibench.runs import RunConfig, run

TASKS = [
    ("remove-lesion", "brain", "CT"),
    ("remove-lesion", "chest", "X-ray"),
    ("highlight-lesion", "brain", "MRI"),
]


def make_dataset(root: Path, n: int = 9, size: int = 48) -> Path:
    """``n`` samples of smooth noise with a bright square lesion in the ROI; three
    task/region/modality combinations; perspective modification (perception for highlights)."""
    rng = np.random.default_rng(0)
    lines = []
    yy, xx = np.mgrid[0:size, 0:size]
    for i in range(n):
        task, region, modality = TASKS[i % len(TASKS)]
        base = (100 + 60 * np.sin(xx / 5 + i) * np.cos(yy / 7)).astype(np.uint8)
        img = np.clip(base + rng.integers(0, 20, (size, size)), 0, 255).astype(np.uint8)
        mask = np.zeros((size, size), bool)
        mask[12 + i % 5 : 24 + i % 5, 14:26] = True
        target = img.copy()
        lesioned = img.copy()
        lesioned[mask] = 240
        perception = task.startswith("highlight")
        if perception:
            inp, target = img, img.copy()
            rgb_t = np.dstack([target] * 3)
            rgb_t[mask] = (255, 0, 0)
        else:
            inp, rgb_t = lesioned, np.dstack([target] * 3)
        sid = f"s{i:02d}"
        write_image(root / "img" / f"{sid}.png", np.dstack([inp] * 3))
        write_image(root / "img" / f"{sid}_t.png", rgb_t)
        write_image(root / "img" / f"{sid}_m.png", mask)
        rec = {
            "sample_id": sid,
            "benchmark": "tiny",
            "input": f"img/{sid}.png",
            "target": f"img/{sid}_t.png",
            "mask": f"img/{sid}_m.png",
            "instruction": "Highlight the lesion in red." if perception else "Remove the lesion.",
            "perspective": "perception" if perception else "modification",
            "task": task,
            "region": region,
            "modality": modality,
        }
        if perception:
            rec["overlay_color"] = "red"
        lines.append(json.dumps(rec))
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return root


def make_run(
    run_dir: Path,
    *,
    n: int = 9,
    scored: bool = True,
    models: tuple[str, ...] = ("identity", "classical"),
) -> Path:
    """A real run: the tiny dataset, ``models`` generated, scored by native@1 when ``scored``."""
    data = make_dataset(run_dir.parent / f"{run_dir.name}-data", n=n)
    config = RunConfig(
        dataset=f"native:{data}",
        models=models,
        out=run_dir,
        protocols=("native@1",),
        stage="all" if scored else "generate",
    )
    run(config, progress=False).close()
    return run_dir
