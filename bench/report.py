"""Benchmark the HTML report: build time for a large run, and time until the page is interactive.

Run:  python bench/report.py [--samples 3400] [--models 3] [--size 96] [--keep DIR]

1. Writes a synthetic run store (not timed): ``--samples`` samples (``--size`` px PNG input,
   target and ROI mask; 10 tasks, 8 regions, 5 modalities, 3 perspectives) and ``--models``
   models with one output each and ``native@1`` score rows (values drawn per model; about 1%
   of the predictions failed, so the report shows missing outputs).
2. Times ``build_report`` (tables with 1,000-resample CIs, paired tests, plots, thumbnails,
   HTML). Target: under 30 s for 3,400 samples x 3 models.
3. Opens the page in headless Chromium (selenium, /usr/bin/chromium and /usr/bin/chromedriver)
   and reads ``window.medibenchReadyMs``: milliseconds from navigation start until the page's
   script has wired every table and drawn the first page of the sample browser. Target: < 2 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from medibench.protocols import load_protocol
from medibench.report import build_report
from medibench.runs import RunStore
from medibench.samples import Prediction, Sample, Score

TASKS = [f"task-{i}" for i in range(10)]
REGIONS = ["brain", "chest", "abdomen", "knee", "spine", "eye", "heart", "liver"]
MODALITIES = ["CT", "MRI", "X-ray", "ultrasound", "fundus"]
PERSPECTIVES = ["perception", "modification", "transformation"]


def make_run(root: Path, n_samples: int, n_models: int, size: int, seed: int = 0) -> Path:
    """Write a synthetic run store with images, predictions and native@1 scores."""
    rng = np.random.default_rng(seed)
    proto = load_protocol("native@1")
    img_dir = root / "data"
    img_dir.mkdir(parents=True, exist_ok=True)
    yy, xx = np.mgrid[0:size, 0:size]
    bases = [(127 + 100 * np.sin(xx / (4 + i) + yy / (7 + i))).astype(np.uint8) for i in range(16)]
    models = [f"model-{chr(ord('a') + m)}" for m in range(n_models)]
    samples, preds, scores = [], [], []
    for i in range(n_samples):
        sid = f"s{i:05d}"
        base = bases[i % len(bases)]
        noise = rng.integers(0, 30, (size, size), dtype=np.uint8)
        inp = np.dstack([base, base // 2 + noise, noise * 4])
        mask = np.zeros((size, size), np.uint8)
        c, r = rng.integers(size // 4, 3 * size // 4, 2), int(rng.integers(size // 10, size // 5))
        cv2.circle(mask, (int(c[0]), int(c[1])), r, 255, -1)
        target = inp.copy()
        target[mask > 0] = 200
        cv2.imwrite(str(img_dir / f"{sid}_in.png"), inp)
        cv2.imwrite(str(img_dir / f"{sid}_t.png"), target)
        cv2.imwrite(str(img_dir / f"{sid}_m.png"), mask)
        samples.append(
            Sample(
                sample_id=sid,
                benchmark="synthetic",
                input=str(img_dir / f"{sid}_in.png"),
                target=str(img_dir / f"{sid}_t.png"),
                mask=str(img_dir / f"{sid}_m.png"),
                instruction=f"Edit sample {i}.",
                task=TASKS[i % len(TASKS)],
                region=REGIONS[(i // 3) % len(REGIONS)],
                modality=MODALITIES[(i // 7) % len(MODALITIES)],
                perspective=PERSPECTIVES[i % 3],
            )
        )
        for m, model in enumerate(models):
            out_dir = root / "outputs" / model
            out_dir.mkdir(parents=True, exist_ok=True)
            if rng.random() < 0.01:
                preds.append(
                    Prediction(
                        sample_id=sid, model=model, k=0, status="error", error="synthetic failure"
                    )
                )
                scores.append(
                    Score(
                        sample_id=sid,
                        model=model,
                        k=0,
                        protocol=proto.name,
                        protocol_version=proto.version,
                        status="missing",
                        metrics=dict.fromkeys(proto.metric_names),
                        error="no prediction: synthetic failure",
                    )
                )
                continue
            out = np.clip(
                inp.astype(np.int16) + rng.integers(-10 * m, 10 * m + 1, inp.shape), 0, 255
            ).astype(np.uint8)
            path = out_dir / f"{sid}_0.png"
            cv2.imwrite(str(path), out)
            preds.append(
                Prediction(
                    sample_id=sid, model=model, k=0, path=str(path.relative_to(root)), seed=i
                )
            )
            q = 0.9 - 0.1 * m
            metrics = {
                "ssim": float(np.clip(rng.normal(q, 0.05), 0, 1)),
                "psnr": float(rng.normal(30 - 3 * m, 3)),
                "cp": float(np.clip(rng.normal(q + 0.05, 0.03), 0, 1)),
                "cp_psnr": float(rng.normal(35 - 3 * m, 3)),
                "roi_ssim": float(np.clip(rng.normal(q - 0.3, 0.1), 0, 1)),
            }
            if PERSPECTIVES[i % 3] == "perception":
                metrics["dice"] = float(np.clip(rng.normal(q - 0.1, 0.1), 0, 1))
            scores.append(
                Score(
                    sample_id=sid,
                    model=model,
                    k=0,
                    protocol=proto.name,
                    protocol_version=proto.version,
                    metrics=metrics,
                )
            )
    with RunStore(root) as store:
        store.connection.execute("PRAGMA synchronous=OFF")  # a benchmark fixture, not a run
        store.set_meta(
            "config",
            {
                "dataset": "synthetic",
                "models": models,
                "k": 1,
                "seed": seed,
                "protocols": {proto.name: proto.version},
            },
        )
        store.set_meta("python", sys.version.split()[0])
        store.set_meta("created_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        store.put_samples(samples)
        for p in preds:
            store.put_prediction(p)
        for s in scores:
            store.put_score(s)
    return root


def time_interactive(index: Path) -> tuple[float, float]:
    """(ms until the page's script is ready, s for the whole page load) in headless Chromium."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' Chromium setup
    from tests.browser.conftest import start_chromium, stop_chromium

    driver, profile = start_chromium(1400, 1000)
    try:
        driver.get("about:blank")
        t0 = time.perf_counter()
        driver.get(index.resolve().as_uri())
        load = time.perf_counter() - t0
        ready = driver.execute_script("return window.medibenchReadyMs")
    finally:
        stop_chromium(driver, profile)
    return float(ready), load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=3400)
    ap.add_argument("--models", type=int, default=3)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--keep", type=Path, help="write the run and report here and keep them")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="medibench-bench-report-"))
    try:
        t0 = time.perf_counter()
        make_run(root / "run", args.samples, args.models, args.size)
        print(
            f"synthetic run: {args.samples} samples x {args.models} models, {args.size} px "
            f"({time.perf_counter() - t0:.1f} s to write, not timed); {os.cpu_count()} CPUs"
        )
        t0 = time.perf_counter()
        index = build_report(root / "run", root / "report")
        build = time.perf_counter() - t0
        print(f"build_report: {build:.1f} s (target < 30 s) -> {index}")
        if not (Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists()):
            print("page interactive: skipped (install chromium and chromium-driver)")
            return
        ready_ms, load = time_interactive(index)
        print(
            f"page interactive: {ready_ms / 1000:.2f} s after navigation start "
            f"(target < 2 s); load event after {load:.2f} s"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
