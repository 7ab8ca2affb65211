"""A one-sample native dataset with a 4:3 input (48x64 px) and its ROI mask, and the helpers the
editing conformance tests share (CLI calls, reading a run's outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from medibench.cli import app
from medibench.io import read_image, write_image

__all__ = ["HEIGHT", "WIDTH", "four_by_three", "invoke", "outputs"]

HEIGHT, WIDTH = 48, 64


def four_by_three(root: Path) -> Path:
    """``root`` as a native dataset: sample ``s0``, a 48x64 RGB input, a ROI mask, the
    instruction ``"remove the lesion"`` (words every tiny tokenizer spells)."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[12:30, 20:44] = True
    write_image(root / "s0.png", image)
    write_image(root / "s0_t.png", image[::-1].copy())
    write_image(root / "s0_m.png", mask)
    record = {"sample_id": "s0", "benchmark": "conformance", "input": "s0.png",
              "target": "s0_t.png", "mask": "s0_m.png", "instruction": "remove the lesion",
              "perspective": "modification"}  # fmt: skip
    (root / "samples.jsonl").write_text(json.dumps(record) + "\n")
    return root


def invoke(*args: str):
    """``medibench ARGS`` in this process; the CliRunner result."""
    return CliRunner().invoke(app, [*map(str, args), "--no-progress"])


def outputs(run: Path) -> dict[tuple[str, int], np.ndarray]:
    """``(sample_id, k) -> image`` of every ok prediction in the run."""
    from medibench.runs import RunStore

    with RunStore(run) as store:
        found = store.predictions(status="ok")
    return {(p.sample_id, p.k): read_image(run / p.path) for p in found}
