"""The fused SSIM stencil's source, compiled by numba in :mod:`medibench.metrics._ssim_fused`.

The image is cut into strips of ``block`` columns (channel-interleaved elements). Each strip is
walked top to bottom: every input row's four moments of the offset-centred data (``x'``, ``y'``,
``(x' - y')^2``, ``x' y'``) are filtered horizontally into a ring of ``taps + 1`` rows, and two
output rows at a time are filtered vertically from the ring (the two share ``taps + 1`` row
loads), turned into SSIM and summed in registers: the cropped sum and the region sums are
reductions, nothing is stored. A strip's ring stays in the first-level caches whatever the image
width. Symmetric taps are paired; filters of up to 7 or 11 taps run zero-padded to that, unrolled.
The map (``want_map``), longer filters and more than two regions take a slower staged path
(vertical filter into rows, SSIM into a row, then copied and summed).

Loops index from 0 over contiguous rows or slices: numba checks a runtime offset inside an
index for wraparound, which turns vector loads into gathers. Helpers used inside the vector
loops are inlined by numba (``inline="always"``) so LLVM sees one loop body.
"""

# ruff: noqa: N803
from __future__ import annotations

import math

import numpy as np

# The ring's row stride in elements: the widest strip (``block`` <= ROW). A constant, so the
# vertical loops address ring row ``slot`` of moment ``m`` as one hoisted offset per slot plus a
# constant displacement per moment: 12 pointers for 11 taps, where runtime strides took 48 and
# spilled them to the stack (5-6% of the kernel at 256 and 512 px).
ROW = 384


def ssim_rows(x, y, c, g, consts, crop, masks, out, want_map, want_mean, sums, block):
    """SSIM sums (and optionally the map) of ``(H, W*C)`` rows; see :func:`fused_ssim`."""
    taps = g.shape[0]
    n_masks = masks.shape[0]
    fused = (taps == 7 or taps == 11) and not want_map and n_masks <= 2
    # The half taps (centre last) as a tuple: its length is a compile-time constant, so the
    # tap loops unroll (7 and 11 taps; longer filters take the staged path, which uses ``g``).
    if taps == 7:
        half7 = (g[0], g[1], g[2], g[3])
        _rows(x, y, c, g, half7, consts, crop, masks, out, want_map, want_mean, sums, block, fused)
    else:
        half11 = (g[0], g[1], g[2], g[3], g[4], g[5])
        _rows(x, y, c, g, half11, consts, crop, masks, out, want_map, want_mean, sums, block, fused)


def _rows(x, y, c, g, gt, consts, crop, masks, out, want_map, want_mean, sums, block, fused):
    """:func:`ssim_rows` with the half taps ``gt``: the offset, then the strips."""
    h, length = x.shape
    w = length // c
    taps = g.shape[0]
    rc = (taps // 2) * c
    ft = g.dtype
    zero = consts[5]
    n_slots = taps + 1
    if block > ROW:
        raise ValueError("the strip is wider than the ring's rows (ROW)")
    flat = _line_aligned(4 * n_slots * ROW, ft)  # slot k of moment m: flat[(m n_slots + k) ROW:]
    ring = flat.reshape((4, n_slots, ROW))
    pad = np.empty((4, block + 2 * rc), ft)
    weights = np.empty((2, 2, block), ft)
    acc = np.empty((4, block), ft)
    vals = np.empty(block, ft)
    pixel_sum = np.empty(block // c, ft)
    t = np.empty(n_slots, np.int64)
    tap_index = np.arange(taps)
    every = want_map or masks.shape[0] > 0
    # The centring offset: the mean of every 8th row of both images. Any value is exact in
    # theory; one near the mean removes the float32 cancellation in E[x^2] - E[x]^2.
    total = 0.0
    for row in range(0, h, 8):
        total += _sum(x[row], zero) + _sum(y[row], zero)
    mantissa, exponent = math.frexp(total / (2 * ((h + 7) // 8) * length))
    # 8 significant bits: uint8 data minus the offset, and their products, are then exact.
    consts[0] = math.ldexp(round(mantissa * 256), exponent - 8)
    # Row pairs start at even rows in every mode, and the cropped mean is summed by the same loop
    # over the same columns: the plain mean and ssim_by_region's "full" get the same bits.
    first, last = (0, h) if every else (crop - crop % 2, h - crop)
    flags = np.empty((2, 2), np.int64)
    state = _region_states(masks, c, block)
    buffers = (flat, ring, pad, weights, flags, state, acc, vals, pixel_sum, t, tap_index)
    for j0 in range(0, length, block):
        bw = min(block, length - j0)
        lo = min(max(crop * c - j0, 0), bw)  # the cropped columns of the strip: lo .. hi
        hi = max(min((w - crop) * c - j0, bw), lo)
        if every or lo < hi:
            span = (j0, bw, lo, hi, first, last)
            _strip(x, y, c, g, gt, consts, crop, masks, out, want_map, want_mean, sums, span,
                   fused, buffers)  # fmt: skip


def _strip(
    x, y, c, g, gt, consts, crop, masks, out, want_map, want_mean, sums, span, fused, buffers
):
    """Rows ``first .. last`` of the strip of columns ``j0 .. j0 + bw`` (``span``; cropped columns
    ``lo .. hi``), see :func:`ssim_rows`."""
    j0, bw, lo, hi, first, last = span
    flat, ring, pad, weights, flags, state, acc, vals, pixel_sum, t, tap_index = buffers
    h = x.shape[0]
    taps = g.shape[0]
    r = taps // 2
    n_slots = taps + 1
    block = acc.shape[1]
    zero = consts[5]
    n_masks = masks.shape[0]
    done = max(0, first - r)  # next input row to filter horizontally
    i = first
    while i < last:
        pair = 1 if i + 1 < last else 0
        while done <= min(h - 1, i + r + pair):
            _horizontal(x[done], y[done], j0, bw, c, g, gt, consts, pad, ring, done % n_slots,
                        tap_index)  # fmt: skip
            done += 1
        # Ring slots of input rows i - r .. i + r + 1, reflected at the borders.
        for k in range(n_slots):
            row = i - r + k
            if row < 0:
                row = -row - 1
            elif row >= h:
                row = 2 * h - 1 - row
            t[k] = row % n_slots
        if not pair:
            t[taps] = t[taps - 1]  # a valid row for the unused second output
        mean_rows = (
            want_mean and crop <= i < h - crop,
            want_mean and pair == 1 and crop <= i + 1 < h - crop,
        )
        if fused:
            # Where every region row of the pair is all in or all out of the strip (most rows of
            # a compact ROI), the regions take whole-row sums of the unweighted loop.
            uniform = n_masks == 0 or _uniform(flags, state, n_masks, i, pair, j0 // block)
            s0 = s1 = zero
            if want_mean:
                s0, s1 = _sum_pair(flat, t, gt, consts, lo, hi)
            if not uniform:
                _weights(weights, masks, i, pair, j0, bw, c, zero)
                a, b = _weighted_pair(flat, t, gt, consts, weights, bw)
                sums[1] += a
                if n_masks > 1:
                    sums[2] += b
            elif n_masks:
                # Whole-row sums: one full-width loop (no short border loops), the same call
                # whether or not the cropped mean is wanted too.
                if want_mean and lo == 0 and hi == bw:
                    row0, row1 = s0, s1
                else:
                    row0, row1 = _sum_pair(flat, t, gt, consts, 0, bw)
                for n in range(n_masks):
                    sums[1 + n] += (row0 if flags[n, 0] else zero) + (row1 if flags[n, 1] else zero)
        else:
            s0 = s1 = zero
            for q in range(1 + pair):
                for m in range(4):
                    _fir_pairs(acc[m], ring[m].ravel(), t[q:], ROW, bw, g, True)
                _combine(acc, consts, vals, bw)
                if want_map:
                    dst = out[i + q, j0 : j0 + bw]
                    for j in range(bw):
                        dst[j] = vals[j]
                if mean_rows[q]:
                    sums[0] += _sum(vals[lo:hi], zero)
                if n_masks:
                    _pixel_sums(vals, pixel_sum, bw // c, c)
                    for n in range(n_masks):
                        sel = masks[n, i + q, j0 // c :]
                        sums[1 + n] += _dot(pixel_sum, sel, bw // c, zero)
        if mean_rows[0]:
            sums[0] += s0
        if mean_rows[1]:
            sums[0] += s1
        i += 1 + pair


def _horizontal(xr, yr, j0, bw, c, g, gt, consts, pad, ring, slot, tap_index):
    """Moments of elements ``j0 - rc .. j0 + bw + rc`` of one row (reflected at the row's ends)
    into ``pad``, filtered along x into ring slot ``slot``."""
    length = xr.shape[0]
    w = length // c
    taps = g.shape[0]
    rc = (taps // 2) * c
    offset, zero = consts[0], consts[5]
    e0 = j0 - rc
    e1 = j0 + bw + rc
    v0 = max(e0, 0)
    n = min(e1, length) - v0
    xs = xr[v0 : v0 + n]
    ys = yr[v0 : v0 + n]
    b = v0 - e0
    p0 = pad[0, b : b + n]
    p1 = pad[1, b : b + n]
    p2 = pad[2, b : b + n]
    p3 = pad[3, b : b + n]
    for j in range(n):
        xv = (zero + xs[j]) - offset
        yv = (zero + ys[j]) - offset
        p0[j] = xv
        p1[j] = yv
        p2[j] = (xv - yv) * (xv - yv)  # E[(x-y)^2]: exactly 0 for identical images
        p3[j] = xv * yv
    # Reflection: element e of pixel p < 0 is pixel -p - 1's, of pixel p >= w pixel 2w - 1 - p's.
    for e in range(e0, 0):
        p = e // c
        src = (-p - 1) * c + (e - p * c)
        for m in range(4):
            pad[m, e - e0] = pad[m, src - e0]
    for e in range(length, e1):
        p = e // c
        src = (2 * w - 1 - p) * c + (e - p * c)
        for m in range(4):
            pad[m, e - e0] = pad[m, src - e0]
    for m in range(4):
        if taps == 2 * len(gt) - 1:
            _fir(ring[m, slot], pad[m], c, bw, gt)
        else:
            _fir_pairs(ring[m, slot], pad[m], tap_index, c, bw, g, False)


def _line_aligned(n, ft):
    """``n`` elements of ``ft`` starting on a 64-byte cache line. numba aligns arrays to 32 bytes:
    a ring at 32 mod 64 makes every 512-bit load of the vertical loops straddle two lines (3%
    slower at 256 px where the allocation fell so, and the process's luck decided which)."""
    buf = np.empty(n + 16, ft)
    skip = ((-buf.ctypes.data) % 64) // buf.itemsize
    return buf[skip : skip + n]


def _fir(dst, src, step, n, gt):
    """``dst[j] = sum_k g[k] src[j + k step]`` for the symmetric filter of half taps ``gt``
    (centre last), pairs added before the multiply. Unsigned offsets: no wraparound checks."""
    r = len(gt) - 1
    for j in range(n):
        ju = np.uint64(j)
        s = gt[r] * src[ju + np.uint64(r * step)]
        for p in range(r):
            s += gt[p] * (src[ju + np.uint64(p * step)] + src[ju + np.uint64((2 * r - p) * step)])
        dst[j] = s


def _fir_pairs(dst, src, slots, step, length, g, by_slot):
    """Any odd symmetric filter, one pass per tap pair: tap ``k`` reads ``src`` from
    ``slots[k] * step`` (vertical: ring rows; horizontal: ``slots[k] == k``)."""
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


def _ssim_value(mx, my, sq, xy, consts):
    """SSIM from the filtered centred moments. B1 = A1 + (mu_x - mu_y)^2 and
    B2 = A2 + cov (E[(x-y)^2] - (m_x - m_y)^2): B == A to the bit when x == y (exactly 1.0)."""
    offset, c1, c2, cov_norm, two = consts[0], consts[1], consts[2], consts[3], consts[4]
    d = mx - my
    a1 = two * (mx + offset) * (my + offset) + c1
    b1 = a1 + d * d
    a2 = two * cov_norm * (xy - mx * my) + c2
    b2 = a2 + cov_norm * (sq - d * d)
    return (a1 * a2) / (b1 * b2)


def _vertical(flat, m, j, t, k, gt):
    """Moment ``m`` at (unsigned) column ``j`` filtered along y over ring slots ``t[k] ..
    t[k + 2r]`` of the flat ring (``2r + 2`` slots of ``ROW`` elements per moment)."""
    r = len(gt) - 1
    row = np.uint64(ROW)
    at = np.uint64(m * (2 * r + 2) * ROW) + j
    s = gt[r] * flat[np.uint64(t[k + r]) * row + at]
    for p in range(r):
        left = flat[np.uint64(t[k + p]) * row + at]
        s += gt[p] * (left + flat[np.uint64(t[k + 2 * r - p]) * row + at])
    return s


def _value_pair(flat, j, t, gt, consts):
    """SSIM at column ``j`` of the two output rows whose windows start at ring slots ``t[0]`` and
    ``t[1]``, filtered moment by moment: each moment's ``taps + 1`` ring loads serve both rows and
    are dead before the next moment's. (Row by row, LLVM merged the shared loads and kept all
    ``4 (taps + 1)`` of them live: registers spilled to the stack, and the kernel ran 4-20%
    slower, by process, at 256 and 512 px.)"""
    mx0 = _vertical(flat, 0, j, t, 0, gt)
    mx1 = _vertical(flat, 0, j, t, 1, gt)
    my0 = _vertical(flat, 1, j, t, 0, gt)
    my1 = _vertical(flat, 1, j, t, 1, gt)
    sq0 = _vertical(flat, 2, j, t, 0, gt)
    sq1 = _vertical(flat, 2, j, t, 1, gt)
    xy0 = _vertical(flat, 3, j, t, 0, gt)
    xy1 = _vertical(flat, 3, j, t, 1, gt)
    return _ssim_value(mx0, my0, sq0, xy0, consts), _ssim_value(mx1, my1, sq1, xy1, consts)


def _sum_pair(flat, t, gt, consts, lo, hi):
    """Sums over columns ``lo .. hi`` of the SSIM of two output rows (windows from ring slots
    ``t[0]`` and ``t[1]``). The column is unsigned: a signed index from a runtime start is
    checked for wraparound, which turns the vector loads into gathers."""
    s0 = s1 = consts[5]
    for j in range(np.uint64(lo), np.uint64(hi)):
        v0, v1 = _value_pair(flat, j, t, gt, consts)
        s0 += v0
        s1 += v1
    return s0, s1


def _weighted_pair(flat, t, gt, consts, w, n):
    """Two regions' sums over two output rows (as :func:`_sum_pair`, columns ``0 .. n``):
    ``v0 w[r, 0] + v1 w[r, 1]``, ``w[r, q]`` region ``r``'s per-element weights for row ``q``."""
    a = b = consts[5]
    for j in range(np.uint64(n)):
        v0, v1 = _value_pair(flat, j, t, gt, consts)
        a += v0 * w[0, 0, j] + v1 * w[0, 1, j]
        b += v0 * w[1, 0, j] + v1 * w[1, 1, j]
    return a, b


def _region_states(masks, c, block):
    """``state[r, row, strip]``: 0 when region ``r``'s pixels of the row in the strip of
    ``block`` elements are all out, 1 when all in, 2 when mixed."""
    n, h, w = masks.shape
    npx = block // c
    state = np.empty((n, h, (w + npx - 1) // npx), np.int8)
    for r in range(n):
        for row in range(h):
            sel = masks[r, row]
            for k in range(state.shape[2]):
                part = sel[k * npx : (k + 1) * npx]
                count = 0
                for px in range(part.shape[0]):
                    count += part[px]
                state[r, row, k] = 0 if count == 0 else (1 if count == part.shape[0] else 2)
    return state


def _uniform(flags, state, n_masks, i, pair, strip):
    """Whether each region's rows ``i``, ``i + 1`` are all in or all out of the strip;
    ``flags[r, q]`` says which (1: all in), or 2 for a mixed row."""
    uniform = True
    for n in range(2):
        for q in range(2):
            flags[n, q] = state[n, i + q, strip] if n < n_masks and q <= pair else 0
            uniform = uniform and flags[n, q] < 2
    return uniform


def _weights(weights, masks, i, pair, j0, bw, c, zero):
    """Per-element weights of rows ``i``, ``i + 1`` for :func:`_weighted_pair`: each region's
    pixels repeated over the channels (zero for a missing row or region). ``zero`` is 0 in the
    kernel's float type (``weights`` is uninitialised: a zero made from it could be NaN)."""
    npx = bw // c
    for n in range(2):
        for q in range(2):
            wq = weights[n, q]
            if n >= masks.shape[0] or q > pair:
                wq[:bw] = 0
                continue
            sel = masks[n, i + q, j0 // c :]
            if c == 3:
                for px in range(npx):
                    f = zero + sel[px]
                    wq[3 * px] = f
                    wq[3 * px + 1] = f
                    wq[3 * px + 2] = f
            else:
                for px in range(npx):
                    for ch in range(c):
                        wq[px * c + ch] = zero + sel[px]


def _combine(acc, consts, v, n):
    """``v[j]`` = SSIM from the vertically filtered moment rows ``acc``."""
    for j in range(n):
        v[j] = _ssim_value(acc[0, j], acc[1, j], acc[2, j], acc[3, j], consts)


def _pixel_sums(v, out, npx, c):
    """``out[p]`` = sum of ``v`` over pixel ``p``'s channels (stride 3 unrolled for RGB)."""
    if c == 3:
        for px in range(npx):
            out[px] = v[3 * px] + v[3 * px + 1] + v[3 * px + 2]
    else:
        for px in range(npx):
            s = v[px * c]
            for ch in range(1, c):
                s += v[px * c + ch]
            out[px] = s


def _sum(v, zero):
    s = zero
    for j in range(v.shape[0]):
        s += v[j]
    return s


def _dot(a, sel, n, zero):
    s = zero
    for j in range(n):
        s += a[j] * sel[j]
    return s


# Helpers inside vector loops, inlined at numba's level; the rest are compiled as functions.
INLINED = ("_ssim_value", "_vertical", "_value_pair", "_uniform")
COMPILED = ("_line_aligned", "_fir", "_fir_pairs", "_horizontal", "_region_states", "_weights",
            "_combine", "_pixel_sums", "_sum", "_dot", "_sum_pair", "_weighted_pair", "_strip",
            "_rows")  # fmt: skip
