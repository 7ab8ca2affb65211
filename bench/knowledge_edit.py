"""Benchmark the model-editing harness's overhead against the model's own time (tiny LLaVA).

Run:  python bench/knowledge_edit.py [--edits N] [--sequential K] [--editor ft]

Builds a synthetic task set of N edits (timed: task building), a tiny randomly initialised
LLaVA taught the set's locality probes (not timed: it stands in for a downloaded model), then
runs the editor with single edits and with sequences of K, storing results in a run store and
scoring them (timed: the harness). Model time is what :func:`run_edits` spends inside the model
(answering, teacher-forced token accuracy, editing, undoing); harness time is everything else:
task building, image loading, matching, bookkeeping, the run store, the results file, scoring.

Target: harness overhead under 10% of model time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from medibench.io import read_image
from medibench.knowledge_edit import (
    TransformersAnswerer,
    load_editor,
    make_matchers,
    run_edits,
    summarize,
    synthetic_taskset,
)
from medibench.knowledge_edit._build import TEXT_TEMPLATES
from medibench.knowledge_edit._store import store_edit_run
from medibench.knowledge_edit.tiny_llava import build_tiny_llava, taught_items, teach, vocabulary
from medibench.runs import RunStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=24)
    ap.add_argument("--sequential", type=int, default=8)
    ap.add_argument("--editor", default="ft")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        ts = synthetic_taskset(root / "tasks", args.edits, seed=0)
        build_s = time.perf_counter() - t0
        texts = [t for r in ts.requests for p in r.probes for t in (p.question, p.answer)]
        build_tiny_llava(root / "tiny", vocabulary([*texts, *TEXT_TEMPLATES]))
        teach(root / "tiny", taught_items(ts, read_image), epochs=15)
        model = TransformersAnswerer(root / "tiny", max_new_tokens=4)
        matchers = make_matchers(["exact", "fuzzy", "token_accuracy"], model)
        total_model = total_harness = 0.0
        print(f"task building: {build_s:.2f} s for {len(ts)} edits")
        for sequential in (0, args.sequential):
            report = run_edits(ts, model, load_editor(args.editor), sequential=sequential,
                               matchers=matchers)  # fmt: skip
            t1 = time.perf_counter()
            with RunStore(root / "run") as store:
                store_edit_run(store, report, model="tiny", editor=args.editor,
                               sequential=sequential)  # fmt: skip
            s = summarize(report.lines)
            after = time.perf_counter() - t1
            harness = report.total_s - report.model_s + after
            total_model += report.model_s
            total_harness += harness
            setting = f"sequential-{sequential}" if sequential else "single"
            print(f"{setting:>14}: model {report.model_s:.2f} s, harness {harness:.2f} s "
                  f"({100 * harness / report.model_s:.1f}%); R {s['reliability']:.3f} "
                  f"G {s['generality']:.3f} L {s['locality']:.3f} "
                  f"(undefined G {s['n_undefined']['generality']}, "
                  f"L {s['n_undefined']['locality']}); {len(report.lines)} lines")  # fmt: skip
        total_harness += build_s
        ratio = total_harness / total_model
        print(f"harness overhead (task building included): {100 * ratio:.1f}% of model time "
              f"({total_harness:.2f} s vs {total_model:.2f} s); target < 10%")  # fmt: skip


if __name__ == "__main__":
    main()
