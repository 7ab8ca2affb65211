"""The SSIM map as one fused stencil (numba): the optional accelerated path of ``ssim``.

The OpenCV path (``ssim.py``) makes four full-image passes of a separable filter plus about ten
element-wise passes, each streaming several megabytes through memory. This kernel walks the image
once, row by row: each input row's four moments (``x'``, ``y'``, ``(x' - y')^2``, ``x' y'`` of the
offset-centred data) are filtered horizontally into a ring of ``kernel size`` rows, the ring is
filtered vertically into one output row, and that row is turned into SSIM and summed (cropped
mean and region sums) while it is still in L1 cache. Symmetric taps are paired, so an 11-tap
Gaussian costs 6 multiply-adds per moment and direction.

Borders are reflected like ``cv2.BORDER_REFLECT`` (``d c b a | a b c d``); the kernel needs the
image to be at least as large as the filter (the caller falls back to OpenCV otherwise).

Install with ``pip install "medibench[fast]"``; without numba the OpenCV path is used (same
values within float32 rounding; ``MEDIBENCH_SSIM_BACKEND`` chooses, see :func:`fused_backend`).
"""

from __future__ import annotations

import importlib.util
import os
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
            'pip install "medibench[fast]" (or unset the variable to use the OpenCV path)'
        )
    return available


def fused_ssim(
    x: np.ndarray,
    y: np.ndarray,
    kernel: np.ndarray,
    *,
    offset: float,
    c1: float,
    c2: float,
    cov_norm: float,
    crop: int,
    masks: np.ndarray,
    want_map: bool,
    dtype: type[np.floating] = np.float32,
) -> tuple[np.ndarray | None, np.ndarray]:
    """SSIM of two ``(H, W, C)`` images in ``dtype``: the map (or None) and the sums.

    Args:
        x, y: ``(H, W, C)`` uint8, or float (converted to ``dtype``), any strides.
        kernel: the symmetric 1-D filter taps (odd length, at most ``min(H, W)``).
        offset: scalar subtracted from both images before the moments (float32 cancellation).
        crop: border (pixels per side) dropped from the cropped sum.
        masks: ``(n, H, W)`` boolean region maps (True = in the region); ``n`` may be 0.
        dtype: ``np.float32`` or ``np.float64``: every buffer and operation.

    Returns:
        ``(map, sums)``: the ``(H, W, C)`` map when ``want_map`` (else None), and float64
        ``sums[0]`` = sum of the map without the ``crop`` border, ``sums[1 + r]`` = sum over the
        pixels of region ``r`` (all channels).
    """
    h, w, c = x.shape
    xs = _as_rows(x, h, w * c, dtype)
    ys = _as_rows(y, h, w * c, dtype)
    if xs.dtype != ys.dtype:
        xs, ys = xs.astype(dtype), ys.astype(dtype)
    out = np.empty((h, w * c) if want_map else (0, 0), dtype)
    sums = np.zeros(1 + masks.shape[0], np.float64)
    consts = np.array([offset, c1, c2, cov_norm, 2.0, 0.0], dtype)
    _kernel_fn()(
        xs, ys, c, padded_kernel(kernel, dtype), consts, crop, masks.view(np.uint8), out,
        want_map, sums,
    )  # fmt: skip
    return (out.reshape(h, w, c) if want_map else None), sums


def _as_rows(im: np.ndarray, h: int, length: int, dtype: type[np.floating]) -> np.ndarray:
    """``(H, W*C)`` C-contiguous rows in uint8 or ``dtype`` (the compiled signatures)."""
    if im.dtype not in (np.uint8, np.dtype(dtype)):
        im = im.astype(dtype)
    return np.ascontiguousarray(im).reshape(h, length)


_NUMBA_AVAILABLE = importlib.util.find_spec("numba") is not None
_COMPILED: Any = None
# Filters of up to 7 or 11 taps are zero-padded to that and run unrolled (one pass per moment
# and direction, the taps summed in registers); longer ones use one pass per tap pair.
_UNROLLED = (7, 11)


def _kernel_fn() -> Any:
    """The numba-compiled kernel (compiled, or loaded from numba's cache, on first use)."""
    global _COMPILED
    if _COMPILED is None:
        import numba

        # reassoc/contract let LLVM vectorise the row loops and fuse multiply-adds; no nnan/ninf
        # (inputs are checked finite before this is called). error_model="numpy": a division by
        # zero gives inf like numpy instead of a per-element check that blocks vectorisation.
        jit = numba.njit(
            cache=True,
            nogil=True,
            fastmath={"nsz", "arcp", "contract", "reassoc"},
            error_model="numpy",
        )
        # The kernel calls these by their module names: compile them first, in place.
        for name in ("_fir7", "_fir11", "_fir_pairs"):
            globals()[name] = jit(globals()[name])
        _COMPILED = jit(_ssim_rows)
    return _COMPILED


def padded_kernel(kernel: np.ndarray, dtype: type[np.floating] = np.float32) -> np.ndarray:
    """The taps in ``dtype``, zero-padded at both ends to the next unrolled length (7 or 11)
    when shorter."""
    g = np.asarray(kernel, dtype)
    for size in _UNROLLED:
        if g.size <= size:
            return np.pad(g, (size - g.size) // 2)
    return g


def _ssim_rows(x, y, c, g, consts, crop, masks, out, want_map, sums):
    """The stencil (pure Python source that numba compiles; see the module docstring)."""
    h, length = x.shape
    w = length // c
    taps = g.shape[0]
    r = taps // 2
    ft = g.dtype  # float32 or float64: every buffer and constant in it
    offset, c1, c2, cov_norm, two, zero = (
        consts[0], consts[1], consts[2], consts[3], consts[4], consts[5],
    )  # fmt: skip
    ring = np.empty((4, taps, length), ft)
    pad = np.empty((4, length + 2 * r * c), ft)
    base = r * c
    acc = np.empty((4, length), ft)
    row_map = np.empty(length, ft)
    pixel_sum = np.empty(w, ft)
    slots = np.empty(taps, np.int64)
    n_masks = masks.shape[0]
    done = 0
    for i in range(h):
        need = min(h - 1, max(i + r, 2 * r))
        while done <= need:
            # Horizontal pass of input row ``done``: its four centred moments, reflected by r
            # pixels on each side, filtered along x into the ring.
            # (Offsets go into slices: ``v[j + o]`` with a runtime ``o`` defeats vectorisation.)
            xr = x[done]
            yr = y[done]
            p0 = pad[0, base : base + length]
            p1 = pad[1, base : base + length]
            p2 = pad[2, base : base + length]
            p3 = pad[3, base : base + length]
            for j in range(length):
                xv = (zero + xr[j]) - offset
                yv = (zero + yr[j]) - offset
                p0[j] = xv
                p1[j] = yv
                p2[j] = (xv - yv) * (xv - yv)  # E[(x-y)^2]: exactly 0 for identical images
                p3[j] = xv * yv
            for p in range(r):
                # Left: pad pixel p is image pixel r - 1 - p; right: the mirror image.
                left = (r - 1 - p) * c
                right = (w - 1 - p) * c
                for ch in range(c):
                    for m in range(4):
                        pad[m, p * c + ch] = pad[m, base + left + ch]
                        pad[m, base + length + p * c + ch] = pad[m, base + right + ch]
            for m in range(4):
                dst = ring[m, done % taps]
                if taps == 7:
                    pm = pad[m]
                    _fir7(
                        dst,
                        pm[0:length],
                        pm[c : c + length],
                        pm[2 * c : 2 * c + length],
                        pm[3 * c : 3 * c + length],
                        pm[4 * c : 4 * c + length],
                        pm[5 * c : 5 * c + length],
                        pm[6 * c : 6 * c + length],
                        g,
                    )
                elif taps == 11:
                    pm = pad[m]
                    _fir11(
                        dst,
                        pm[0:length],
                        pm[c : c + length],
                        pm[2 * c : 2 * c + length],
                        pm[3 * c : 3 * c + length],
                        pm[4 * c : 4 * c + length],
                        pm[5 * c : 5 * c + length],
                        pm[6 * c : 6 * c + length],
                        pm[7 * c : 7 * c + length],
                        pm[8 * c : 8 * c + length],
                        pm[9 * c : 9 * c + length],
                        pm[10 * c : 10 * c + length],
                        g,
                    )
                else:
                    for k in range(taps):
                        slots[k] = k
                    _fir_pairs(dst, pad[m], slots, c, length, g, False)
            done += 1
        # Vertical pass over the ring rows of input rows i - r .. i + r (reflected at borders).
        for k in range(taps):
            row = i - r + k
            if row < 0:
                row = -row - 1
            elif row >= h:
                row = 2 * h - 1 - row
            slots[k] = row % taps
        for m in range(4):
            rm = ring[m]
            if taps == 7:
                _fir7(
                    acc[m],
                    rm[slots[0]],
                    rm[slots[1]],
                    rm[slots[2]],
                    rm[slots[3]],
                    rm[slots[4]],
                    rm[slots[5]],
                    rm[slots[6]],
                    g,
                )
            elif taps == 11:
                _fir11(
                    acc[m],
                    rm[slots[0]],
                    rm[slots[1]],
                    rm[slots[2]],
                    rm[slots[3]],
                    rm[slots[4]],
                    rm[slots[5]],
                    rm[slots[6]],
                    rm[slots[7]],
                    rm[slots[8]],
                    rm[slots[9]],
                    rm[slots[10]],
                    g,
                )
            else:
                _fir_pairs(acc[m], rm.ravel(), slots, length, length, g, True)
        mx_row = acc[0]
        my_row = acc[1]
        sq_row = acc[2]
        xy_row = acc[3]
        for j in range(length):
            mx = mx_row[j]
            my = my_row[j]
            mux = mx + offset
            muy = my + offset
            # B1 = A1 + (mu_x - mu_y)^2 and B2 = A2 + cov (E[(x-y)^2] - (m_x - m_y)^2): the
            # same values, but B == A to the bit when x == y, so identical images give 1.0.
            d = mx - my
            a1 = two * mux * muy + c1
            b1 = a1 + d * d
            a2 = two * cov_norm * (xy_row[j] - mx * my) + c2
            b2 = a2 + cov_norm * (sq_row[j] - d * d)
            row_map[j] = (a1 * a2) / (b1 * b2)
        if want_map:
            dst = out[i]
            for j in range(length):
                dst[j] = row_map[j]
        if crop <= i < h - crop:
            inner = row_map[crop * c : (w - crop) * c]
            s = 0.0
            for j in range(inner.shape[0]):
                s += inner[j]
            sums[0] += s
        if n_masks:
            # Channels summed per pixel (stride 3 unrolled for RGB, which LLVM vectorises),
            # then one masked dot product per region.
            if c == 3:
                for px in range(w):
                    pixel_sum[px] = row_map[3 * px] + row_map[3 * px + 1] + row_map[3 * px + 2]
            else:
                for px in range(w):
                    t = zero
                    for ch in range(c):
                        t += row_map[px * c + ch]
                    pixel_sum[px] = t
            for n in range(n_masks):
                sel = masks[n, i]
                s = 0.0
                for px in range(w):
                    s += pixel_sum[px] * sel[px]
                sums[1 + n] += s


def _fir11(dst, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, g):
    """``dst = sum_k g[k] a_k`` for symmetric 11 taps, pairs added before the multiply."""
    g0, g1, g2, g3, g4, g5 = g[0], g[1], g[2], g[3], g[4], g[5]
    for j in range(dst.shape[0]):
        dst[j] = (
            g5 * a5[j]
            + g0 * (a0[j] + a10[j])
            + g1 * (a1[j] + a9[j])
            + g2 * (a2[j] + a8[j])
            + g3 * (a3[j] + a7[j])
            + g4 * (a4[j] + a6[j])
        )


def _fir7(dst, a0, a1, a2, a3, a4, a5, a6, g):
    """``dst = sum_k g[k] a_k`` for symmetric 7 taps (the uniform 7x7 window)."""
    g0, g1, g2, g3 = g[0], g[1], g[2], g[3]
    for j in range(dst.shape[0]):
        dst[j] = g3 * a3[j] + g0 * (a0[j] + a6[j]) + g1 * (a1[j] + a5[j]) + g2 * (a2[j] + a4[j])


def _fir_pairs(dst, src, slots, step, length, g, by_slot):
    """Any odd symmetric filter, one pass per tap pair: tap ``k`` reads ``src`` from
    ``slots[k] * step`` (vertical: ring rows) or ``k * step`` (horizontal: ``slots[k] == k``)."""
    taps = g.shape[0]
    r = taps // 2
    centre = src[slots[r] * step : slots[r] * step + length]
    gc = g[r]
    for j in range(length):
        dst[j] = gc * centre[j]
    for k in range(r):
        left = src[slots[k] * step : slots[k] * step + length]
        right = src[slots[taps - 1 - k] * step : slots[taps - 1 - k] * step + length]
        gk = g[k]
        for j in range(length):
            dst[j] += gk * (left[j] + right[j])
