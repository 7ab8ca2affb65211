"""Benchmark medibench at the size of MieDB-100k: time and peak memory of the real CLI.

Run:  python bench/scale.py [--sizes 10000,30000,100000] [--quick] [--keep DIR] [--record]

For each size N, writes a native dataset of N small samples (``--size`` px PNG input, target
and ROI mask; a third each perception, modification and transformation, with instructions the
``classical`` model carries out), then runs, each in its own child process (the installed
``medibench`` CLI), and measures its wall time and peak resident memory (``wait4``'s
``ru_maxrss``):

1. ``medibench run --model identity`` (generate and score with ``native@1``);
2. ``medibench run --model classical`` (the same, a model that does some work per sample);
3. ``medibench score`` of the identity outputs (a predictions folder, no run);
4. ``medibench report`` of the identity run (tables with CIs, plots, thumbnails, HTML);

then prints the size of ``report/index.html``, what the page loads on open, and, with
Chromium (``/usr/bin/chromium`` and ``/usr/bin/chromedriver``), the time until the page is
interactive (``window.medibenchReadyMs``; target < 2 s). Last, the ratios issue 41 asks for:
peak RSS at 100,000 over 10,000 samples and at 20,000 over 2,000 (each target <= 1.5) and the
time per sample at each size (linear time: flat).

``--quick`` measures 2,000 and 20,000 samples. ``--record`` keeps the figures with the machine
and its load in ``bench/results/scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
#: (perspective, instruction, overlay colour) in turn: the classical model carries each out.
KINDS = (
    ("perception", "Highlight the lesion in red.", ["red"]),
    ("modification", "Remove the lesion.", None),
    ("transformation", "Denoise the image.", None),
)
STEPS = ("run identity", "run classical", "score", "report")


@dataclass(frozen=True)
class Measured:
    """One child process: its wall time (s) and peak resident memory (MB)."""

    seconds: float
    peak_mb: float


def make_dataset(root: Path, n: int, size: int, seed: int = 0) -> Path:
    """Write a native dataset of ``n`` samples (input, target, mask PNGs) into ``root``."""
    rng = np.random.default_rng(seed)
    images = root / "images"
    images.mkdir(parents=True, exist_ok=True)
    yy, xx = np.mgrid[0:size, 0:size]
    lines = []
    for i in range(n):
        sid = f"s{i:06d}"
        perspective, instruction, colors = KINDS[i % len(KINDS)]
        base = (90 + 60 * np.sin(xx / (3 + i % 5) + yy / (4 + i % 7))).astype(np.uint8)
        inp = np.dstack([base, base, base]) + rng.integers(0, 8, (size, size, 3), np.uint8)
        cy, cx = rng.integers(size // 4, 3 * size // 4, 2)
        mask = (((yy - cy) ** 2 + (xx - cx) ** 2) <= (size // 5) ** 2).astype(np.uint8) * 255
        target = inp.copy()
        inside = mask > 0
        if perspective == "perception":
            target[inside] = (0.4 * inp[inside] + 0.6 * np.array([255, 0, 0])).astype(np.uint8)
        elif perspective == "modification":
            target[inside] = int(np.median(inp[~inside]))
        else:
            target = np.dstack([base, base, base])
        for name, image in (("in", inp), ("t", target), ("m", mask)):
            ok, png = cv2.imencode(".png", image[..., ::-1] if image.ndim == 3 else image)
            (images / f"{sid}_{name}.png").write_bytes(png.tobytes())
        record = {
            "sample_id": sid,
            "benchmark": "scale",
            "input": f"images/{sid}_in.png",
            "target": f"images/{sid}_t.png",
            "mask": f"images/{sid}_m.png",
            "instruction": instruction,
            "perspective": perspective,
            "task": f"{perspective}-{i % 4}",
            "region": ("brain", "chest", "abdomen", "knee")[i % 4],
            "modality": ("CT", "MRI", "X-ray")[i % 3],
        }
        if colors:
            record["overlay_color"] = colors
        lines.append(json.dumps(record) + "\n")
    (root / "samples.jsonl").write_text("".join(lines), encoding="utf-8")
    return root


def measure(args: list[str], log: Path) -> Measured:
    """Run the ``medibench`` CLI with ``args`` in a child process; its time and peak RSS."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "medibench", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"medibench {' '.join(args)} exited {proc.returncode}; see {log}")
    return Measured(seconds, usage.ru_maxrss / 1024)  # Linux: kilobytes


def report_loads(report: Path) -> tuple[int, int, int]:
    """(bytes of index.html, files the page loads on open, their bytes): the page itself and
    the scripts and style sheets it names (images and data pages load when shown)."""
    import re

    index = report / "index.html"
    html = index.read_text(encoding="utf-8")
    named = re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"#:]+)"', html)
    files = [report / n for n in named if (report / n).is_file()]
    return (
        index.stat().st_size,
        1 + len(files),
        index.stat().st_size + sum(f.stat().st_size for f in files),
    )


def time_interactive(index: Path) -> float | None:
    """Seconds until the page is interactive in headless Chromium; ``None`` without it."""
    if not (Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists()):
        return None
    sys.path.insert(0, str(REPO))  # the tests' Chromium setup
    from tests.browser.conftest import start_chromium, stop_chromium

    driver, profile = start_chromium(1400, 1000)
    try:
        driver.get("about:blank")
        driver.get(index.resolve().as_uri())
        return float(driver.execute_script("return window.medibenchReadyMs")) / 1000
    finally:
        stop_chromium(driver, profile)


def bench_size(root: Path, n: int, size: int, steps: list[str]) -> dict[str, float]:
    """The ``steps`` at ``n`` samples; the figures, printed as they come."""
    t0 = time.perf_counter()
    data = make_dataset(root / "data", n, size)
    print(f"{n:,} samples of {size}x{size}: dataset written in {time.perf_counter() - t0:.1f} s")
    identity = root / "run-identity"
    commands = {
        "run identity": ["run", "--dataset", f"native:{data}", "--model", "identity",
                         "--out", str(identity)],
        "run classical": ["run", "--dataset", f"native:{data}", "--model", "classical",
                          "--out", str(root / "run-classical")],
        "score": ["score", "--dataset", f"native:{data}", "--predictions",
                  str(identity / "outputs"), "--out", str(root / "scores.jsonl")],
        "report": ["report", str(identity), "--workers", "1"],
    }  # fmt: skip
    figures: dict[str, float] = {}
    for step in steps:
        log = root / f"{step.replace(' ', '-')}.log"
        figures |= _print(step, n, measure([*commands[step], "--no-progress"], log))
    if "report" not in steps:
        return figures
    report = identity / "report"
    html, files, loaded = report_loads(report)
    figures |= {"index_kb": html / 1024, "open_files": files, "open_kb": loaded / 1024}
    print(
        f"  report/index.html {html / 1024:,.0f} KB; on open the page loads {files} file(s), "
        f"{loaded / 1024:,.0f} KB"
    )
    ready = time_interactive(report / "index.html")
    if ready is None:
        print("  page interactive: skipped (install chromium and chromium-driver)")
    else:
        figures["ready_s"] = ready
        print(f"  page interactive after {ready:.2f} s in headless Chromium (target < 2 s)")
    return figures


def _print(step: str, n: int, m: Measured) -> dict[str, float]:
    print(
        f"  {step:<14} {m.seconds:8.1f} s  {m.seconds / n * 1e3:6.2f} ms/sample  "
        f"peak RSS {m.peak_mb:7.0f} MB"
    )
    key = step.replace(" ", "_")
    return {f"{key}_s": m.seconds, f"{key}_ms_per_sample": m.seconds / n * 1e3,
            f"{key}_peak_mb": m.peak_mb}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000,100000", help="comma-separated sample counts")
    ap.add_argument("--quick", action="store_true", help="2,000 and 20,000 samples")
    ap.add_argument("--size", type=int, default=16, help="image side in pixels (16)")
    ap.add_argument(
        "--steps",
        default=",".join(s.replace(" ", "-") for s in STEPS),
        help="comma-separated steps (run-identity, run-classical, score, report; score and "
        "report need run-identity)",
    )
    ap.add_argument("--keep", type=Path, help="write the datasets and runs here and keep them")
    ap.add_argument("--record", action="store_true", help="keep the figures in bench/results/")
    args = ap.parse_args()
    sizes = [2000, 20000] if args.quick else [int(s) for s in args.sizes.split(",")]
    steps = [s.replace("-", " ") for s in args.steps.split(",")]
    unknown = [s for s in steps if s not in STEPS]
    if unknown or ("run identity" not in steps and {"score", "report"} & set(steps)):
        ap.error(f"--steps: unknown {unknown}" if unknown else "--steps: score and report "
                 "need run-identity")  # fmt: skip
    load_before = os.getloadavg()[0]
    print(f"load average {load_before:.2f}; {os.cpu_count()} CPUs")
    root = args.keep or Path(tempfile.mkdtemp(prefix="medibench-bench-scale-"))
    results: dict[int, dict[str, float]] = {}
    try:
        for n in sizes:
            results[n] = bench_size(root / str(n), n, args.size, steps)
            if args.keep is None:
                shutil.rmtree(root / str(n), ignore_errors=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    ratios = _ratios(results)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.record:
        sys.path.insert(0, str(REPO / "bench"))
        from _record import record

        figures = {f"{n}_{k}": v for n, fs in results.items() for k, v in fs.items()}
        record("scale", figures | ratios, load_before=load_before, settings={"size": args.size})


def _ratios(results: dict[int, dict[str, float]]) -> dict[str, float]:
    """Print and return peak RSS at 10x the samples over that at 1x (20k/2k, 100k/10k)."""
    out = {}
    for small, large in ((2000, 20000), (10000, 100000)):
        if small in results and large in results:
            for step in STEPS:
                key = f"{step.replace(' ', '_')}_peak_mb"
                if key not in results[small]:
                    continue
                ratio = results[large][key] / results[small][key]
                verdict = "OK" if ratio <= 1.5 else "MISSED"
                print(
                    f"peak RSS {step} at {large:,} / {small:,} samples: {ratio:.2f} "
                    f"(target <= 1.5 {verdict})"
                )
                out[f"rss_ratio_{large}_{small}_{step.replace(' ', '_')}"] = ratio
    return out


if __name__ == "__main__":
    main()
