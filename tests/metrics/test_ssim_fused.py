"""The fused numba SSIM stencil against the OpenCV path and scikit-image, and its backend switch."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from medibench.metrics import _ssim_fused, masked_ssim, ssim, ssim_by_region, ssim_map

pytest.importorskip("numba")


@pytest.fixture
def pair():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (37, 45, 3), dtype=np.uint8)
    b = np.clip(a + rng.normal(0, 25, a.shape), 0, 255).astype(np.uint8)
    b[10:20, 5:30] = 255 - b[10:20, 5:30]
    roi = np.zeros(a.shape[:2], bool)
    roi[8:22, 4:33] = True
    return a, b, roi


def _both(monkeypatch, fn):
    """``fn()`` through the numba kernel and through OpenCV."""
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    fused = fn()
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "opencv")
    return fused, fn()


OPTIONS = [
    dict(window=w, win_size=s, use_sample_covariance=cov, sigma=sigma)
    for (w, s, cov), sigma in itertools.product(
        [
            ("gaussian", None, False),
            ("gaussian", 7, True),
            ("uniform", None, True),
            ("uniform", 3, False),
            ("uniform", 11, False),
        ],
        [1.5],
    )
] + [dict(window="gaussian", sigma=2.0), dict(window="gaussian", sigma=0.8)]  # 15 and 7 taps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opts", OPTIONS, ids=str)
@pytest.mark.parametrize("kind", ["rgb_u8", "gray_u8", "rgb_f32", "rgb_f64", "chw_u8"])
def test_fused_equals_opencv_and_skimage(monkeypatch, pair, opts, kind, dtype):
    a, b, roi = pair
    axis = -1
    if kind == "gray_u8":
        a, b, axis = a[..., 0], b[..., 0], None
    elif kind in ("rgb_f32", "rgb_f64"):
        dtype = np.float32 if kind == "rgb_f32" else np.float64
        a, b = a.astype(dtype) / 255, b.astype(dtype) / 255
    elif kind == "chw_u8":
        a, b, axis = np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0), 0
    rng = 1.0 if kind in ("rgb_f32", "rgb_f64") else 255
    kw = dict(data_range=rng, channel_axis=axis, dtype=dtype, **opts)
    fused, cv = _both(monkeypatch, lambda: ssim(a, b, **kw))
    ref = structural_similarity(
        a.astype(np.float64),
        b.astype(np.float64),
        data_range=rng,
        channel_axis=axis,
        gaussian_weights=opts["window"] == "gaussian",
        win_size=opts.get("win_size"),
        sigma=opts["sigma"],
        use_sample_covariance=opts.get("use_sample_covariance", False),
    )
    tol = 1e-5 if dtype is np.float32 else 1e-12
    assert abs(fused - ref) < tol and abs(fused - cv) < tol
    map_f, map_cv = _both(monkeypatch, lambda: ssim_map(a, b, **kw))
    assert map_f.dtype == dtype and map_f.shape == map_cv.shape
    np.testing.assert_allclose(map_f, map_cv, atol=2e-5 if dtype is np.float32 else 1e-12)
    by_f, by_cv = _both(monkeypatch, lambda: ssim_by_region(a, b, roi, dilate=2, **kw))
    assert by_f.keys() == by_cv.keys()
    for key in by_f:
        assert by_f[key] == pytest.approx(by_cv[key], abs=1e-5)
    in_f, in_cv = _both(
        monkeypatch, lambda: masked_ssim(a, b, roi, region="inside", dilate=2, **kw)
    )
    assert in_f == pytest.approx(in_cv, abs=1e-5) and in_f == pytest.approx(
        by_f["inside"], abs=1e-6
    )


def test_fused_map_matches_skimage_map(monkeypatch, pair):
    a, b, _ = pair
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    ours = ssim_map(a, b, data_range=255, dtype=np.float32)
    ref = structural_similarity(
        a,
        b,
        data_range=255,
        channel_axis=-1,
        gaussian_weights=True,
        use_sample_covariance=False,
        full=True,
    )[1]
    np.testing.assert_allclose(ours, ref, atol=2e-5)


def test_small_images_use_opencv(monkeypatch):
    # 9x9 with the 11-tap Gaussian (win_size 3): the kernel is wider than the image.
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (9, 9), dtype=np.uint8)
    b = rng.integers(0, 256, (9, 9), dtype=np.uint8)
    kw = dict(data_range=255, channel_axis=None, win_size=3, dtype=np.float32)
    fused, cv = _both(monkeypatch, lambda: ssim(a, b, **kw))
    assert fused == cv


def test_backend_switch_errors(monkeypatch, pair):
    a, b, _ = pair
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "cuda")
    with pytest.raises(ValueError, match="MEDIBENCH_SSIM_BACKEND must be one of"):
        ssim(a, b, data_range=255, dtype=np.float32)
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    monkeypatch.setattr(_ssim_fused, "_NUMBA_AVAILABLE", False)
    with pytest.raises(ImportError, match=r"medibench\[fast\]"):
        ssim(a, b, data_range=255, dtype=np.float32)
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "auto")
    assert not _ssim_fused.fused_backend()
    assert ssim(a, b, data_range=255, dtype=np.float32) == pytest.approx(
        ssim(a, b, data_range=255), abs=1e-5
    )
