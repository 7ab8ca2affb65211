"""Tiny pipelines and triplet datasets for the training tests (no download)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from medibench.io import write_image

PERSPECTIVES = ("perception", "modification", "transformation")


def make_triplets(root, n=8, size=32, *, prefix="t", targets=True, shape=None):
    """A native dataset of ``n`` triplets: noise images, the target a brightened square, a
    mask; perspectives cycle through the three."""
    rng = np.random.default_rng(len(prefix) + n)
    lines = []
    for i in range(n):
        h, w = shape or (size, size)
        img = rng.integers(0, 200, (h, w, 3), dtype=np.uint8)
        mask = np.zeros((h, w), bool)
        mask[h // 4 : h // 2, w // 4 : w // 2] = True
        target = img.copy()
        target[mask] = 250
        sid = f"{prefix}{i:03d}"
        write_image(root / "img" / f"{sid}.png", img)
        write_image(root / "img" / f"{sid}_t.png", target)
        write_image(root / "img" / f"{sid}_m.png", mask)
        record = {
            "sample_id": sid,
            "benchmark": "tiny",
            "input": f"img/{sid}.png",
            "mask": f"img/{sid}_m.png",
            "instruction": "remove the lesion",
            "perspective": PERSPECTIVES[i % 3],
            "task": f"task{i % 3}",
        }
        if targets:
            record["target"] = f"img/{sid}_t.png"
        lines.append(json.dumps(record))
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="session")
def triplets(tmp_path_factory):
    return make_triplets(tmp_path_factory.mktemp("data") / "train")


@pytest.fixture(scope="session")
def held_out(tmp_path_factory):
    return make_triplets(tmp_path_factory.mktemp("data") / "eval", n=2, prefix="e")


def train_args(data, weights, out, family="ip2p", **options):
    """``medibench train`` arguments: the dataset, ``family:weights``, ``--out`` and each
    option (``max_steps=4`` -> ``--max-steps 4``; ``method`` defaults to ``full``, 32 px)."""
    options = {"method": "full", "resolution": 32, **options}
    args = ["train", "--dataset", f"native:{data}", "--model", f"{family}:{weights}"]
    args += ["--out", str(out)]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def subprocess_env():
    """The environment of a ``python -m medibench`` child: this checkout first on the path."""
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join([str(root / "src"), str(root)])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
