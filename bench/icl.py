"""Benchmark choosing in-context demonstrations: what ``--icl-k`` adds to a run before any call.

Run:  python bench/icl.py [--samples N] [--size PX] [--k K]

On a native dataset of N samples (MedEBench has 1,182) with N/10 patients and N/20 tasks, the
time to choose K demonstrations for every sample from the dataset's other samples under the
leakage rules: ``random`` and ``same-task`` (each query scans the pool), and ``nearest`` (plus
one thumbnail embedding per image, computed once). Printed per query, in ms, and as a share of
a 1 s API request.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

from medibench.datasets import load_dataset  # noqa: E402
from medibench.io import write_image  # noqa: E402
from medibench.runs._icl import plan_icl  # noqa: E402


def build(root: Path, n: int, size: int) -> Path:
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        img = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        write_image(root / f"{i}.png", img)
        write_image(root / f"{i}_t.png", 255 - img)
        lines.append(
            json.dumps(
                {
                    "sample_id": f"s{i:05d}",
                    "benchmark": "bench",
                    "input": f"{i}.png",
                    "target": f"{i}_t.png",
                    "instruction": "Denoise.",
                    "perspective": "transformation",
                    "task": f"t{i % max(1, n // 20)}",
                    "source": {"patient": f"p{i % max(1, n // 10)}"},
                }
            )
        )
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return root


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1182)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--k", type=int, default=4)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = build(Path(tmp), args.samples, args.size)
        ds = load_dataset(f"native:{root}")
        samples = list(ds)
        print(f"{len(samples)} samples of {args.size} px, K = {args.k}")
        for select in ("random", "same-task", "nearest"):
            t0 = time.perf_counter()
            plan = plan_icl(
                (args.k,),
                pool=None,
                select=select,
                embedding="thumbnail",
                dataset=f"native:{root}",
                dataset_options={},
                samples=samples,
                loaded=ds,
                seed=0,
            )
            for s in samples:
                plan.choose(s, 0, args.k, "target")
            per = (time.perf_counter() - t0) / len(samples) * 1e3
            print(f"{select:>10}: {per:6.2f} ms per query ({per / 1000:.2%} of a 1 s request)")


if __name__ == "__main__":
    sys.exit(main())
