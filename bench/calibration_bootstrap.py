"""The calibration bootstrap against a vectorised numpy bootstrap of the same metrics.

Run:  python bench/calibration_bootstrap.py [--n 1000000] [--classes 10] [--resamples 50]
          [--repeats 3] [--cli 1000]

Builds N x C probabilities (softmax of seeded normal logits), then times, best of ``repeats``:

* ours: :func:`medibench.calibration.protocols.bootstrap_intervals` with ``calibration@1``
  (its preparation included), and the same for ``mvcbench-dassl@paper`` and
  ``mvcbench-vl@paper``;
* the reference, written here: the eight ``calibration@1`` metrics of every resample from its
  counts ``w = bincount(rows)`` in plain numpy: per-bin ``bincount`` of ``w``, ``w * conf``,
  ``w * correct`` (ECE, MCE), equal-mass bins from cumulative sums over the confidences sorted
  once (ACE), per class a ``bincount`` of ``w * p_c`` over its bins (class-wise ECE), weighted
  means (accuracy, Brier, NLL) and the residuals deposited by ``bincount`` for the smooth ECE
  (scipy's DCT and ``brentq``). The same resamples are drawn for both
  (``default_rng(42).integers``).

Prints seconds per resample, the ratio ours / reference (target: at most 2.0) and the largest
difference between the two sides' intervals (the reference breaks ties at bin boundaries by
itself, so a few ulps to 1e-6 on tie-free data). ``--cli R`` also times ``python -m medibench
calibration score FILE --resamples R`` on the same predictions, saved as ``.npz``. No
assertion; one thread (``OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402

from medibench.calibration import as_predictions, load_calibration_protocol  # noqa: E402
from medibench.calibration.protocols import bootstrap_intervals  # noqa: E402

BINS = 15
CELLS = 4096


class Reference:
    """The eight ``calibration@1`` metrics of a resample from its counts, in plain numpy."""

    def __init__(self, probs: np.ndarray, labels: np.ndarray) -> None:
        n, c = probs.shape
        self.n, self.c = n, c
        pred = probs.argmax(axis=1)
        self.conf = probs[np.arange(n), pred]
        self.correct = (pred == labels).astype(np.float64)
        self.bin = np.clip(np.ceil(self.conf * BINS).astype(np.int64) - 1, 0, BINS - 1)
        self.order = np.argsort(self.conf, kind="stable")
        self.sorted_conf = self.conf[self.order]
        self.sorted_correct = self.correct[self.order]
        cols = probs.T.copy()  # one contiguous row per class
        self.class_bins = np.clip(np.ceil(cols * BINS).astype(np.int64) - 1, 0, BINS - 1)
        self.class_p = cols
        self.label_key = labels * BINS + self.class_bins.T[np.arange(n), labels]
        p_true = probs[np.arange(n), labels]
        self.brier = np.einsum("ij,ij->i", probs, probs) - 2.0 * p_true + 1.0
        self.nll = -np.log(np.maximum(p_true, 1e-12))
        u = self.conf * CELLS - 0.5
        k0 = np.floor(u)
        frac = u - k0
        self.k0 = np.maximum(k0.astype(np.int64), 0)
        self.k1 = np.minimum(k0.astype(np.int64) + 1, CELLS - 1)
        r = self.correct - self.conf
        self.low, self.high = r * (1 - frac), r * frac
        self.k2 = (np.pi * np.arange(CELLS)) ** 2

    def metrics(self, rows: np.ndarray) -> list[float]:
        n = self.n
        w = np.bincount(rows, minlength=n).astype(np.float64)
        counts = np.bincount(self.bin, weights=w, minlength=BINS)
        gap = np.abs(
            np.bincount(self.bin, weights=w * self.correct, minlength=BINS)
            - np.bincount(self.bin, weights=w * self.conf, minlength=BINS)
        )
        full = counts > 0
        return [
            float(w @ self.correct / n),
            float(gap.sum() / n),
            float((gap[full] / counts[full]).max()),
            self._ace(w),
            self._classwise(w),
            float(w @ self.brier / n),
            float(w @ self.nll / n),
            self._smooth(w),
        ]

    def _ace(self, w: np.ndarray) -> float:
        ws = w[self.order]
        cum = np.cumsum(ws)
        conf_cum = np.cumsum(ws * self.sorted_conf)
        hits_cum = np.cumsum(ws * self.sorted_correct)
        sizes = np.full(BINS, self.n // BINS)
        sizes[: self.n % BINS] += 1
        cuts = np.cumsum(sizes)  # the end of each bin in the sorted resample
        k = np.minimum(np.searchsorted(cum, cuts, side="left"), self.n - 1)
        extra = cum[k] - cuts  # copies of sample k beyond the cut
        conf_at = conf_cum[k] - extra * self.sorted_conf[k]
        hits_at = hits_cum[k] - extra * self.sorted_correct[k]
        return float(
            np.abs(np.diff(hits_at, prepend=0) - np.diff(conf_at, prepend=0)).sum() / self.n
        )

    def _classwise(self, w: np.ndarray) -> float:
        hits = np.bincount(self.label_key, weights=w, minlength=self.c * BINS).reshape(self.c, BINS)
        total = 0.0
        for c in range(self.c):
            p_sum = np.bincount(self.class_bins[c], weights=w * self.class_p[c], minlength=BINS)
            total += np.abs(hits[c] - p_sum).sum() / self.n
        return total / self.c

    def _smooth(self, w: np.ndarray) -> float:
        from scipy.fft import dct, idct
        from scipy.optimize import brentq

        grid = np.bincount(self.k0, weights=w * self.low, minlength=CELLS)
        grid += np.bincount(self.k1, weights=w * self.high, minlength=CELLS)
        coeffs = dct(grid / self.n, type=2, norm="ortho")

        def at(sigma: float) -> float:
            smooth = idct(coeffs * np.exp(-0.5 * sigma * sigma * self.k2), type=2, norm="ortho")
            return float(np.abs(smooth).sum())

        tol = 1e-5
        if at(1.0) >= 1.0:
            return at(1.0)
        if at(tol) <= tol:
            return at(tol)
        return at(float(brentq(lambda s: at(s) - s, tol, 1.0, xtol=tol)))


def reference_intervals(probs, labels, n_resamples: int) -> dict[str, list[float]]:
    ref = Reference(probs, labels)
    rng = np.random.default_rng(42)
    values = np.array([ref.metrics(rng.integers(0, ref.n, ref.n)) for _ in range(n_resamples)])
    names = ("accuracy", "ece", "mce", "ace", "classwise_ece", "brier", "nll", "smooth_ece")
    return {m: list(np.percentile(values[:, i], [2.5, 97.5])) for i, m in enumerate(names)}


def best(fn, repeats: int) -> tuple[float, list[float], object]:
    times, value = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return min(times), times, value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--resamples", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cli", type=int, default=0, help="also time the CLI with this many resamples")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(args.n, args.classes)) * 2.0
    labels = rng.integers(0, args.classes, args.n)
    pred = as_predictions(labels, logits=logits)
    probs = pred.probs
    r = args.resamples
    load = os.getloadavg()[0]
    print(f"{args.n:,} x {args.classes}, {r} resamples, best of {args.repeats} (load {load:.1f})")

    t_ref, ts_ref, ref = best(lambda: reference_intervals(probs, labels, r), args.repeats)
    proto = load_calibration_protocol("calibration@1")
    # the reference reads probabilities: compare on the same NLL (no logits)
    same = as_predictions(labels, probs=probs)
    t_ours, ts_ours, ours = best(
        lambda: bootstrap_intervals(same, proto, n_resamples=r), args.repeats
    )
    diff = max(abs(a - b) for m in ours for a, b in zip(ours[m], ref[m], strict=True))
    print(f"{'':<28}{'s/resample':>12}{'spread':>16}")
    print(f"{'reference (numpy)':<28}{t_ref / r:>12.4f}{_spread(ts_ref, r):>16}")
    print(f"{'ours, calibration@1':<28}{t_ours / r:>12.4f}{_spread(ts_ours, r):>16}")
    print(f"ratio ours / reference: {t_ours / t_ref:.2f}x (target <= 2.0); "
          f"largest interval difference {diff:.1e}")  # fmt: skip
    for spec in ("mvcbench-dassl@paper", "mvcbench-vl@paper"):
        p = load_calibration_protocol(spec)
        t, ts, _ = best(lambda p=p: bootstrap_intervals(pred, p, n_resamples=r), args.repeats)
        print(f"{'ours, ' + spec:<28}{t / r:>12.4f}{_spread(ts, r):>16}")
    if args.cli:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "predictions.npz"
            np.savez(path, logits=logits, labels=labels)
            out = str(Path(tmp) / "scores.json")
            cmd = [sys.executable, "-m", "medibench", "calibration", "score", str(path),
                   "--resamples", str(args.cli), "--json", out]  # fmt: skip
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            print(f"CLI calibration score, {args.cli} resamples: {time.perf_counter() - t0:.1f} s")


def _spread(times: list[float], r: int) -> str:
    return f"{min(times) / r:.4f}-{max(times) / r:.4f}"


if __name__ == "__main__":
    main()
