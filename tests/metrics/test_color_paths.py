"""The fast float32 DeltaE76 paths (one conversion per colour run, histogram counts) give the bits
of PaintBench's per-pixel float32 code."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.metrics import color
from medibench.metrics.color import delta_e76, rgb_to_lab
from medibench.metrics.paint_iou import _correct_counts, paint_scores

M = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ],
    dtype=np.float32,
)


def _paintbench_lab(img):
    """eval.py's ``_rgb_to_lab``, per pixel, written out."""
    rgb = img.astype(np.float32) / 255.0
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = lin @ M.T
    xyz /= np.array([0.95047, 1.0, 1.08883], dtype=np.float32)
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), (29 / 6) ** 2 / 3 * xyz + 4 / 29)
    lab = [
        116.0 * f[..., 1] - 16.0,
        500.0 * (f[..., 0] - f[..., 1]),
        200.0 * (f[..., 1] - f[..., 2]),
    ]
    return np.stack(lab, axis=-1).astype(np.float32)


def _images(seed):
    rng = np.random.default_rng(seed)
    for h, w in ((2, 3), (64, 80), (300, 257)):
        flat = np.empty((h, w, 3), np.uint8)
        flat[:] = rng.integers(0, 256, 3)
        flat[h // 4 : h // 2, w // 5 : w // 2] = rng.integers(0, 256, 3)
        noisy = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        striped = flat.copy()
        striped[::5] = rng.integers(0, 256, striped[::5].shape)
        one = np.full((h, w, 3), 7, np.uint8)  # a single colour: one distinct row
        yield from (flat, noisy, striped, one)


@pytest.mark.parametrize("seed", [0, 1])
def test_lab32_bits_match_paintbench_on_every_path(seed):
    runs = direct = 0
    for img in _images(seed):
        ours = rgb_to_lab(img, dtype=np.float32)
        assert ours.dtype == np.float32
        np.testing.assert_array_equal(ours.view(np.int32), _paintbench_lab(img).view(np.int32))
        codes = color._colour_codes(img.reshape(-1, 3))
        uses_runs = (
            codes.size >= color._RUNS_MIN_PIXELS
            and (np.count_nonzero(codes[1:] != codes[:-1]) + 1) * color._RUNS_RATIO <= codes.size
        )
        runs += uses_runs
        direct += not uses_runs
    assert runs and direct  # both paths were taken


def test_delta_e76_float32_sums_channels_like_numpy():
    imgs = list(_images(2))
    for a, b in zip(imgs[::2], imgs[1::2], strict=True):
        la, lb = _paintbench_lab(a), _paintbench_lab(b)
        ref = np.sqrt(((la - lb) ** 2).sum(axis=-1))
        np.testing.assert_array_equal(delta_e76(a, b, dtype=np.float32), ref)


def test_histogram_counts_equal_sorted_counts():
    rng = np.random.default_rng(5)
    de = np.concatenate(
        [rng.uniform(0, 14, 5000), np.arange(12.0), np.nextafter(np.arange(1.0, 12.0), 0)]
    ).astype(np.float32)
    edit = rng.random(de.size) < 0.3
    for ts in (np.arange(11.0), np.array([3.0, 0.0, 10.0, 10.0]), np.array([0.5, 2.25])):
        got = _correct_counts(de, edit, ts)
        want = (
            np.array([np.count_nonzero(de[edit] <= t) for t in ts]),
            np.array([np.count_nonzero(de[~edit] <= t) for t in ts]),
            int(edit.sum()),
            int((~edit).sum()),
        )
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_paint_scores_against_per_threshold_loop():
    rng = np.random.default_rng(9)
    inp = np.zeros((40, 50, 3), np.uint8)
    inp[:] = (168, 206, 225)
    ans = inp.copy()
    ans[5:20, 10:30] = (52, 219, 239)
    out = ans.copy()
    out[::3] = np.clip(out[::3] + rng.integers(-6, 7, out[::3].shape), 0, 255).astype(np.uint8)
    s = paint_scores(out, ans, inp, range(11), dtype=np.float32)
    de = np.sqrt(((_paintbench_lab(out) - _paintbench_lab(ans)) ** 2).sum(axis=-1))
    edit = np.any(inp != ans, axis=-1)
    for t, iou in zip(range(11), s.iou, strict=True):
        ok = de <= t
        denom = edit.sum() + (~edit & ~ok).sum()
        assert iou == (edit & ok).sum() / denom
