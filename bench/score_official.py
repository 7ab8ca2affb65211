"""Time MieDB-100k scoring: the official scripts' per-sample work vs medibench's ``miedb@paper``.

Run:  python bench/score_official.py [--samples N] [--quick] [--data DIR] [--threads N]
                                      [--no-malloc-tune] [--repeat N]

Builds (once; reused when ``--data DIR`` already holds the same build) a synthetic benchmark in
the official layout: ``dataBenchmark/metadata.json`` and 512x512 PNGs, half perception (one in
ten multi-class) and half transformation, three outputs per sample in
``eval_results/bench/<stem>_<k>.png`` (a few missing, one sample in 53 with none, one in 11 with
an output at 768x768). Default 3,400 samples (the benchmark's 3,397); ``--quick`` = 200.

Then times, in one process, interleaved sample by sample (the order alternating) so that other
load on the machine slows both alike:

(a) official: a loop doing what Raiiyf/MieDB-100k ``evaluation/DICE.py`` and
    ``PSNR-SSIM-{perception,transformation}.py`` do per sample: ``cv2.imread`` of target, input
    and each output, ``cv2.resize`` to the input size, the float32 overlay alpha in numpy for the
    output and (in each script) the target, the smoothed DICE, ``img[inverse_mask] = 255``, and
    scikit-image's PSNR and SSIM. Each file is decoded once (running the scripts one after the
    other decodes every file twice: this loop is the cheaper reference).
(b) medibench: ``read_miedb`` + ``find_predictions``, then per output what the runner does
    (``score_one``: the protocol's ``load_images`` once per sample, ``read_prediction``,
    ``MieDBPaperProtocol.score``).

and prints both times, the ratio, where (b)'s time goes, and the largest difference between the
per-sample @1 and @3 values of (a) and (b) (0 for a missing sample, as the scripts score it).
Then, alternating ``--repeat`` times (default 2; the fastest of each is reported, with its CPU
seconds, workers included): (b1) ``medibench score --workers 1`` (``score_predictions``: a
reader thread decodes ahead) and (c) ``--workers`` = the machine's CPU count, each against (a).

Both runs use the same OpenCV thread count (default 1, ``--threads``) and allocator settings:
the script re-executes itself with ``MALLOC_MMAP_MAX_=0`` and a large ``MALLOC_TRIM_THRESHOLD_``
(glibc), which helps both sides (``--no-malloc-tune`` keeps the default allocator).
"""

from __future__ import annotations

import os
import sys

_TUNE = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**30)}


def _maybe_reexec() -> None:
    if "--no-malloc-tune" in sys.argv or os.environ.get("MALLOC_MMAP_MAX_") is not None:
        return
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **_TUNE})


if __name__ == "__main__":
    _maybe_reexec()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from skimage import data as skdata  # noqa: E402
from skimage.metrics import peak_signal_noise_ratio, structural_similarity  # noqa: E402

BUILD_VERSION = "1"
MODEL = "bench"
SIZE = 512
K = 3
_BGR = {"RED": np.array([0, 0, 255]), "GREEN": np.array([0, 255, 0]), "BLUE": np.array([255, 0, 0])}
_NAMES = ("red", "green", "blue")


# --- the synthetic benchmark -----------------------------------------------------------------


def _bases() -> list[np.ndarray]:
    """Six 512x512 RGB pictures that scikit-image ships."""
    out = []
    for img in (
        skdata.astronaut(),
        skdata.camera(),
        skdata.retina(),
        skdata.immunohistochemistry(),
        skdata.coffee(),
        skdata.chelsea(),
    ):
        img = cv2.resize(img, (SIZE, SIZE), interpolation=cv2.INTER_AREA)
        out.append(np.repeat(img[:, :, None], 3, axis=2) if img.ndim == 2 else img)
    return out


def _ellipse(rng: np.random.Generator) -> np.ndarray:
    m = np.zeros((SIZE, SIZE), np.uint8)
    centre = (int(rng.integers(120, 392)), int(rng.integers(120, 392)))
    axes = (int(rng.integers(20, 90)), int(rng.integers(20, 90)))
    cv2.ellipse(m, centre, axes, float(rng.uniform(0, 180)), 0, 360, 1, -1)
    return m.astype(bool)


def _write(path: Path, rgb: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write {path}")


def _make_sample(args: tuple[Path, int]) -> dict:
    """Write one sample's input, target and outputs; return its metadata record."""
    from medibench.metrics import blend_overlay

    root, i = args
    bench, preds = root / "dataBenchmark", root / "eval_results" / MODEL
    rng = np.random.default_rng(i)
    base = np.roll(_BASES[i % len(_BASES)], tuple(rng.integers(-60, 60, 2)), axis=(0, 1))
    if rng.random() < 0.5:
        base = base[:, ::-1]
    base = np.ascontiguousarray(base)
    perception = i % 2 == 0
    record = {"idx": i, "prompt": f"synthetic sample {i}", "note": ""}
    outputs: list[np.ndarray] = []
    if perception:
        multi = i % 20 == 0
        colours = list(_NAMES) if multi else [_NAMES[int(rng.integers(3))]]
        labels = [_ellipse(rng) for _ in colours]
        target = blend_overlay(base, labels, colours)
        name = f"p{i:05d}_{'classes' if multi else colours[0]}"
        record |= {"category": "Perception", "note": "Multiclasses" if multi else ""}
        for k in range(K):
            moved = [np.roll(m, (3 * k - 2, 2 - k), axis=(0, 1)) for m in labels]
            out = blend_overlay(base, moved, colours)
            # a model re-renders every pixel: a little blur and a brightness shift
            out = cv2.GaussianBlur(out, (3, 3), 0.6 + 0.2 * k)
            outputs.append(cv2.add(out, np.full_like(out, k + 1)))
    else:
        target = base
        noisy = np.clip(base + rng.normal(0, 10, base.shape), 0, 255).astype(np.uint8)
        name = f"t{i:05d}_clean"
        record |= {"category": "Transformation"}
        base = noisy
        outputs = [cv2.GaussianBlur(noisy, (5, 5), 0.8 + 0.3 * k) for k in range(K)]
    record["input_image"] = f"{record['category']}/input/{name.rsplit('_', 1)[0]}.png"
    record["output_image"] = f"{record['category']}/output/{name}.png"
    _write(bench / record["input_image"], base)
    _write(bench / record["output_image"], target)
    for k, out in enumerate(outputs):
        if i % 53 == 0 or (i % 17 == 0 and k == 0):
            continue  # missing outputs
        if i % 11 == 0 and k == 1:
            out = cv2.resize(out, (768, 768), interpolation=cv2.INTER_CUBIC)
        _write(preds / f"{name}_{k}.png", out)
    return record


_BASES: list[np.ndarray] = []


def _init_worker() -> None:
    cv2.setNumThreads(1)
    _BASES[:] = _bases()


def build(root: Path, n: int) -> None:
    stamp = root / "build.json"
    want = {"version": BUILD_VERSION, "samples": n, "size": SIZE}
    if stamp.is_file() and json.loads(stamp.read_text()) == want:
        print(f"reusing the benchmark in {root}")
        return
    if root.exists():
        shutil.rmtree(root / "dataBenchmark", ignore_errors=True)
        shutil.rmtree(root / "eval_results", ignore_errors=True)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max(1, os.cpu_count() or 1), initializer=_init_worker) as pool:
        records = list(pool.map(_make_sample, [(root, i) for i in range(n)], chunksize=16))
    (root / "dataBenchmark" / "metadata.json").write_text(json.dumps(records))
    stamp.write_text(json.dumps(want))
    size = sum(p.stat().st_size for p in root.rglob("*.png")) / 2**30
    print(f"wrote {n} samples ({size:.1f} GiB of PNG) in {time.perf_counter() - t0:.0f} s")


# --- (a) what the official scripts do --------------------------------------------------------


def _alpha_mask(blended: np.ndarray, background: np.ndarray, colours: list[str]) -> np.ndarray:
    """The scripts' extract_alpha / extract_alpha_multi_color: float32, mask summed over colours."""
    b = blended.astype(np.float32)
    a = background.astype(np.float32)
    total = np.zeros(a.shape[:2])
    for name in colours:
        o = _BGR[name].astype(np.float32)
        t, v = b - a, o - a
        alpha = np.clip(np.sum(t * v, axis=2) / (np.sum(v * v, axis=2) + 1e-6), 0.0, 1.0)
        total += (alpha > 0.5).astype(np.uint8)
    return total


def _dice(gt: np.ndarray, pred: np.ndarray) -> float:
    g, p = gt.astype(bool).ravel(), pred.astype(bool).ravel()
    return float((2.0 * np.sum(g & p) + 1e-6) / (np.sum(g) + np.sum(p) + 1e-6))


def official(bench: str, model_dir: str, rec: dict) -> dict[str, list[float]]:
    """One sample: {metric: [value per available output, in k order]}."""
    category = rec["category"].lower()
    gt_path = os.path.join(bench, rec["output_image"])
    gt = cv2.imread(gt_path)
    origin = cv2.imread(os.path.join(bench, rec["input_image"]))
    gt_rows = gt.copy()  # the perception PSNR script's target, modified in place
    if rec.get("note") == "Multiclasses":
        colours = ["RED", "GREEN", "BLUE"]
    else:
        colours = [gt_path.split("_")[-1].replace(".png", "").upper()]
    values: dict[str, list[float]] = {}
    for k in range(K):
        path = os.path.join(model_dir, gt_path.split("/")[-1]).replace(".png", f"_{k}.png")
        pred = cv2.imread(path) if os.path.exists(path) else None
        if pred is None:
            continue
        if pred.shape != origin.shape:
            pred = cv2.resize(pred, (origin.shape[1], origin.shape[0]))
        if category == "perception":
            mask = _alpha_mask(pred, origin, colours)  # DICE.py
            gt_mask = _alpha_mask(gt, origin, colours)
            values.setdefault("dice", []).append(_dice(gt_mask, mask))
            gt_mask = _alpha_mask(gt_rows, origin, colours)  # PSNR-SSIM-perception.py
            gt_mask[gt_mask != 0] = 1
            inverse_mask = (1 - gt_mask).astype(np.uint8)
            gt_rows[inverse_mask] = 255
            pred[inverse_mask] = 255
            values.setdefault("bg_psnr", []).append(peak_signal_noise_ratio(gt_rows, pred))
            values.setdefault("bg_ssim", []).append(
                structural_similarity(gt_rows, pred, channel_axis=-1)
            )
        else:
            values.setdefault("psnr", []).append(peak_signal_noise_ratio(gt, pred))
            values.setdefault("ssim", []).append(structural_similarity(gt, pred, channel_axis=-1))
    return values


# --- (b) medibench ---------------------------------------------------------------------------


def medibench_one(root: Path, protocol, sample, files: dict, cache: dict) -> dict:
    """One sample through the runner's scoring path: {metric: [value per available output]}."""
    from medibench.runs._runner import score_one
    from medibench.samples import Prediction

    values: dict[str, list[float]] = {}
    for k, path in sorted(files.items()):
        pred = Prediction(sample_id=sample.sample_id, model=MODEL, k=k, path=str(path))
        score = score_one(root, sample, pred, protocol, None, cache)
        if score.status != "ok":
            raise RuntimeError(f"{sample.sample_id} k={k}: {score.error}")
        for name in protocol.applicable_metrics(sample):
            if score.metrics.get(name) is not None:
                values.setdefault(name, []).append(score.metrics[name])
    return values


def compare_runs(root: Path, records: list[dict]) -> tuple[dict, dict, float, float, float]:
    """Score every sample both ways, interleaved (the order alternates per sample), so that a
    change in machine load hits both timings alike. Returns both results, the seconds of (a),
    of (b), and of (b)'s one-off read_miedb + find_predictions (included in (b))."""
    from medibench.benchmarks.miedb.dataset import read_miedb
    from medibench.protocols import load_protocol

    t0 = time.perf_counter()
    ds = read_miedb(root)
    files = ds.find_predictions(root / "eval_results").files.get(MODEL, {})
    protocol = load_protocol("miedb@paper")
    t_index = time.perf_counter() - t0
    bench, model_dir = str(root / "dataBenchmark"), str(root / "eval_results" / MODEL)
    by_id = {str(r["idx"]): r for r in records}
    ref, ours, cache = {}, {}, {}
    t_ref, t_ours = 0.0, t_index
    for i, sample in enumerate(ds):
        rec = by_id[sample.sample_id]

        def run_a(rec=rec, sid=sample.sample_id):
            ref[sid] = official(bench, model_dir, rec)

        def run_b(sample=sample):
            ours[sample.sample_id] = medibench_one(
                root, protocol, sample, files.get(sample.sample_id, {}), cache
            )

        for which, run in ((0, run_a), (1, run_b)) if i % 2 == 0 else ((1, run_b), (0, run_a)):
            t0 = time.perf_counter()
            run()
            elapsed = time.perf_counter() - t0
            if which == 0:
                t_ref += elapsed
            else:
                t_ours += elapsed
    return ref, ours, t_ref, t_ours, t_index


def breakdown(root: Path, n: int) -> dict[str, float]:
    """Milliseconds per output of (b)'s parts, on ``n`` samples' first available output."""
    from medibench.benchmarks.miedb.dataset import read_miedb
    from medibench.metrics import miedb_dice, overlay_to_mask, psnr, ssim
    from medibench.protocols import SKIMAGE_DEFAULT_SSIM, load_protocol
    from medibench.samples import Perspective

    ds = read_miedb(root)
    files = ds.find_predictions(root / "eval_results").files.get(MODEL, {})
    protocol = load_protocol("miedb@paper")
    names = ("load_images", "read_prediction", "overlay", "dice", "psnr", "ssim")
    parts = dict.fromkeys(names, 0.0)
    count = 0
    for sample in list(ds)[:n]:
        outputs = files.get(sample.sample_id)
        if not outputs:
            continue
        t0 = time.perf_counter()
        images = protocol.load_images(sample)
        t1 = time.perf_counter()
        pred = protocol.read_prediction(outputs[min(outputs)])
        t2 = time.perf_counter()
        if pred.shape != images.input.shape:
            continue
        parts["load_images"] += t1 - t0
        parts["read_prediction"] += t2 - t1
        if sample.perspective is Perspective.perception:
            t0 = time.perf_counter()
            mask = overlay_to_mask(pred, images.input, list(sample.overlay_color))
            t1 = time.perf_counter()
            miedb_dice(mask, images.label)
            parts["overlay"] += t1 - t0
            parts["dice"] += time.perf_counter() - t1
        t0 = time.perf_counter()
        psnr(images.target, pred, data_range=255)
        t1 = time.perf_counter()
        ssim(images.target, pred, options=SKIMAGE_DEFAULT_SSIM)
        parts["psnr"] += t1 - t0
        parts["ssim"] += time.perf_counter() - t1
        count += 1
    return {k: v / count * 1e3 for k, v in parts.items()}


# --- comparison ------------------------------------------------------------------------------


def medibench_pool(root: Path, workers: int) -> tuple[dict, float, float]:
    """(c) what ``medibench score --workers N`` does: ``score_predictions`` in N processes.
    Returns {sample_id: {metric: [values per available output]}}, the seconds taken and the
    CPU seconds of this process and its workers."""
    from medibench.benchmarks.miedb.dataset import read_miedb
    from medibench.protocols import load_protocol
    from medibench.runs import score_predictions

    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    ds = read_miedb(root)
    index = ds.find_predictions(root / "eval_results")
    protocol = load_protocol("miedb@paper")
    records = score_predictions(ds, index, [protocol], workers=workers, progress=False)
    seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    values: dict[str, dict[str, list[float]]] = {s.sample_id: {} for s in ds}
    for r in sorted(records, key=lambda r: r.k):
        if r.status != "ok":
            continue
        for name in protocol.applicable_metrics(ds.get(r.sample_id)):
            if r.metrics.get(name) is not None:
                values[r.sample_id].setdefault(name, []).append(r.metrics[name])
    return values, seconds, cpu


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (user + system)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def reduce_k(values: dict[str, list[float]], names: tuple[str, ...]) -> dict[str, float]:
    """@1 (first available) and @3 (best) per metric; 0 when there is no output (the scripts)."""
    out = {}
    for name in names:
        got = values.get(name) or [0.0]
        out[f"{name}@1"], out[f"{name}@3"] = got[0], max(got)
    return out


def max_difference(a: dict, b: dict, records: list[dict]) -> dict[str, float]:
    diffs: dict[str, float] = {}
    for rec in records:
        sid = str(rec["idx"])
        names = (
            ("dice", "bg_psnr", "bg_ssim")
            if rec["category"].lower() == "perception"
            else ("psnr", "ssim")
        )
        ra, rb = reduce_k(a[sid], names), reduce_k(b[sid], names)
        for key in ra:
            x, y = ra[key], rb[key]
            d = 0.0 if (math.isinf(x) and x == y) else abs(x - y)
            diffs[key] = max(diffs.get(key, 0.0), d)
    return diffs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=None, help="samples (default 3400)")
    parser.add_argument("--quick", action="store_true", help="200 samples")
    parser.add_argument("--data", type=Path, default=None, help="build folder (kept, reused)")
    parser.add_argument("--threads", type=int, default=1, help="cv2.setNumThreads (both runs)")
    parser.add_argument("--no-malloc-tune", action="store_true", help="default glibc malloc")
    parser.add_argument(
        "--repeat", type=int, default=2, help="runs of (b1) and of (c), alternating (default 2)"
    )
    args = parser.parse_args()
    n = args.samples or (200 if args.quick else 3400)
    cv2.setNumThreads(args.threads)
    root = args.data or Path(tempfile.mkdtemp(prefix="miedb-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(
        f"cv2 {cv2.__version__}, threads {cv2.getNumThreads()}, CPUs {os.cpu_count()}, "
        f"malloc tune: {os.environ.get('MALLOC_MMAP_MAX_') is not None}, samples {n}"
    )
    try:
        build(root, n)
        records = json.loads((root / "dataBenchmark" / "metadata.json").read_text())
        n_out = sum(1 for _ in (root / "eval_results" / MODEL).glob("*.png"))
        # Warm the page cache so neither run pays the first read from disk.
        for p in root.rglob("*.png"):
            p.read_bytes()
        ref, ours, t_ref, t_ours, t_index = compare_runs(root, records)
        diffs = max_difference(ref, ours, records)
        workers = os.cpu_count() or 1
        # (b1) and (c) alternate, ``--repeat`` times each; the fastest of each is reported.
        t_single = t_pool = cpu_single = cpu_pool = math.inf
        worst_single = worst_pool = 0.0
        for _ in range(args.repeat):
            single, t, cpu = medibench_pool(root, 1)
            worst_single = max(worst_single, max(max_difference(ref, single, records).values()))
            t_single, cpu_single = min(t_single, t), min(cpu_single, cpu)
            pooled, t, cpu = medibench_pool(root, workers)
            worst_pool = max(worst_pool, max(max_difference(ref, pooled, records).values()))
            t_pool, cpu_pool = min(t_pool, t), min(cpu_pool, cpu)
        pool_diffs = {"pool": worst_pool, "single": worst_single}
        parts = breakdown(root, min(n, 200))
    finally:
        if args.data is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{n} samples, {n_out} outputs of 512x512 RGB")
    print(f"(a) official scripts' work : {t_ref:8.1f} s  ({t_ref / n_out * 1e3:6.1f} ms/output)")
    print(f"(b) medibench miedb@paper  : {t_ours:8.1f} s  ({t_ours / n_out * 1e3:6.1f} ms/output)")
    print(f"    of which read_miedb + find_predictions: {t_index:.2f} s")
    print(f"speed-up (a)/(b)           : {t_ref / t_ours:8.2f}x   (one process each)")
    print(
        f"(b1) medibench score --workers 1: {t_single:8.1f} s  "
        f"({t_single / n_out * 1e3:6.1f} ms/output; a reader thread decodes ahead), "
        f"CPU {cpu_single:.1f} s"
    )
    print(f"speed-up (a)/(b1)          : {t_ref / t_single:8.2f}x   (target >= 5x)")
    print(
        f"(c) medibench score --workers {workers}: {t_pool:8.1f} s  "
        f"({t_pool / n_out * 1e3:6.1f} ms/output), CPU {cpu_pool:.1f} s (workers included)"
    )
    print(f"speed-up (a)/(c)           : {t_ref / t_pool:8.2f}x   (target >= 9x)")
    print(
        f"    (b1) and (c) run after (a)/(b), alternating, the fastest of {args.repeat} each; "
        f"(c)/(b1) time {t_pool / t_single:.2f}, CPU {cpu_pool / cpu_single:.2f}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print("\n(b) ms per output (load_images: per sample), first output of up to 200 samples:")
    for k, v in parts.items():
        print(f"    {k:16s} {v:7.2f}")
    worst = max(max(diffs.values()), max(pool_diffs.values()))
    print("\nmax |(a) - (b)| per sample value:")
    for k, v in sorted(diffs.items()):
        print(f"    {k:10s} {v:.3e}")
    print(f"(b1) max |(a) - (b1)|: {pool_diffs['single']:.3e}")
    print(f"(c) max |(a) - (c)|: {pool_diffs['pool']:.3e}")
    print(f"identical to 1e-6: {worst <= 1e-6}")
    if worst > 1e-6:
        sys.exit(1)


if __name__ == "__main__":
    main()
