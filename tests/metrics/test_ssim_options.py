"""SSIMOptions: the declared SSIM settings give the same values as the keyword arguments."""

import dataclasses

import numpy as np
import pytest

from medibench.metrics import SSIMOptions, masked_ssim, ssim, ssim_by_region, ssim_map
from medibench.protocols import MEDIBENCH_SSIM, SKIMAGE_DEFAULT_SSIM

GRID = [
    dict(data_range=255),
    dict(data_range=255, window="uniform", win_size=7, use_sample_covariance=True),
    dict(data_range=255, window="gaussian", sigma=0.8, k1=0.02, k2=0.05, dtype=np.float32),
    dict(data_range=255, window="gaussian", win_size=7),
    dict(data_range=255, window="uniform", win_size=5, channel_axis=0),
]


@pytest.fixture
def pair():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (3, 40, 40), dtype=np.uint8).transpose(1, 2, 0).copy()
    b = np.clip(a.astype(int) + rng.integers(-40, 40, a.shape), 0, 255).astype(np.uint8)
    roi = np.zeros((40, 40), bool)
    roi[8:24, 10:30] = True
    return a, b, roi


@pytest.mark.parametrize("kwargs", GRID)
def test_options_and_keywords_give_identical_values(pair, kwargs):
    a, b, roi = pair
    if kwargs.get("channel_axis") == 0:
        a, b = np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0)
    opts = SSIMOptions(**kwargs)
    assert ssim(a, b, options=opts) == ssim(a, b, **kwargs)
    np.testing.assert_array_equal(ssim_map(a, b, options=opts), ssim_map(a, b, **kwargs))
    for region in ("outside", "inside"):
        assert masked_ssim(a, b, roi, region=region, dilate=1, options=opts) == masked_ssim(
            a, b, roi, region=region, dilate=1, **kwargs
        )
    assert ssim_by_region(a, b, roi, options=opts) == ssim_by_region(a, b, roi, **kwargs)


def test_keywords_override_the_options(pair):
    a, b, _ = pair
    gray_a, gray_b = a[:, :, 0], b[:, :, 0]
    got = ssim(gray_a, gray_b, options=SKIMAGE_DEFAULT_SSIM, channel_axis=None)
    assert got == ssim(gray_a, gray_b, options=SKIMAGE_DEFAULT_SSIM.replace(channel_axis=None))
    assert ssim(a, b, options=MEDIBENCH_SSIM, dtype=np.float64) == ssim(a, b, data_range=255)


def test_the_protocol_settings_are_the_documented_ones():
    assert SKIMAGE_DEFAULT_SSIM.as_dict() == {
        "data_range": 255,
        "window": "uniform",
        "win_size": 7,
        "sigma": 1.5,
        "k1": 0.01,
        "k2": 0.03,
        "use_sample_covariance": True,
        "channel_axis": -1,
        "dtype": "float64",
    }
    assert MEDIBENCH_SSIM.describe() == (
        "data_range 255, Gaussian window (sigma 1.5, 11x11), K1 0.01, K2 0.03, "
        "population covariance, channel_axis -1, float32"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        MEDIBENCH_SSIM.k1 = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"data_range": None}, "data_range is required"),
        ({"data_range": 1.0, "window": "box"}, "window must be"),
        ({"data_range": 1.0, "win_size": 4}, "odd integer"),
        ({"data_range": 1.0, "dtype": np.float16}, "dtype must be"),
        ({"data_range": 1.0, "k2": -1}, "non-negative"),
    ],
)
def test_bad_options_fail_when_declared(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SSIMOptions(**kwargs)


def test_data_range_is_required_in_options_or_keywords():
    a = np.zeros((8, 8))
    with pytest.raises(TypeError, match="needs data_range"):
        ssim(a, a)
    with pytest.raises(TypeError):
        SSIMOptions()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ssim(a, a, options=SSIMOptions(data_range=1.0), data_rnage=2.0)  # type: ignore[call-arg]
