import json

import numpy as np
import pytest

from medibench.io import write_image


def make_native(root, n=6, size=32):
    """A tiny native dataset: gray noise images, a square ROI, the target brightened inside it."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        img = rng.integers(0, 200, (size, size), dtype=np.uint8)
        mask = np.zeros((size, size), bool)
        mask[8:16, 8:16] = True
        target = img.copy()
        target[mask] = 250
        sid = f"s{i:03d}"
        write_image(root / "img" / f"{sid}.png", np.dstack([img] * 3))
        write_image(root / "img" / f"{sid}_t.png", np.dstack([target] * 3))
        write_image(root / "img" / f"{sid}_m.png", mask)
        lines.append(
            json.dumps(
                {
                    "sample_id": sid,
                    "benchmark": "tiny",
                    "input": f"img/{sid}.png",
                    "target": f"img/{sid}_t.png",
                    "mask": f"img/{sid}_m.png",
                    "instruction": "Remove the lesion.",
                    "perspective": "modification",
                }
            )
        )
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def tiny_dataset(tmp_path):
    return make_native(tmp_path / "data")
