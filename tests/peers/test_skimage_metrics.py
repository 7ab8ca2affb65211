"""scikit-image's tests of SSIM (``metrics/tests/test_structural_similarity.py``), PSNR
(``metrics/tests/test_simple_metrics.py``) and Lab (``color/tests/test_colorconv.py``,
``test_rgb2lab_brucelindbloom``), their images, expected values and decimals, through
medibench's :func:`~medibench.metrics.ssim`, :func:`~medibench.metrics.psnr` and
:func:`~medibench.metrics.color.rgb_to_lab`. scikit-image's defaults are spelled out (medibench
takes no silent defaults: ``data_range``, the window and the covariance are explicit)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_almost_equal
from skimage import data

from medibench.metrics import psnr, ssim
from medibench.metrics.color import rgb_to_lab

# scikit-image's fixture: the camera and a noisy copy (legacy seeded generator)
np_random = np.random.RandomState(5)
CAM = data.camera()
CAM_NOISY = np.clip(CAM + 20.0 * np_random.randn(*CAM.shape), 0, 255).astype(CAM.dtype)
SKIMAGE_DEFAULTS = dict(data_range=255, window="uniform", win_size=7, use_sample_covariance=True)


def test_psnr_vs_ipol():
    assert_almost_equal(psnr(CAM, CAM_NOISY, data_range=255), 22.409353363576034, decimal=4)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_psnr_float(dtype):
    p_uint8 = psnr(CAM, CAM_NOISY, data_range=255)
    camf = (CAM / 255.0).astype(dtype)
    noisyf = (CAM_NOISY / 255.0).astype(dtype)
    decimal = 3 if dtype == np.float16 else 5
    assert_almost_equal(psnr(camf, noisyf, data_range=1), p_uint8, decimal=decimal)


def test_psnr_errors():
    with pytest.raises(ValueError):
        psnr(CAM, CAM[:-1, :], data_range=255)


def test_mssim_vs_legacy():
    # skimage's defaults: 7x7 uniform window, sample covariance, data range 255 for uint8
    got = ssim(CAM, CAM_NOISY, channel_axis=None, **SKIMAGE_DEFAULTS)
    assert_almost_equal(got, 0.3674518327910367)


def test_gaussian_ssim_vs_ipol():
    got = ssim(
        CAM, CAM_NOISY, data_range=255, window="gaussian", use_sample_covariance=False,
        channel_axis=None,
    )  # fmt: skip
    assert_almost_equal(got, 0.357959091663361, decimal=3)


def test_ssim_image_and_patch_range():
    rng = np.random.RandomState(1234)
    x = (rng.rand(100, 100) * 255).astype(np.uint8)
    y = (rng.rand(100, 100) * 255).astype(np.uint8)
    opts = dict(SKIMAGE_DEFAULTS, channel_axis=None)
    assert ssim(x, x, **dict(opts, win_size=3)) == 1.0
    assert ssim(x, y, **dict(opts, win_size=3)) < 0.3
    assert ssim(x, y, **dict(opts, window="gaussian", win_size=11)) < 0.3
    assert ssim(x, x, **opts) == 1.0
    n = 51
    x, y = x[:n, :n], y[:n, :n]
    assert ssim(x, y, **dict(opts, win_size=n)) < 0.1
    assert ssim(x, x, **dict(opts, win_size=n)) == 1.0


def test_multichannel_chelsea_is_the_mean_of_the_channels():
    xc = data.chelsea()
    yc = np.clip(xc + 15.0 * np.random.RandomState(0).randn(*xc.shape), 0, 255).astype(xc.dtype)
    whole = ssim(xc, yc, channel_axis=-1, **SKIMAGE_DEFAULTS)
    per = [ssim(yc[..., c], xc[..., c], channel_axis=None, **SKIMAGE_DEFAULTS) for c in range(3)]
    assert_almost_equal(whole, np.mean(per))
    assert ssim(xc, xc, channel_axis=-1, **SKIMAGE_DEFAULTS) == 1.0


@pytest.mark.parametrize(
    "kwargs",
    [{"k1": -0.1}, {"k2": -0.1}, {"sigma": -1.0}, {"win_size": 10}],
)
def test_invalid_input(kwargs):
    x = np.zeros((9, 9))
    with pytest.raises(ValueError):
        ssim(x, x, channel_axis=None, **dict(SKIMAGE_DEFAULTS, **kwargs))
    with pytest.raises(ValueError):
        ssim(x, np.zeros((8, 8)), channel_axis=None, **SKIMAGE_DEFAULTS)


def test_rgb2lab_brucelindbloom():
    # white, yellow, cyan, green, magenta, red, blue, black (skimage's colour bars)
    bars = (
        np.array(
            [[1, 1, 0, 0, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 1, 0, 1, 0]]
        ).T.astype(np.uint8)
        * 255
    )
    expected = np.array(
        [
            [100, 0, 0],
            [97.1393, -21.5537, 94.4780],
            [91.1132, -48.0875, -14.1312],
            [87.7347, -86.1827, 83.1793],
            [60.3242, 98.2343, -60.8249],
            [53.2408, 80.0925, 67.2032],
            [32.2970, 79.1875, -107.8602],
            [0, 0, 0],
        ]
    )
    np.testing.assert_array_almost_equal(rgb_to_lab(bars[None])[0], expected, decimal=2)
