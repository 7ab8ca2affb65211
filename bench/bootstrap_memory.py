"""Bootstraps at any size (issue 28): peak memory and time of ``bootstrap_ci`` on 1,000,000
values with 1,000 resamples (1,000,000,000 indices, drawn ``BOOTSTRAP_MAX_ENTRIES`` at a time),
and seconds per resample of ``calibration score`` on 1,000,000 x 10 logits.

    python bench/bootstrap_memory.py [--calibration-resamples 20]

The calibration figure includes the bootstrap's one-off preparation (a sort and a sparse
matrix, a few seconds at this size) spread over the timed resamples; see
``bench/calibration_bootstrap.py`` for the time per resample against a numpy reference.

Prints peak resident memory (``ru_maxrss``) after each step and the ratios; no assertion.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calibration-resamples", type=int, default=20)
    args = parser.parse_args()
    from medibench.calibration import as_predictions, score
    from medibench.stats import BOOTSTRAP_MAX_ENTRIES, bootstrap_ci

    rng = np.random.default_rng(0)
    values = rng.random(1_000_000)
    base = _peak_mb()
    t = time.perf_counter()
    low, high = bootstrap_ci(values, n_resamples=1000)
    took = time.perf_counter() - t
    print(
        f"bootstrap_ci 1,000,000 x 1,000 resamples: [{low:.6f}, {high:.6f}] in {took:.1f} s; "
        f"peak RSS {_peak_mb():.0f} MB (before: {base:.0f} MB; bound {BOOTSTRAP_MAX_ENTRIES:,} "
        f"indices = {BOOTSTRAP_MAX_ENTRIES * 16 / 2**20:.0f} MB of indices and values)"
    )
    pred = as_predictions(rng.integers(0, 10, 1_000_000), logits=rng.normal(size=(1_000_000, 10)))
    t = time.perf_counter()
    score(pred, "calibration@1", n_resamples=0)
    point = time.perf_counter() - t
    t = time.perf_counter()
    score(pred, "calibration@1", n_resamples=args.calibration_resamples)
    boot = time.perf_counter() - t - point
    per = boot / args.calibration_resamples
    print(
        f"calibration score 1,000,000 x 10: point values {point:.1f} s; "
        f"{per:.1f} s per resample ({args.calibration_resamples} timed) -> about "
        f"{per * 1000 / 60:.0f} min for 1,000; peak RSS {_peak_mb():.0f} MB"
    )


if __name__ == "__main__":
    main()
