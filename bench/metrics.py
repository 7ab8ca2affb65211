"""Benchmark medibench.metrics against scikit-image / numpy / sklearn references.

Run:  python bench/metrics.py [--quick] [--threads N] [--no-malloc-tune]

Prints, per metric, image size (256/512/1024) and channels (gray/RGB): the median time per pair
of ours and of the reference, the ratio reference/ours and the max abs difference of the values;
the PNG decode time of the same images; and an end-to-end run (decode target + prediction PNGs,
then ssim and masked_ssim float32 from one shared SSIM map (`ssim_by_region`, as the protocols
compute them), psnr and dice) over N samples of 512x512 RGB with the
ratio of scoring time to decode time.

Targets: SSIM float32 >= 20x faster than skimage's Gaussian SSIM at 256, 512 and 1024 RGB (and at
most 3.5 ms at 512), within 1e-5 of float64 skimage, and masked_ssim float32 within 10% of ssim
float32; scoring <= 1.5x decode time. The "interleaved" section is the one to quote on a loaded
machine: it alternates the calls (each timed call right after an untimed one of the same
function, so all start from warm caches) and takes the best of N. The float32 rows use
the fused numba stencil when numba is installed (MEDIBENCH_SSIM_BACKEND=opencv for the OpenCV
path; the header line says which).

Allocator: large numpy temporaries come from mmap and pay page faults on every call. The script
re-executes itself once with MALLOC_MMAP_MAX_=0 and a large MALLOC_TRIM_THRESHOLD_ (glibc), which
helps the references as much as us; --no-malloc-tune keeps the default allocator. medibench's
SSIM also reuses its own scratch buffers, so it is fast either way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

_TUNE = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**30)}


def _maybe_reexec() -> None:
    if "--no-malloc-tune" in sys.argv or os.environ.get("MALLOC_MMAP_MAX_") is not None:
        return
    env = {**os.environ, **_TUNE}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


_maybe_reexec()

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from skimage import data  # noqa: E402
from skimage.metrics import peak_signal_noise_ratio, structural_similarity  # noqa: E402
from sklearn.metrics import f1_score  # noqa: E402

from medibench.metrics import (  # noqa: E402
    dice,
    masked_ssim,
    psnr,
    ssim,
    ssim_by_region,
    ssim_map,
)
from medibench.metrics._ssim_fused import fused_backend  # noqa: E402


def timeit(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``repeat`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make_pair(size: int, rgb: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A real photograph at ``size``, an edited copy (blur + noise + local change) and its ROI."""
    sources = [data.astronaut(), data.coffee(), data.chelsea(), data.immunohistochemistry()]
    src = sources[seed % len(sources)]
    a = cv2.resize(src, (size, size), interpolation=cv2.INTER_AREA)
    rng = np.random.default_rng(seed)
    b = cv2.GaussianBlur(a, (3, 3), 0.8).astype(np.float32) + rng.normal(0, 4, a.shape)
    roi = np.zeros((size, size), bool)
    y0, x0 = rng.integers(size // 8, size // 2, 2)
    roi[y0 : y0 + size // 4, x0 : x0 + size // 3] = True
    b[roi] = 255 - b[roi]
    b = np.clip(b, 0, 255).astype(np.uint8)
    if not rgb:
        a, b = cv2.cvtColor(a, cv2.COLOR_RGB2GRAY), cv2.cvtColor(b, cv2.COLOR_RGB2GRAY)
    return a, b, roi


def table(sizes: list[int], repeat: int) -> list[tuple]:
    rows = []
    for size in sizes:
        for rgb in (False, True):
            a, b, roi = make_pair(size, rgb)
            axis = -1 if rgb else None
            kind = "RGB" if rgb else "gray"
            rep = max(3, repeat * 256 // size)

            def sk_gauss(a=a, b=b, axis=axis):
                return structural_similarity(
                    a,
                    b,
                    data_range=255,
                    channel_axis=axis,
                    gaussian_weights=True,
                    use_sample_covariance=False,
                )

            def sk_uniform(a=a, b=b, axis=axis):
                return structural_similarity(a, b, data_range=255, channel_axis=axis)

            def sk_masked(a=a, b=b, axis=axis, roi=roi):
                s = structural_similarity(
                    a,
                    b,
                    data_range=255,
                    channel_axis=axis,
                    full=True,
                    gaussian_weights=True,
                    use_sample_covariance=False,
                )[1]
                return float(s[~roi].mean())

            pm, gm = roi, np.roll(roi, 7, axis=1)
            cases = [
                (
                    "ssim f64 vs sk gauss",
                    lambda a=a, b=b, x=axis: ssim(a, b, data_range=255, channel_axis=x),
                    sk_gauss,
                ),
                (
                    "ssim f32 vs sk gauss",
                    lambda a=a, b=b, x=axis: ssim(
                        a, b, data_range=255, channel_axis=x, dtype=np.float32
                    ),
                    sk_gauss,
                ),
                (
                    "ssim uniform vs sk default",
                    lambda a=a, b=b, x=axis: ssim(
                        a,
                        b,
                        data_range=255,
                        channel_axis=x,
                        window="uniform",
                        use_sample_covariance=True,
                    ),
                    sk_uniform,
                ),
                (
                    "masked_ssim f64 vs sk map",
                    lambda a=a, b=b, x=axis, r=roi: masked_ssim(
                        a, b, r, data_range=255, channel_axis=x
                    ),
                    sk_masked,
                ),
                (
                    "masked_ssim f32 vs sk map",
                    lambda a=a, b=b, x=axis, r=roi: masked_ssim(
                        a, b, r, data_range=255, channel_axis=x, dtype=np.float32
                    ),
                    sk_masked,
                ),
                (
                    "psnr vs sk",
                    lambda a=a, b=b: psnr(a, b, data_range=255),
                    lambda a=a, b=b: peak_signal_noise_ratio(a, b, data_range=255),
                ),
                (
                    "dice vs numpy",
                    lambda p=pm, g=gm: dice(p, g),
                    lambda p=pm, g=gm: 2 * np.sum(p & g) / (np.sum(p) + np.sum(g)),
                ),
            ]
            if size == sizes[0]:
                cases.append(
                    (
                        "dice vs sklearn f1",
                        lambda p=pm, g=gm: dice(p, g),
                        lambda p=pm, g=gm: f1_score(g.ravel(), p.ravel()),
                    )
                )
            for name, ours, ref in cases:
                t_ours = timeit(ours, rep)
                t_ref = timeit(ref, max(2, rep // 3))
                diff = abs(float(ours()) - float(ref()))
                rows.append((name, size, kind, t_ours * 1e3, t_ref * 1e3, t_ref / t_ours, diff))
            png_a = cv2.imencode(".png", a)[1]
            t_dec = timeit(lambda p=png_a: cv2.imdecode(p, cv2.IMREAD_UNCHANGED), rep)
            rows.append(
                (
                    "PNG decode (1 image)",
                    size,
                    kind,
                    t_dec * 1e3,
                    float("nan"),
                    float("nan"),
                    float("nan"),
                )
            )
    return rows


# The absolute target: SSIM float32 of a 512x512 RGB pair in at most 3.5 ms.
_MS_TARGET = {512: 3.5}


def ssim_interleaved(size: int, rounds: int) -> dict[str, float]:
    """SSIM float32 at ``size`` RGB: ours (plain, masked, OpenCV path) and skimage's Gaussian SSIM,
    called in turn each round (twice: the second call is timed), so load from other processes
    hits them alike.

    Returns the best (min) ms of each; the ratios of the bests are the figures to quote on a
    loaded machine (medians in ``*_median``).
    """
    a, b, roi = make_pair(size, True)
    kw = dict(data_range=255, dtype=np.float32)

    def plain() -> float:
        return ssim(a, b, **kw)

    def masked() -> float:
        return masked_ssim(a, b, roi, **kw)

    def opencv() -> float:
        os.environ["MEDIBENCH_SSIM_BACKEND"] = "opencv"
        try:
            return ssim(a, b, **kw)
        finally:
            os.environ["MEDIBENCH_SSIM_BACKEND"] = backend

    def reference() -> float:
        return structural_similarity(
            a,
            b,
            data_range=255,
            channel_axis=-1,
            gaussian_weights=True,
            use_sample_covariance=False,
        )

    backend = os.environ.get("MEDIBENCH_SSIM_BACKEND", "auto")
    fns = {"plain": plain, "masked": masked, "opencv": opencv, "skimage": reference}
    times: dict[str, list[float]] = {k: [] for k in fns}
    cpu: list[float] = []
    for i in range(rounds):
        for name, fn in fns.items():
            if name == "skimage" and i % 4:
                continue  # 30-60x slower: a quarter of the rounds is enough
            # An untimed call first, so every timed call finds the caches as its own last call
            # left them: in turn, each would otherwise inherit its predecessor's (the plain ssim
            # came right after scikit-image's temporaries, scikit-image after the OpenCV path
            # had read the same images).
            fn()
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - t0)
            if name == "plain":
                cpu.append(time.process_time() - c0)
    out = {k: min(v) * 1e3 for k, v in times.items()}
    out["plain_cpu"] = cpu[times["plain"].index(min(times["plain"]))] * 1e3
    out |= {f"{k}_median": statistics.median(v) * 1e3 for k, v in times.items()}
    out["diff"] = abs(
        plain()
        - structural_similarity(
            a.astype(np.float64),
            b.astype(np.float64),
            data_range=255,
            channel_axis=-1,
            gaussian_weights=True,
            use_sample_covariance=False,
        )
    )
    return out


def end_to_end(n: int) -> dict[str, float]:
    """Decode target + prediction PNGs and score them, for ``n`` samples of 512x512 RGB."""
    pool = []
    for seed in range(8):
        a, b, roi = make_pair(512, True, seed)
        # Stored as files would be: BGR PNG bytes, with the predicted mask a little off.
        pool.append(
            (
                cv2.imencode(".png", a[..., ::-1])[1],
                cv2.imencode(".png", b[..., ::-1])[1],
                roi,
                np.roll(roi, 5, axis=0),
            )
        )
    t_decode = t_score = 0.0
    checksum = 0.0
    for i in range(n):
        png_t, png_p, roi, pred_roi = pool[i % len(pool)]
        t0 = time.perf_counter()
        target = cv2.imdecode(png_t, cv2.IMREAD_COLOR)
        pred = cv2.imdecode(png_p, cv2.IMREAD_COLOR)
        t1 = time.perf_counter()
        # ssim and masked_ssim of the same pair share one SSIM map, as the protocols do.
        both = ssim_by_region(
            target, pred, roi, regions=("full", "outside"), data_range=255, dtype=np.float32
        )
        checksum += both["full"] + both["outside"]
        checksum += psnr(target, pred, data_range=255)
        checksum += dice(pred_roi, roi)
        t2 = time.perf_counter()
        t_decode += t1 - t0
        t_score += t2 - t1
    return {
        "n": n,
        "decode_ms": t_decode / n * 1e3,
        "score_ms": t_score / n * 1e3,
        "ratio": t_score / t_decode,
        "checksum": checksum,
    }


def protocol_end_to_end(n: int) -> dict[str, float]:
    """The ``native@1`` protocol as the runner uses it, on PNG files of 512x512 RGB samples.

    Decode = reading the sample's input, target and mask and the prediction from disk (what
    ``medibench score`` must do anyway); score = ``NativeProtocol.score`` on the decoded arrays.
    """
    import tempfile
    from pathlib import Path

    from medibench.datasets import load_images
    from medibench.io import read_image, write_image
    from medibench.protocols import load_protocol
    from medibench.samples import Sample

    proto = load_protocol("native@1")
    with tempfile.TemporaryDirectory() as tmp:
        items = []
        for seed in range(8):
            a, b, roi = make_pair(512, True, seed)
            target = a.copy()
            target[roi] = 255 - target[roi]
            paths = [Path(tmp) / f"{seed}_{kind}.png" for kind in ("in", "t", "m", "p")]
            for path, img in zip(paths, (a, target, roi, b), strict=True):
                write_image(path, img)
            sample = Sample(
                sample_id=f"s{seed}",
                benchmark="bench",
                input=str(paths[0]),
                target=str(paths[1]),
                mask=str(paths[2]),
                instruction="Remove the lesion.",
                perspective="modification",
            )
            items.append((sample, paths[3]))
        t_decode = t_score = 0.0
        for i in range(n):
            sample, pred_path = items[i % len(items)]
            t0 = time.perf_counter()
            images = load_images(sample)
            pred = read_image(pred_path, mode="rgb")
            t1 = time.perf_counter()
            proto.score(sample, images, pred)
            t_score += time.perf_counter() - t1
            t_decode += t1 - t0
    return {
        "n": n,
        "decode_ms": t_decode / n * 1e3,
        "score_ms": t_score / n * 1e3,
        "ratio": t_score / t_decode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and samples")
    parser.add_argument("--threads", type=int, default=None, help="cv2.setNumThreads(N)")
    parser.add_argument("--no-malloc-tune", action="store_true", help="default glibc malloc")
    parser.add_argument("--samples", type=int, default=None, help="end-to-end samples")
    args = parser.parse_args()
    if args.threads is not None:
        cv2.setNumThreads(args.threads)
    repeat = 5 if args.quick else 15
    n = args.samples or (200 if args.quick else 1000)
    sizes = [256, 512, 1024]
    print(
        f"cv2 {cv2.__version__}, threads {cv2.getNumThreads()}, CPUs {os.cpu_count()}, "
        f"malloc tune: {os.environ.get('MALLOC_MMAP_MAX_') is not None}, SSIM float32 path: "
        f"{'numba fused stencil' if fused_backend() else 'OpenCV'}"
    )
    # Sanity: the map path agrees with the mean path.
    a, b, _ = make_pair(64, True)
    assert (
        abs(
            ssim_map(a, b, data_range=255).mean()
            - ssim_map(a, b, data_range=255, dtype=np.float32).mean()
        )
        < 1e-5
    )
    t0 = time.perf_counter()
    rows = table(sizes, repeat)
    head = (
        f"{'metric':28s} {'size':>5s} {'ch':>4s} {'ours ms':>9s} {'ref ms':>9s} "
        f"{'ref/ours':>8s} {'max|diff|':>10s}"
    )
    print(head)
    print("-" * len(head))
    for name, size, kind, t_o, t_r, ratio, diff in rows:
        print(f"{name:28s} {size:5d} {kind:>4s} {t_o:9.3f} {t_r:9.3f} {ratio:8.1f} {diff:10.2e}")
    e2e = end_to_end(n)
    print(
        f"\nend to end, {e2e['n']} samples 512x512 RGB: decode {e2e['decode_ms']:.2f} ms, "
        f"score {e2e['score_ms']:.2f} ms per sample; score/decode = {e2e['ratio']:.2f} "
        "(target <= 1.5)"
    )
    pe2e = protocol_end_to_end(max(50, n // 5))
    print(
        f"native@1 protocol, {pe2e['n']} samples 512x512 RGB (input, target, mask, prediction "
        f"PNGs): decode {pe2e['decode_ms']:.2f} ms, score {pe2e['score_ms']:.2f} ms per sample; "
        f"score/decode = {pe2e['ratio']:.2f} (target <= 1.5)"
    )
    print(
        "\nSSIM float32 RGB, interleaved calls (best of N; medians in brackets; CPU ms = process "
        "time of the best call):"
    )
    for size in sizes:
        # Best of many calls: at 256 px a call is 0.6 ms, and on a shared machine the best of 60
        # still caught interference (skimage is called in a quarter of the rounds, alike).
        r = ssim_interleaved(size, max(40, 8 * repeat * 256 // size))
        ratio, masked = r["skimage"] / r["plain"], r["masked"] / r["plain"]
        limit = f", <= {_MS_TARGET[size]} ms" if size in _MS_TARGET else ""
        ok = ratio >= 20 and r["diff"] <= 1e-5 and masked <= 1.1
        ok = ok and r["plain"] <= _MS_TARGET.get(size, float("inf"))
        print(
            f"  {size}: ssim {r['plain']:.2f} ms [{r['plain_median']:.2f}] (CPU "
            f"{r['plain_cpu']:.2f}), masked {r['masked']:.2f} [{r['masked_median']:.2f}], OpenCV "
            f"path {r['opencv']:.2f} [{r['opencv_median']:.2f}], skimage {r['skimage']:.1f} "
            f"[{r['skimage_median']:.1f}]; {ratio:.1f}x skimage, {r['opencv'] / r['plain']:.2f}x "
            f"OpenCV path, masked/plain {masked:.2f}, |diff| vs float64 skimage {r['diff']:.1e} "
            f"(targets >= 20x, <= 1.10, 1e-5{limit}: {'met' if ok else 'NOT met'})"
        )
    print(f"total bench time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
