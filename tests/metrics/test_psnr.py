"""PSNR and masked PSNR against scikit-image and hand-computed values."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio

from medibench.metrics import masked_psnr, psnr


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.float32, np.float64])
def test_matches_skimage(rng_images, dtype):
    a, b = (x.astype(dtype) for x in rng_images)
    expected = peak_signal_noise_ratio(a, b, data_range=255)
    assert psnr(a, b, data_range=255) == pytest.approx(expected, abs=1e-9)


def test_matches_skimage_on_strided_and_mixed_inputs(camera_pair):
    a, b = camera_pair
    expected = peak_signal_noise_ratio(a[::2, 1::3], b[::2, 1::3] / 1.0, data_range=255)
    assert psnr(a[::2, 1::3], b[::2, 1::3] / 1.0, data_range=255) == pytest.approx(expected)


def test_hand_computed():
    a = np.zeros((4, 4), np.uint8)
    b = a.copy()
    b[0, 0] = 16  # MSE = 256 / 16 = 16
    assert psnr(a, b, data_range=255) == pytest.approx(10 * math.log10(255**2 / 16))
    assert psnr(b, a, data_range=255) == psnr(a, b, data_range=255)  # no uint8 wrap-around


def test_identical_images_give_inf_without_warning(rng_images):
    a, _ = rng_images
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert psnr(a, a, data_range=255) == math.inf
        assert masked_psnr(a, a, np.zeros(a.shape[:2], bool), data_range=255) == math.inf


def test_masked_psnr_uses_region_pixels_of_all_channels():
    a = np.zeros((4, 4, 3), np.uint8)
    b = a.copy()
    b[0, 0] = (10, 20, 30)  # inside the ROI: ignored outside
    b[3, 3] = (3, 0, 0)  # outside: MSE = 9 / (15 * 3) = 0.2
    roi = np.zeros((4, 4), bool)
    roi[0, 0] = True
    assert masked_psnr(a, b, roi, data_range=255) == pytest.approx(10 * math.log10(255**2 / 0.2))
    inside = 10 * math.log10(255**2 / ((100 + 400 + 900) / 3))
    assert masked_psnr(a, b, roi, data_range=255, region="inside") == pytest.approx(inside)
    chw = masked_psnr(
        np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0), roi, data_range=255, channel_axis=0
    )
    assert chw == pytest.approx(10 * math.log10(255**2 / 0.2))


def test_masked_psnr_dilation():
    a = np.zeros((9, 9), np.float64)
    b = a.copy()
    b[4, 6] = 1.0  # 2 px right of the ROI pixel
    roi = np.zeros((9, 9), bool)
    roi[4, 4] = True
    assert masked_psnr(a, b, roi, data_range=1.0, dilate=1) < math.inf
    assert masked_psnr(a, b, roi, data_range=1.0, dilate=2) == math.inf


def test_errors():
    a = np.zeros((4, 4))
    with pytest.raises(ValueError, match=r"a.shape=\(4, 4\) and b.shape=\(4, 5\)"):
        psnr(a, np.zeros((4, 5)), data_range=1.0)
    with pytest.raises(ValueError, match="data_range is required"):
        psnr(a, a, data_range=None)  # type: ignore[arg-type]
    b = a.copy()
    b[1, 1] = np.nan
    with pytest.raises(ValueError, match="b contains 1 NaN"):
        psnr(a, b, data_range=1.0)
    with pytest.raises(ValueError, match="region 'outside' is empty"):
        masked_psnr(a, a, np.ones((4, 4), bool), data_range=1.0)
    with pytest.raises(ValueError, match="region 'inside' is empty"):
        masked_psnr(a, a, np.zeros((4, 4), bool), data_range=1.0, region="inside")
    with pytest.raises(ValueError, match="not binary"):
        masked_psnr(a, a, np.arange(16).reshape(4, 4), data_range=1.0)
    with pytest.raises(ValueError, match="channel_axis"):
        masked_psnr(
            np.zeros((4, 4, 3)), np.zeros((4, 4, 3)), a > 0, data_range=1.0, channel_axis=None
        )
