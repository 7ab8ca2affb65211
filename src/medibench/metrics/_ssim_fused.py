"""The SSIM map as one fused stencil (numba): the optional accelerated path of ``ssim``.

The OpenCV path (``ssim.py``) makes four full-image passes of a separable filter plus about ten
element-wise passes, each streaming several megabytes through memory. This kernel (source in
:mod:`medibench.metrics._ssim_stencil`) walks the image once, in strips of columns that keep its
working rows in the first-level caches: each input row's four moments (``x'``, ``y'``,
``(x' - y')^2``, ``x' y'`` of the offset-centred data) are filtered horizontally into a ring of
rows, two output rows at a time are filtered vertically from the ring, turned into SSIM and summed
(cropped mean and region sums) in registers. Symmetric taps are paired, so an 11-tap Gaussian
costs 6 multiply-adds per moment and direction.

Borders are reflected like ``cv2.BORDER_REFLECT`` (``d c b a | a b c d``); the kernel needs the
image to be at least as large as the filter (the caller falls back to OpenCV otherwise).

Install with ``pip install 'medibench[fast]'``; without numba the OpenCV path is used (same
values within float32 rounding; ``MEDIBENCH_SSIM_BACKEND`` chooses, see :func:`fused_backend`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["fused_backend", "fused_ssim", "padded_kernel"]

_BACKENDS = ("auto", "numba", "opencv")


def fused_backend() -> bool:
    """Whether SSIM uses the numba kernel, from ``MEDIBENCH_SSIM_BACKEND``.

    ``auto`` (default): numba when it is installed; ``numba``: required (``ImportError`` naming
    the extra to install when it is missing); ``opencv``: never.
    """
    choice = os.environ.get("MEDIBENCH_SSIM_BACKEND", "auto").strip().lower() or "auto"
    if choice not in _BACKENDS:
        raise ValueError(f"MEDIBENCH_SSIM_BACKEND must be one of {_BACKENDS}, got {choice!r}")
    if choice == "opencv":
        return False
    available = _NUMBA_AVAILABLE
    if choice == "numba" and not available:
        raise ImportError(
            "MEDIBENCH_SSIM_BACKEND=numba but numba is not installed: "
            "pip install 'medibench[fast]' (or unset the variable to use the OpenCV path)"
        )
    return available


def fused_ssim(
    x: np.ndarray,
    y: np.ndarray,
    kernel: np.ndarray,
    *,
    c1: float,
    c2: float,
    cov_norm: float,
    crop: int,
    masks: np.ndarray,
    want_map: bool,
    want_mean: bool = True,
    dtype: type[np.floating] = np.float32,
) -> tuple[np.ndarray | None, np.ndarray]:
    """SSIM of two ``(H, W, C)`` images in ``dtype``: the map (or None) and the sums.

    Args:
        x, y: ``(H, W, C)`` uint8, or float (converted to ``dtype``), any strides.
        kernel: the symmetric 1-D filter taps (odd length, at most ``min(H, W)``).
        crop: border (pixels per side) dropped from the cropped sum.
        masks: ``(n, H, W)`` boolean region maps (True = in the region); ``n`` may be 0.
        want_map, want_mean: whether to return the map, and the cropped sum.
        dtype: ``np.float32`` or ``np.float64``: every buffer and operation.

    Returns:
        ``(map, sums)``: the ``(H, W, C)`` map when ``want_map`` (else None), and float64
        ``sums[0]`` = sum of the map without the ``crop`` border (0 unless ``want_mean``),
        ``sums[1 + r]`` = sum over the pixels of region ``r`` (all channels).
    """
    h, w, c = x.shape
    xs = _as_rows(x, h, w * c, dtype)
    ys = _as_rows(y, h, w * c, dtype)
    if xs.dtype != ys.dtype:
        xs, ys = xs.astype(dtype), ys.astype(dtype)
    out = np.empty((h, w * c) if want_map else (0, 0), dtype)
    sums = np.zeros(1 + masks.shape[0], np.float64)
    consts = np.array([0.0, c1, c2, cov_norm, 2.0, 0.0], dtype)  # [0]: the kernel's offset
    regions = _canonical(masks).view(np.uint8)
    _kernel_fn()(
        xs, ys, c, padded_kernel(kernel, dtype), consts, crop, regions, out,
        want_map, want_mean, sums, _BLOCK // c * c,
    )  # fmt: skip
    return (out.reshape(h, w, c) if want_map else None), sums


def _as_rows(im: np.ndarray, h: int, length: int, dtype: type[np.floating]) -> np.ndarray:
    """``(H, W*C)`` C-contiguous rows in uint8 or ``dtype`` (the compiled signatures)."""
    if im.dtype not in (np.uint8, np.dtype(dtype)):
        im = im.astype(dtype)
    return _canonical(im).reshape(h, length)


def _canonical(a: np.ndarray) -> np.ndarray:
    """``a`` C-contiguous and writeable (copied if it is not), so every call reaches one
    compiled version per dtype: numba builds one per layout and read-only flag and reuses any
    compatible one, and versions built apart need not round float32 alike (as the in-process
    and cached builds do not, see :func:`_kernel_fn`)."""
    if a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.array(a, order="C")


_NUMBA_AVAILABLE = importlib.util.find_spec("numba") is not None
_COMPILED: Any = None
# Filters of up to 7 or 11 taps are zero-padded to that and run unrolled; longer ones take the
# staged path (one pass per tap pair).
_UNROLLED = (7, 11)
# Strip width in elements, cut to whole pixels (128 RGB pixels). Measured on an idle Zen 4 core
# (a sweep of 192, 288, 336, 384 and 480 with bench/metrics.py's inputs), 384
# was fastest or within 2% at 256, 512 and 1024 px in float32 and float64: its float32 ring (12
# rows x 4 moments x 384) is 74 KB, in the second-level cache, and fewer strips mean fewer
# ring refills at the strip tops. (A constant strip width inside the kernel was measured to stop
# numba's cached build from vectorising; the ring's constant row stride, the stencil's ``ROW``,
# does not: the cached build runs as fast as an in-process one.) A strip may not be wider than
# ``ROW`` (the kernel raises).
_BLOCK = 384


_WARMING = "MEDIBENCH_SSIM_WARMING"  # set in the child that fills the cache
# What the first build takes, as announced: numba 0.68.1 built every signature (:func:`warm`) in
# 63 s of CPU on this project's 2-core AMD EPYC (124 and 165 s of wall time beside test runs).
_BUILD_SECONDS = 60


def _cache_folder() -> Path | None:
    """The folder numba caches the kernel in, found by numba's own locators
    (``NUMBA_CACHE_DIR``, else ``__pycache__`` next to ``_ssim_stencil.py`` when writable, else
    the user-wide cache); None where numba cannot cache it (every process then builds its own)."""
    from numba.core.caching import FunctionCache

    from medibench.metrics import _ssim_stencil as src

    try:
        return Path(FunctionCache(src.ssim_rows).cache_path)
    except RuntimeError:  # no locator: no writable folder anywhere
        return None


def _cold_cache(folder: Path, source: Path) -> bool:
    """Whether ``folder`` (numba's cache, :func:`_cache_folder`) holds no build of the current
    ``source`` (``_ssim_stencil.py``) yet.

    An index numba would not use (another numba, or another source: an upgrade or an edit; numba
    names the index by the function's line, and it survives ``pip install``) is stale: numba would
    rebuild it in the first process that calls the kernel, which would then round differently
    from every later process."""
    indexes = list(folder.glob("_ssim_stencil.ssim_rows-*.nbi"))
    if not indexes:
        return True
    stamp = hashlib.sha256(source.read_bytes()).digest()  # numba's stamp of the source
    return not any(_current(index, source, stamp) for index in indexes)


def _current(index: Path, source: Path, stamp: bytes) -> bool:
    """Whether numba would load this index: written by the installed numba for this source
    (numba's test, ``numba.core.caching``: its version, then the source's sha256 ``stamp``). An
    index in a format this does not read counts as current when it is newer than the source."""
    import pickle

    import numba  # imported next by the caller anyway

    try:
        with open(index, "rb") as fh:
            if pickle.load(fh) != numba.__version__:
                return False
            return bool(pickle.loads(fh.read())[0] == stamp)
    except Exception:  # not numba's layout (another numba): fall back to the files' times
        return index.stat().st_mtime >= source.stat().st_mtime


def warm() -> None:
    """Build every signature the kernel is called with (uint8 or ``dtype`` images, float32 and
    float64), so numba's cache holds them (run in a child process by :func:`_kernel_fn`)."""
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        for src in (np.uint8, dtype):
            x = rng.integers(0, 256, (12, 12, 1)).astype(src)
            k = padded_kernel(np.full(7, 1 / 7), dtype)
            fused_ssim(x, x, k, c1=1.0, c2=1.0, cov_norm=1.0, crop=3,
                       masks=np.zeros((0, 12, 12), bool), want_map=False, dtype=dtype)  # fmt: skip


def _kernel_fn() -> Any:
    """The numba-compiled kernel (loaded from numba's cache; built first when it is cold).

    numba's in-process build and the build it loads from its cache round float32 differently
    (last digits: 0.92594255235 vs 0.92594256083 for one pair), so a process that built the
    kernel itself would disagree with scoring workers that load it. A cold cache is therefore
    filled by a child process (:func:`warm`) and every process, this one included, loads it."""
    global _COMPILED
    if _COMPILED is None:
        if not os.environ.get(_WARMING):
            _fill_cache()
        import numba

        from medibench.metrics import _ssim_stencil as src

        # contract: fused multiply-adds; reassoc: vectorised sums (no nnan/ninf: inputs are
        # checked finite before this is called). error_model="numpy": a division by zero gives
        # inf like numpy instead of a per-element check that blocks vectorisation.
        options: dict[str, Any] = dict(
            cache=True, nogil=True, boundscheck=False, error_model="numpy",
            fastmath={"nsz", "contract", "reassoc"},
        )  # fmt: skip
        # The kernel calls these by their module names: compile them first, in place.
        for name in src.INLINED:
            setattr(src, name, numba.njit(inline="always", **options)(getattr(src, name)))
        for name in src.COMPILED:
            setattr(src, name, numba.njit(**options)(getattr(src, name)))
        _COMPILED = numba.njit(**options)(src.ssim_rows)
    return _COMPILED


def _fill_cache() -> None:
    """Build the kernel into numba's cache in a child process (:func:`warm`) when the cache is
    cold, saying so on stderr first: the build takes about a minute, once per install."""
    folder = _cache_folder()
    if folder is None:
        _say(
            f"compiling the fast SSIM kernel with numba (about {_BUILD_SECONDS} s; no writable "
            "cache folder for numba here, so every process compiles it: set NUMBA_CACHE_DIR)"
        )
        return
    source = Path(__file__).with_name("_ssim_stencil.py")
    if not _cold_cache(folder, source):
        return
    # One build for every process that finds the cache cold at once (scoring workers, parallel
    # test workers): the first holds the lock while its child compiles, the others wait for it
    # and then find the cache filled.
    with _build_lock(folder) as waited:
        if waited and not _cold_cache(folder, source):
            return
        import subprocess

        _say(
            f"compiling the fast SSIM kernel once with numba (about {_BUILD_SECONDS} s on an "
            f"idle core; cached afterwards in {folder})"
        )
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "from medibench.metrics._ssim_fused import warm; warm()"],
            check=False,
            stdout=subprocess.DEVNULL, env={**os.environ, _WARMING: "1"},
        )  # fmt: skip
        _say(f"the SSIM kernel took {time.perf_counter() - start:.0f} s to compile")


@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[bool]:
    """Hold an exclusive lock on ``folder/.medibench-build.lock`` (made when missing); yields
    whether another process held it first (then the cache may be warm by now). Where the folder
    or ``fcntl`` is unavailable, no lock: each process builds, as numba alone would."""
    try:
        import fcntl

        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / ".medibench-build.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except (ImportError, OSError):
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = False
        except BlockingIOError:
            _say("another process is compiling the fast SSIM kernel: waiting for it")
            fcntl.flock(fd, fcntl.LOCK_EX)
            waited = True
        yield waited
    finally:
        os.close(fd)  # releases the lock


def _say(message: str) -> None:
    print(f"medibench: {message}", file=sys.stderr, flush=True)


def padded_kernel(kernel: np.ndarray, dtype: type[np.floating] = np.float32) -> np.ndarray:
    """The taps in ``dtype``, zero-padded at both ends to the next unrolled length (7 or 11)."""
    g = np.asarray(kernel, dtype)
    for size in _UNROLLED:
        if g.size < size:
            zeros = np.zeros((size - g.size) // 2, dtype)
            return np.concatenate([zeros, g, zeros])
        if g.size == size:
            break
    return g
