"""Benchmark medibench.calibration on 1,000,000 predictions x 10 classes.

Run:  python bench/calibration.py [--n 1000000] [--classes 10] [--repeats 3]

Prints the best-of-``repeats`` time of every metric of ``calibration@1`` (and of the whole
protocol, which computes the top-label confidences once) and of ``mvcbench@paper``, then ours
against torchmetrics' ``MulticlassCalibrationError`` where it computes the same thing (the
``torchmetrics`` edge policy; norms ``l1`` = ECE and ``max`` = MCE), with the ratio
reference / ours and the absolute difference of the values. Target: all metrics in under 1 s.
One thread (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``) for both sides. ``--record``
appends the figures, the machine and its load to ``bench/results/calibration.json``, which
``docs/numbers.py --check`` compares with the docs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402

from medibench.calibration import as_predictions  # noqa: E402
from medibench.calibration import metrics as M  # noqa: E402
from medibench.calibration.protocols import (  # noqa: E402
    METRIC_NAMES,
    load_calibration_protocol,
)


def best(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    value = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return min(times), value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--record", action="store_true", help="append to bench/results/")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    figures: dict[str, float] = {}

    rng = np.random.default_rng(0)
    z = rng.normal(size=(args.n, args.classes)) * 2.0
    y = rng.integers(0, args.classes, args.n)
    t_load, pred = best(lambda: as_predictions(y, logits=z), 1)
    assert not isinstance(pred, float)
    p = pred.probs
    print(f"{args.n:,} predictions x {args.classes} classes; checks + softmax {t_load:.3f} s")

    proto = load_calibration_protocol("calibration@1")
    single: dict[str, Callable[[], object]] = {
        "accuracy": lambda: M.accuracy(p, y),
        "ece": lambda: M.expected_calibration_error(p, y, n_bins=15),
        "mce": lambda: M.maximum_calibration_error(p, y, n_bins=15),
        "ace": lambda: M.adaptive_calibration_error(p, y, n_bins=15),
        "classwise_ece": lambda: M.classwise_ece(p, y, n_bins=15),
        "brier": lambda: M.brier_score(p, y),
        "nll": lambda: M.negative_log_likelihood(p, y, logits=z),
        "smooth_ece": lambda: M.smooth_ece(p, y),
    }
    assert list(single) == list(METRIC_NAMES)
    print(f"\n{'metric (calibration@1)':<24}{'seconds':>10}{'value':>12}")
    total = 0.0
    for name, fn in single.items():
        t, v = best(fn, args.repeats)
        total += t
        print(f"{name:<24}{t:>10.3f}{float(v):>12.5f}")
    print(f"{'sum of the above':<24}{total:>10.3f}")
    for spec in ("calibration@1", "mvcbench@paper"):
        t, _ = best(lambda spec=spec: load_calibration_protocol(spec).metrics(pred), args.repeats)
        flag = "  (target < 1 s: " + ("met)" if t < 1.0 else "MISSED)")
        print(f"{'all metrics, ' + spec:<24}{t:>10.3f}{flag if spec == proto.spec else ''}")
        figures[f"all_metrics_s[{spec}]"] = t

    try:
        import torch
        from torchmetrics.functional.classification import multiclass_calibration_error
    except ImportError:
        print("\ntorchmetrics is not installed (pip install 'medibench[dev]'): no comparison")
        _record(args, figures, load_before)
        return
    torch.set_num_threads(1)
    pt, yt = torch.from_numpy(p), torch.from_numpy(y)
    print(f"\n{'vs torchmetrics':<24}{'ours s':>10}{'ref s':>10}{'ref/ours':>10}{'|diff|':>10}")
    for norm, ours in (
        ("l1", lambda: M.expected_calibration_error(p, y, n_bins=15, edges="torchmetrics")),
        ("max", lambda: M.maximum_calibration_error(p, y, n_bins=15, edges="torchmetrics")),
    ):
        t_ours, v_ours = best(ours, args.repeats)
        t_ref, v_ref = best(
            lambda norm=norm: multiclass_calibration_error(
                pt, yt, num_classes=args.classes, n_bins=15, norm=norm
            ),
            args.repeats,
        )
        diff = abs(float(v_ours) - float(v_ref))
        label = f"{'ECE' if norm == 'l1' else 'MCE'} (norm={norm})"
        print(f"{label:<24}{t_ours:>10.3f}{t_ref:>10.3f}{t_ref / t_ours:>10.1f}{diff:>10.1e}")
        figures[f"{label.split()[0].lower()}_torchmetrics_ratio"] = t_ref / t_ours
        figures[f"{label.split()[0].lower()}_torchmetrics_diff"] = diff
    _record(args, figures, load_before)


def _record(args: argparse.Namespace, figures: dict[str, float], load_before: float) -> None:
    if args.record:
        from _record import record

        settings = {"n": args.n, "classes": args.classes, "repeats": args.repeats}
        path = record("calibration", figures, load_before=load_before, settings=settings)
        print(f"recorded in {path}")


if __name__ == "__main__":
    main()
