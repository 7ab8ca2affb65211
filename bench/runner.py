"""Benchmark the stage runner: per-sample overhead, and API throughput under concurrency.

Run:  python bench/runner.py [--quick] [--samples N] [--size PX]

1. Runner overhead: ``medibench.runs.run`` (stage generate) with the identity model over N
   samples of a native dataset (read the input PNG, seed, write the output PNG atomically, one
   run-store transaction per item), in ms per sample, with its parts timed on their own.
2. API throughput: the ``openai-image`` adapter against a local server that answers every
   request after 200 ms (tests/models/fake_image_api.py), with 1, 8 and 32 requests in flight.

Targets: overhead < 5 ms per sample; >= 140 samples/s at concurrency 32 (issue 18; ideal 160/s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402

from medibench.io import read_image, write_image  # noqa: E402
from medibench.models import load_model  # noqa: E402
from medibench.models.api import OpenAIImageModel  # noqa: E402
from medibench.runs import RunConfig, run, seed_for  # noqa: E402
from medibench.samples import Prediction, Sample  # noqa: E402

QUIET = Console(stderr=True, quiet=True)  # no stage summaries inside the timings


def make_samples(root: Path, n: int, size: int) -> list[Sample]:
    """``n`` random RGB inputs in ``root``, with ``root/samples.jsonl`` (a native dataset)."""
    rng = np.random.default_rng(0)
    samples = []
    for i in range(n):
        path = write_image(
            root / f"in_{i:05d}.png", rng.integers(0, 256, (size, size, 3), np.uint8)
        )
        samples.append(
            Sample(
                sample_id=f"s{i:05d}",
                benchmark="bench",
                input=str(path),
                instruction="Remove the lesion.",
                perspective="modification",
            )
        )
    records = (
        s.model_dump(include={"sample_id", "benchmark", "instruction", "perspective"})
        for s in samples
    )
    (root / "samples.jsonl").write_text(
        "".join(json.dumps({**r, "input": f"in_{i:05d}.png"}) + "\n" for i, r in enumerate(records))
    )
    return samples


def runner_overhead(root: Path, samples: list[Sample], rep: int) -> dict[str, float]:
    """ms per sample of run() (generate) with the identity model, and of its parts."""
    model = load_model("identity")
    data = Path(samples[0].input).parent
    config = RunConfig(
        dataset=f"native:{data}", models=("identity",), out=root / f"run{rep}", stage="generate"
    )
    t0 = time.perf_counter()
    with run(config, progress=False, console=QUIET) as store:
        total = (time.perf_counter() - t0) / len(samples) * 1e3
        done = store.prediction_keys("identity", status="ok")
        assert len(done) == len(samples), len(done)
        parts = {
            "read input": lambda s: read_image(s.input, mode="rgb"),
            "seed": lambda s: seed_for(0, s.sample_id, 0),
            "identity edit": lambda s: model.edit(image, s.instruction, seed=0),
            "write PNG": lambda s: write_image(root / f"x{rep}" / f"{s.sample_id}.png", image),
            "store row": lambda s: store.put_prediction(
                Prediction(sample_id=s.sample_id, model="rows", k=0, path="x", seed=1)
            ),
        }
        image = read_image(samples[0].input, mode="rgb")
        times = {}
        for name, fn in parts.items():
            t0 = time.perf_counter()
            for s in samples:
                fn(s)
            times[name] = (time.perf_counter() - t0) / len(samples) * 1e3
    return {"run (total)": total, **times}


def api_throughput(
    root: Path, samples: list[Sample], concurrency: int, latency: float
) -> tuple[float, float, float]:
    """Samples per second through run() with ``concurrency`` requests in flight, and this
    process's and the server's CPU ms per sample (independent of the machine's load).

    The server runs in its own process, as a real API would (it must not share our GIL), and
    echoes the uploaded image without decoding it: on a 2-core machine its image work would
    otherwise take the CPU the client is being measured on.
    """
    server = Path(__file__).resolve().parents[1] / "tests" / "models" / "fake_image_api.py"
    proc = subprocess.Popen(
        [sys.executable, str(server), str(latency), "echo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
        model = OpenAIImageModel(base_url=f"{url}/v1", concurrency=concurrency)
        model.edit(read_image(samples[0].input, mode="rgb"), "warm up", seed=0)
        config = RunConfig(
            dataset=f"native:{Path(samples[0].input).parent}",
            models=("openai-image",),
            model_options=(f"base_url={url}/v1", f"concurrency={concurrency}"),
            out=root / f"api-{concurrency}",
            stage="generate",
            workers=concurrency,
        )
        t0, c0, s0 = time.perf_counter(), time.process_time(), _cpu_s(proc.pid)
        with run(config, progress=False, console=QUIET) as store:
            elapsed = time.perf_counter() - t0
            cpu = (time.process_time() - c0) / len(samples) * 1e3
            server = (_cpu_s(proc.pid) - s0) / len(samples) * 1e3
            done = store.prediction_keys(model.name, status="ok")
        assert len(done) == len(samples), len(done)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    return len(samples) / elapsed, cpu, server


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--samples", type=int, default=None, help="samples for the overhead run")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (64)")
    parser.add_argument("--latency", type=float, default=0.2, help="API latency in seconds")
    args = parser.parse_args()
    n = args.samples or (200 if args.quick else 1000)
    with tempfile.TemporaryDirectory(prefix="medibench-bench-") as tmp:
        root = Path(tmp)
        samples = make_samples(root / "data", n, args.size)
        print(f"runner overhead, identity model, {n} samples of {args.size}x{args.size} RGB")
        rows = [runner_overhead(root, samples, i) for i in range(1 if args.quick else 3)]
        for key in rows[0]:
            ms = statistics.median(r[key] for r in rows)
            flag = (
                ("  (target < 5 ms)" + (" OK" if ms < 5 else " MISSED")) if "total" in key else ""
            )
            print(f"  {key:<18} {ms:7.3f} ms/sample{flag}")
        print(
            f"API throughput, openai-image against a local server, {args.latency * 1e3:.0f} ms; "
            f"load average {os.getloadavg()[0]:.2f}; cpu: this process's and the server's CPU "
            "ms per sample"
        )
        for c in (1, 8, 32):
            # 50 waves at concurrency 32: a throughput, not the run's fixed start-up (plan,
            # store, dataset: about 1 s, which halves the rate of a 10-wave run).
            count = {1: 10, 8: 80, 32: 1600}[c] // (2 if args.quick else 1)
            rate, cpu, server = api_throughput(
                root, make_samples(root / f"api{c}", count, args.size), c, args.latency
            )
            ideal = c / args.latency
            flag = f"  (target >= 140/s {'OK' if rate >= 140 else 'MISSED'})" if c == 32 else ""
            print(
                f"  concurrency {c:>2}: {rate:7.1f} samples/s ({rate / ideal:.0%} of "
                f"{ideal:.0f}/s ideal, {count} samples; cpu {cpu:.2f} + server {server:.2f} "
                f"ms){flag}"
            )
        print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
