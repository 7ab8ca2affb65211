"""PaintBench scoring: PaintBench's own ``src/eval.py`` + ``src/stats.py`` against
``medibench score --protocol paintbench@1`` on the same problems and outputs, in one run.

Run:  python bench/paintbench.py --paintbench /path/to/PaintBench [--per-condition 12]
          [--tasks recolor,rotation,...] [--workers 2] [--repeat 3] [--work DIR]

``--paintbench`` is a clone of the public PaintBench/PaintBench repository (nothing of it is
copied into medibench): its generator (``src/generate_benchmark.py``) writes the problems, with
``--per-condition`` problems per task and visual condition (PaintBench's default 12 gives 1,920
problems plus 96 of the diagnostic ``preservation`` task) and ``--tasks`` to keep only some
tasks. Outputs are made from the answers, deterministically per problem: exact copies, copies
with noise or a shifted colour on some rows, the input (no edit), a half-size copy (resized back
by both scorers) and missing files (scored 0), so every branch of the scorers runs.

Timed, ``--repeat`` times each, alternating: PaintBench's ``eval.py --workers W --overwrite
--no-save-images`` (its fastest, stats-only mode) followed by ``stats.py --workers W`` (the
bootstrap CIs), and ``medibench score --protocol paintbench@1 --workers W --summary`` (records,
then the summary with the same CIs). Each is a fresh process; the figures include start-up.
The per-problem IoU (and edit / preservation accuracy) of the two are compared for every
problem; the script exits 1 when any differs.

Target (issue 18): medibench >= 2x faster than eval.py + stats.py, identical per-problem IoU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

_GENERATE = """
import sys
sys.path.insert(0, {src!r})
import generate_benchmark as g
keep = {tasks!r}
if keep:
    g.TASKS = [t for t in g.TASKS if t[1] in keep]
g._N_PROBLEMS = {per_condition}
g._JOBS = {workers}
g.generate_paintbench({out!r})
"""

KINDS = ("exact", "noise", "shifted", "input", "half", "missing")


def generate(clone: Path, out: Path, per_condition: int, tasks: list[str], workers: int) -> None:
    """PaintBench's generator, with its problem count and task list patched for this run."""
    code = _GENERATE.format(
        src=str(clone / "src"),
        tasks=tasks,
        per_condition=per_condition,
        workers=workers,
        out=str(out),
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=clone, stdout=subprocess.DEVNULL)


def make_outputs(bench: Path, outputs: Path) -> dict[str, int]:
    """One output per problem under ``outputs/model/PaintBench/<task>/NNNN_output.png``."""
    counts = dict.fromkeys(KINDS, 0)
    for task_dir in sorted(p for p in bench.iterdir() if p.is_dir()):
        dst = outputs / "model" / "PaintBench" / task_dir.name
        dst.mkdir(parents=True, exist_ok=True)
        for inp_path in sorted(task_dir.glob("*_input.png")):
            num = inp_path.name.removesuffix("_input.png")
            idx = int(num)
            rng = np.random.default_rng([idx, sum(map(ord, task_dir.name))])
            kind = KINDS[int(rng.integers(len(KINDS)))]
            counts[kind] += 1
            if kind == "missing":
                continue
            answer = np.array(Image.open(task_dir / f"{num}_answer.png").convert("RGB"))
            if kind == "input":
                out = np.array(Image.open(inp_path).convert("RGB"))
            elif kind == "noise":
                out = answer.astype(np.int16)
                out[::3] += rng.integers(-6, 7, out[::3].shape, dtype=np.int16)
                out = np.clip(out, 0, 255).astype(np.uint8)
            elif kind == "shifted":
                out = answer.copy()
                out[: out.shape[0] // 2] = np.clip(
                    out[: out.shape[0] // 2].astype(np.int16) + 4, 0, 255
                )
            elif kind == "half":
                out = answer[::2, ::2]
            else:
                out = answer
            Image.fromarray(np.ascontiguousarray(out)).save(dst / f"{idx:04d}_output.png")
    return counts


def run_paintbench(clone: Path, bench_root: Path, outputs: Path, work: Path, workers: int) -> float:
    """Seconds for eval.py (stats-only) + stats.py, as its Makefile calls them."""
    evald = work / "eval_outputs"
    shutil.rmtree(evald, ignore_errors=True)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "check": True}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "src/eval.py", "--benchmarks", str(bench_root), "--model-outputs",
         str(outputs), "--eval-outputs", str(evald), "--workers", str(workers), "--overwrite",
         "--no-save-images"],
        cwd=clone, **quiet,
    )  # fmt: skip
    subprocess.run(
        [sys.executable, "src/stats.py", "--input", str(evald / "problem_stats.jsonl"),
         "--output", str(evald / "aggregate_stats.jsonl"), "--workers", str(workers)],
        cwd=clone, **quiet,
    )  # fmt: skip
    return time.perf_counter() - t0


def run_medibench(bench: Path, outputs: Path, work: Path, workers: int) -> float:
    """Seconds for ``medibench score --protocol paintbench@1`` with its summary (CIs)."""
    for name in ("records.jsonl", "summary.csv"):
        (work / name).unlink(missing_ok=True)
    exe = Path(sys.executable).with_name("medibench")
    t0 = time.perf_counter()
    subprocess.run(
        [str(exe), "score", "--dataset", f"paintbench:{bench}", "--predictions", str(outputs),
         "--out", str(work / "records.jsonl"), "--protocol", "paintbench@1", "--workers",
         str(workers), "--summary", str(work / "summary.csv"), "--no-progress"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - t0


def compare(work: Path) -> tuple[int, int, float]:
    """(problems compared, problems that differ, max |difference|) over iou and the accuracies."""
    official = {}
    for line in (work / "eval_outputs" / "problem_stats.jsonl").read_text().splitlines():
        rec = json.loads(line)
        mean = rec["output"]["cie76_mean"]
        official[f"{rec['task']}-{int(rec['idx']):03d}"] = mean
    ours: dict[str, dict[str, float]] = {}
    for line in (work / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        values = {k: v for k, v in rec.get("metrics", {}).items() if v is not None}
        ours[rec["sample_id"]] = values
    differ, worst = 0, 0.0
    for sid, mean in official.items():
        mine = ours.get(sid, {})
        bad = False
        for key in ("iou", "edit_accuracy", "preservation_accuracy"):
            # A missing output is 0 in eval.py and a 'missing' record (scored 0) in medibench.
            value = mine.get(key, 0.0)
            d = abs(value - mean[key])
            worst = max(worst, d)
            bad |= value != mean[key]
        differ += bad
    return len(official), differ, worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paintbench", type=Path, required=True, help="PaintBench clone")
    parser.add_argument(
        "--per-condition", type=int, default=12, help="problems per task/condition (6, 12, ...)"
    )
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None, help="keep the files here")
    args = parser.parse_args()
    clone = args.paintbench.resolve()
    if not (clone / "src" / "eval.py").is_file():
        sys.exit(f"{clone} is not a PaintBench clone: no src/eval.py")
    if args.per_condition < 1 or args.per_condition % 6:
        # Its generator splits each task's problems evenly over the task's modes (2 or 3).
        sys.exit(f"--per-condition must be a positive multiple of 6, got {args.per_condition}")
    work = args.work or Path(tempfile.mkdtemp(prefix="paintbench-bench-"))
    work = work.resolve()
    bench_root, outputs = work / "benchmarks", work / "model_outputs"
    bench = bench_root / "PaintBench"
    tasks = [t for t in args.tasks.split(",") if t]
    if not bench.is_dir():
        t0 = time.perf_counter()
        generate(clone, bench, args.per_condition, tasks, args.workers)
        print(f"generated {bench} in {time.perf_counter() - t0:.0f} s")
    if not outputs.is_dir():
        counts = make_outputs(bench, outputs)
        print("outputs:", ", ".join(f"{k} {v}" for k, v in counts.items()))
    n_problems = sum(1 for _ in bench.glob("*/*_input.png"))
    print(
        f"{n_problems} problems, workers {args.workers}, CPUs {os.cpu_count()}, "
        f"python {sys.version.split()[0]}"
    )
    times: dict[str, list[float]] = {"paintbench": [], "medibench": []}
    for i in range(args.repeat):
        times["paintbench"].append(run_paintbench(clone, bench_root, outputs, work, args.workers))
        times["medibench"].append(run_medibench(bench, outputs, work, args.workers))
        ratio = times["paintbench"][-1] / times["medibench"][-1]
        print(
            f"run {i + 1}: PaintBench eval.py + stats.py {times['paintbench'][-1]:.1f} s, "
            f"medibench score {times['medibench'][-1]:.1f} s, ratio {ratio:.2f}x"
        )
    ratios = [p / m for p, m in zip(times["paintbench"], times["medibench"], strict=True)]
    n, differ, worst = compare(work)
    print(
        f"ratio PaintBench / medibench: median {statistics.median(ratios):.2f}x "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}; target >= 2x)"
    )
    print(
        f"per-problem iou/edit/preservation: {n} problems, {differ} differ, max |diff| {worst:.1e}"
    )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    if differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
