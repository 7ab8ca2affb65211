"""Loading from an hf-parquet export vs from the PNG folder (issue 12 target: <= 1.2x).

    .venv/bin/python bench/sources.py [--n 2000] [--size 512]

Builds a native dataset of N samples (input, target, mask PNGs at SIZE x SIZE) in a temporary
folder, exports it with ``export_dataset(format="hf-parquet")``, then times opening each and
decoding every sample's images (``load_dataset`` + ``load_images``). The Parquet load is timed
twice: the first writes the image cells to ``.medibench-images/``, the second finds them there.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from medibench.datasets import load_dataset, load_images, write_native
from medibench.datasets._export import export_dataset
from medibench.io import write_image
from medibench.samples import Sample


def _build(root: Path, n: int, size: int) -> None:
    rng = np.random.default_rng(0)
    src = root / "png"
    samples = []
    base = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    for i in range(n):
        paths = {}
        for role in ("input", "target", "mask"):
            image = np.roll(base, i + len(role), axis=0)
            if role == "mask":
                image = np.where(image[..., :1] > 127, 255, 0).astype(np.uint8).repeat(3, axis=2)
            paths[role] = str(src / "files" / f"{i}_{role}.png")
            write_image(paths[role], image)
        samples.append(
            Sample(
                sample_id=f"s{i}",
                benchmark="bench",
                instruction="edit",
                perspective="modification",
                **paths,
            )
        )
    write_native(src, samples)


def _time(spec: str) -> float:
    start = time.perf_counter()
    for sample in load_dataset(spec):
        load_images(sample)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--size", type=int, default=512)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _build(root, args.n, args.size)
        export_dataset(load_dataset(f"native:{root / 'png'}"), root / "hf", format="hf-parquet")
        png = _time(f"native:{root / 'png'}")
        first = _time(f"native:{root / 'hf'}")
        again = _time(f"native:{root / 'hf'}")
    print(
        f"{args.n} samples at {args.size}x{args.size}: PNG folder {png:.2f} s, Parquet "
        f"{first:.2f} s first load, {again:.2f} s after"
    )
    print(
        f"ratio Parquet/PNG: {first / png:.2f}x first load, {again / png:.2f}x after "
        "(target <= 1.2x)"
    )


if __name__ == "__main__":
    main()
