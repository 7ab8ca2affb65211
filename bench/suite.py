"""Suite generation speed: samples per second at 256x256 and 512x512 (target: >= 50/s at 256).

Generates every task type with a fixed seed into a temporary folder, with the default process
pool (one worker per CPU), and once more in memory without PNG writing (single process), and
prints samples per second. Run: ``python bench/suite.py [--n-per-task N] [--record]``
(``--record`` appends the figures, the machine and its load to ``bench/results/suite.json``, which
``docs/numbers.py --check`` compares with the docs).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from medibench.synth.suite import SUITES, generate_item, generate_suite, plan_suite

TARGET_PER_S = 50.0
MODALITIES = SUITES["medibench-suite@1"]["modalities"]


def with_writing(size: int, n_per_task: int) -> tuple[int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        root = generate_suite(
            os.path.join(tmp, "suite"), n_per_task=n_per_task, size=size, seed=0,
            modalities=MODALITIES, progress=False,
        )  # fmt: skip
        elapsed = time.perf_counter() - t0
        n = sum(1 for _ in open(root / "samples.jsonl", encoding="utf-8"))
    return n, elapsed


def in_memory(size: int, n_per_task: int) -> tuple[int, float, float]:
    plan = plan_suite(n_per_task=n_per_task, modalities=MODALITIES)
    t0, c0 = time.perf_counter(), time.process_time()
    for item in plan:
        generate_item(item, size=size, seed=0)
    return len(plan), time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-per-task", type=int, default=8)
    parser.add_argument("--record", action="store_true", help="append to bench/results/")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    figures: dict[str, float] = {}
    print(f"{os.cpu_count()} CPUs (load average {load:.1f}: other work slows wall-clock rates); "
          f"all task types, modalities {', '.join(MODALITIES)}")  # fmt: skip
    for size in (256, 512):
        n, wall = with_writing(size, args.n_per_task)
        m, wall1, cpu1 = in_memory(size, max(1, args.n_per_task // 2))
        print(
            f"{size}x{size}: {n / wall:6.1f} samples/s with PNG writing (process pool, {n} "
            f"samples, {wall:.1f} s); {m / wall1:6.1f} samples/s in memory, one process "
            f"({m / cpu1:.1f} per CPU-second)"
        )
        figures[f"per_s_written[{size}]"] = n / wall
        figures[f"per_s_in_memory[{size}]"] = m / wall1
        if size == 256:
            verdict = "meets" if n / wall >= TARGET_PER_S else "MISSES"
            print(f"  target >= {TARGET_PER_S:.0f} samples/s at 256x256: {verdict}")
    if args.record:
        from _record import record

        path = record("suite", figures, load_before=load, settings={"n_per_task": args.n_per_task})
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
