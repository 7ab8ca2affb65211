"""Benchmark medibench judging against a local OpenAI-compatible server with fixed latency.

Run:  python bench/judge.py [--samples N] [--latency S] [--size PX]

Builds a run of N samples (input, target and output PNGs of PX x PX RGB noise, the worst case
for PNG size; two scoring protocols, medebench@paper and medebench@1), starts the tests'
scripted chat-completions server on 127.0.0.1 in its own process (a real judge is remote: it
must not share this process's GIL) with every reply delayed by --latency seconds, and judges
the run with
``medebench-judge@paper-structure`` at concurrency 1, 16 and 64 (a fresh run store each time).
Prints judged samples per second (planning, PNG encoding, HTTP, parsing, the judgement records
and the score-row fills all included) and the calls made by a second run over the finished run.

Also prints this process's CPU time per judged sample (``cpu ms/smp``: the client's own work,
independent of machine load) and the server process's (``server ms``): on a loaded machine the
rate is bounded by the CPU both get, not by the latency.

Targets: >= 115 judged samples/s at 500 ms latency and concurrency 64 (90% of the ideal 128/s);
0 calls on a re-run. At concurrency 64 two runs are made by default: 16 waves (1,024 samples,
where the fixed start of a judge_run weighs 7-10%: 0.1-0.2 s of reading the store and planning
before the first request, 0.3 s more of imports when it is the process's first judge_run, and a
CPU-bound ramp of 0.4-0.6 s to 64 requests in flight) and 50 waves (3,200 samples, the
throughput the target is checked on, as bench/runner.py checks API editing over 50 waves).
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.judges._server

from tests.judges.conftest import build_run  # noqa: E402

from medibench.judges import JudgeConfig, judge_run  # noqa: E402

ANSWER = (
    "Step 1: lesion removed.\nEditing Accuracy: [7]/10\nContextual Preservation: [8]/10\n"
    "Visual Quality: [6]/10"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=None, help="default: 16 x concurrency, >= 64")
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-local")
    root = Path(tempfile.mkdtemp(prefix="medibench-bench-judge-"))
    print(
        f"latency {args.latency * 1000:.0f} ms per reply, {args.size}x{args.size} RGB images; "
        f"load average {os.getloadavg()[0]:.2f} (the rate is CPU-bound on a loaded machine)"
    )
    print(
        f"{'concurrency':>11} {'samples':>8} {'seconds':>8} {'samples/s':>10} "
        f"{'ideal/s':>8} {'re-run calls':>13} {'re-run s':>9} {'cpu ms/smp':>10} "
        f"{'server ms':>10}"
    )
    try:
        with _server(args.latency) as (base_url, count, server_cpu):
            for conc in args.concurrency:
                sizes = [args.samples or (max(64, 16 * conc) if conc > 1 else 8)]
                if conc == 64 and args.samples is None:
                    sizes.append(50 * conc)
                for n in sizes:
                    run = build_run(
                        root / f"c{conc}-{n}", [f"t{i}" for i in range(n)], size=args.size
                    )
                    cfg = JudgeConfig(model="bench-judge", base_url=base_url, concurrency=conc)
                    t0, c0, s0 = time.perf_counter(), time.process_time(), server_cpu()
                    (rep,) = judge_run(run, ["medebench-judge@paper-structure"], cfg)
                    dt = time.perf_counter() - t0
                    cpu_ms = (time.process_time() - c0) / n * 1e3
                    srv_ms = (server_cpu() - s0) / n * 1e3
                    assert rep.counts == {"ok": n}, rep.counts
                    before = count()
                    t1 = time.perf_counter()
                    (again,) = judge_run(run, ["medebench-judge@paper-structure"], cfg)
                    rerun_s = time.perf_counter() - t1
                    calls = count() - before
                    assert again.cached == n
                    target = ""
                    if conc == 64 and args.latency == 0.5:
                        verdict = "OK" if n / dt >= 115 else "MISSED"
                        waves = f"{n // conc} waves"
                        target = f"  ({waves}: target >= 115/s {verdict})"
                    print(
                        f"{conc:>11} {n:>8} {dt:>8.2f} {n / dt:>10.1f} "
                        f"{conc / args.latency:>8.0f} {calls:>13} {rerun_s:>9.2f} "
                        f"{cpu_ms:>10.2f} {srv_ms:>10.2f}{target}"
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


class _server:
    """The scripted server in a child process; yields (base_url, request counter)."""

    def __init__(self, latency: float) -> None:
        root = Path(__file__).resolve().parents[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.judges._server", str(latency), ANSWER],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def __enter__(self):
        base_url = self.proc.stdout.readline().strip()

        def count() -> int:
            import urllib.request

            with urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/count") as r:
                return json.loads(r.read())["requests"]

        def server_cpu() -> float:
            """CPU seconds (user + system) the server process has used."""
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        return base_url, count, server_cpu

    def __exit__(self, *exc) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


if __name__ == "__main__":
    main()
