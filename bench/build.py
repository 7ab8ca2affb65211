"""Build throughput: triplets per second for each perspective at 256x256 (issue 13 target: 150/s
for perception and transformation on 2 cores).

The source is made of MNI152 axial slices (nilearn) padded to squares and resized to 256x256,
written as PNG image + label-map pairs (grey matter, white matter, CSF), one item per slice.
Each perspective is built twice, in fresh folders: once with the local executor (one process)
and once as Ray tasks on 2 CPUs. Printed per run: triplets, seconds for the items (reading,
slicing, making and writing the triplets), seconds end to end (plus dedupe, split, report and
the MieDB and OmniGen2 exports), the rates, the steady rate (triplets of the items after the
first one over the time from the first finished item to the last: start-up, imports and Ray's
worker launch excluded) and its ratio to the target.

    python bench/build.py [--slices N] [--skip-ray]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import cv2  # noqa: E402
import numpy as np  # noqa: E402

cv2.setNumThreads(1)

TARGET = 150.0  # triplets per second, perception and transformation, 2 cores


def write_source(folder: Path, n_slices: int) -> Path:
    from medibench.io import write_image
    from medibench.synth._sources import _mni_volume, to_square

    volumes = {k: np.asanyarray(_mni_volume(k).dataobj)
               for k in ("t1", "brain", "white matter", "grey matter")}  # fmt: skip
    lines = []
    # axial slices first, then coronal ones, each padded to a square and resized to 256x256
    planes = [(2, i) for i in range(15, 80)] + [(1, i) for i in range(15, 100)]
    for axis, index in planes[:n_slices]:

        def plane(kind: str, axis: int = axis, index: int = index) -> np.ndarray:
            return np.rot90(np.take(volumes[kind], index, axis=axis))

        image = to_square(np.clip(np.rint(plane("t1") * 255), 0, 255).astype(np.uint8), 256)
        label = np.zeros((256, 256), np.uint8)
        brain = to_square(plane("brain") > 0.5, 256, nearest=True)
        label[brain & (image < 90)] = 3
        label[to_square(plane("white matter") > 0.5, 256, nearest=True)] = 2
        label[to_square(plane("grey matter") > 0.5, 256, nearest=True)] = 1
        if not label.any():
            continue
        index = axis * 1000 + index
        write_image(folder / "img" / f"z{index}.png", image)
        write_image(folder / "lab" / f"z{index}.png", label)
        lines.append(f"  - {{image: img/z{index}.png, label: lab/z{index}.png, patient: z{index}}}")
    (folder / "SOURCE.yaml").write_text(
        "name: bench\nmodality: MRI\nlicence: ICBM 2009\nitems:\n" + "\n".join(lines)
        + "\nlabels: {1: grey matter, 2: white matter, 3: csf}\nlesions: [csf]\n"
        "min_fraction: 0.002\nbins: [256]\nmissing_labels: skip\n"
        "split: {by: patient, test: 0.2, seed: 0}\n"
    )  # fmt: skip
    return folder / "SOURCE.yaml"


def run(
    perspective: str, source: Path, out: Path, executor: str
) -> tuple[int, float, float, float]:
    from medibench.build import build

    done: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    result = build(
        perspective,
        source,
        out,
        executor=executor,
        on_item=lambda item, r: done.append((time.perf_counter(), len(r["samples"]))),
    )
    total = time.perf_counter() - t0
    if result.failures:
        raise SystemExit(f"{perspective}: {result.failures}")
    triplets = sum(1 for line in (out / "samples.jsonl").read_text().splitlines() if line)
    # steady state: from the first finished item to the last (start-up and imports excluded)
    steady = sum(n for _, n in done[1:]) / max(done[-1][0] - done[0][0], 1e-9)
    return triplets, done[-1][0] - t0, total, steady


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slices", type=int, default=150)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="medibench-bench-build-") as tmp:
        root = Path(tmp)
        source = write_source(root / "src", args.slices)
        executors = ["local"] if args.skip_ray else ["local", "ray"]
        if not args.skip_ray:
            import ray

            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        print(f"source: {args.slices} MNI152 slices at 256x256 (PNG pairs), os.cpu_count() = "
              f"{os.cpu_count()}")  # fmt: skip
        print(f"{'perspective':<15} {'executor':<9} {'triplets':>8} {'items s':>8} "
              f"{'total s':>8} {'items/s':>9} {'total/s':>9} {'steady/s':>9} "
              f"{'vs 150/s':>9}")  # fmt: skip
        for perspective in ("perception", "transformation", "modification"):
            for executor in executors:
                n, items, total, steady = run(
                    perspective, source, root / f"{perspective}-{executor}", executor
                )
                print(f"{perspective:<15} {executor:<9} {n:>8} {items:>8.2f} {total:>8.2f} "
                      f"{n / items:>9.0f} {n / total:>9.0f} {steady:>9.0f} "
                      f"{steady / TARGET:>8.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
