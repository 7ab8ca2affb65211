"""SSIM map and mean against scikit-image over the option grid, and every bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from medibench.metrics import ssim, ssim_map

GRID = list(
    itertools.product(
        ["gaussian", "uniform"],  # window
        [None, 3, 7, 11],  # win_size
        [True, False],  # use_sample_covariance
        [(0.01, 0.03), (0.05, 0.1)],  # k1, k2
    )
)


def _reference(a, b, *, window, win_size, cov, k, channel_axis, data_range, full=False):
    return structural_similarity(
        a,
        b,
        data_range=data_range,
        gaussian_weights=window == "gaussian",
        win_size=win_size,
        use_sample_covariance=cov,
        K1=k[0],
        K2=k[1],
        channel_axis=channel_axis,
        full=full,
    )


def _options(window, win_size, cov, k, channel_axis):
    return dict(
        window=window,
        win_size=win_size,
        use_sample_covariance=cov,
        k1=k[0],
        k2=k[1],
        channel_axis=channel_axis,
    )


@pytest.mark.parametrize("window,win_size,cov,k", GRID)
@pytest.mark.parametrize("kind", ["rgb_uint8", "gray_uint8", "rgb_float", "gray_float"])
def test_ssim_matches_skimage_on_grid(rng_images, kind, window, win_size, cov, k):
    a, b = rng_images
    channel_axis = -1 if kind.startswith("rgb") else None
    if channel_axis is None:
        a, b = a[..., 0], b[..., 0]
    data_range = 255.0
    if kind.endswith("float"):
        a, b, data_range = a / 255.0, b / 255.0, 1.0
    expected, expected_map = _reference(
        a,
        b,
        window=window,
        win_size=win_size,
        cov=cov,
        k=k,
        channel_axis=channel_axis,
        data_range=data_range,
        full=True,
    )
    opts = _options(window, win_size, cov, k, channel_axis)
    assert ssim(a, b, data_range=data_range, **opts) == pytest.approx(expected, abs=1e-6)
    got_map = ssim_map(a, b, data_range=data_range, **opts)
    assert got_map.shape == expected_map.shape
    np.testing.assert_allclose(got_map, expected_map, atol=1e-6)
    fast = ssim(a, b, data_range=data_range, dtype=np.float32, **opts)
    assert fast == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("window", ["gaussian", "uniform"])
@pytest.mark.parametrize("cov", [True, False])
def test_ssim_matches_skimage_on_real_images(camera_pair, ihc_pair, window, cov):
    for (a, b), axis in ((camera_pair, None), (ihc_pair, -1)):
        opts = _options(window, None, cov, (0.01, 0.03), axis)
        expected = _reference(
            a,
            b,
            window=window,
            win_size=None,
            cov=cov,
            k=(0.01, 0.03),
            channel_axis=axis,
            data_range=255,
        )
        assert ssim(a, b, data_range=255, **opts) == pytest.approx(expected, abs=1e-6)
        fast = ssim(a, b, data_range=255, dtype=np.float32, **opts)
        assert fast == pytest.approx(expected, abs=1e-5)
        # The same pair scaled to [0, 1] floats, explicit data_range 1.
        af, bf = a / 255.0, b / 255.0
        assert ssim(af, bf, data_range=1.0, **opts) == pytest.approx(expected, abs=1e-6)


def test_real_image_edit_is_scored_lower_than_identity(ihc_pair):
    a, b = ihc_pair
    assert ssim(a, a, data_range=255) == pytest.approx(1.0, abs=1e-12)
    assert 0.3 < ssim(a, b, data_range=255) < 0.99


def test_channel_first_layout(rng_images):
    a, b = rng_images
    a0, b0 = np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0)
    expected, expected_map = _reference(
        a0,
        b0,
        window="gaussian",
        win_size=None,
        cov=False,
        k=(0.01, 0.03),
        channel_axis=0,
        data_range=255,
        full=True,
    )
    got = ssim_map(a0, b0, data_range=255, channel_axis=0)
    assert got.shape == (3, 40, 48)
    np.testing.assert_allclose(got, expected_map, atol=1e-6)
    assert ssim(a0, b0, data_range=255, channel_axis=0) == pytest.approx(expected, abs=1e-6)


def test_map_is_per_channel_and_owned_by_caller(rng_images):
    a, b = rng_images
    m = ssim_map(a, b, data_range=255)
    assert m.shape == a.shape and m.dtype == np.float64
    kept = m.copy()
    ssim_map(b, a[::-1].copy(), data_range=255)  # reuses the internal workspace
    np.testing.assert_array_equal(m, kept)
    for c in range(3):
        np.testing.assert_allclose(m[..., c], ssim_map(a[..., c], b[..., c], data_range=255))
    assert ssim_map(a, b, data_range=255, dtype=np.float32).dtype == np.float32


def test_inputs_are_not_modified(rng_images):
    a, b = (x.astype(np.float32) for x in rng_images)
    a0, b0 = a.copy(), b.copy()
    ssim(a, b, data_range=255, dtype=np.float32)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


def test_gaussian_kernel_is_set_by_sigma(camera_pair):
    a, b = camera_pair
    for sigma in (0.8, 2.5):
        expected = structural_similarity(
            a, b, data_range=255, gaussian_weights=True, sigma=sigma, use_sample_covariance=False
        )
        got = ssim(a, b, data_range=255, sigma=sigma, channel_axis=None)
        assert got == pytest.approx(expected, abs=1e-6)


def test_data_range_is_required():
    a = np.zeros((8, 8))
    with pytest.raises(TypeError):
        ssim(a, a)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="data_range is required"):
        ssim(a, a, data_range=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        ssim(a, a, data_range=0)


@pytest.mark.parametrize(
    "a_shape,b_shape,kwargs,message",
    [
        ((8, 8), (8, 9), {}, r"a.shape=\(8, 8\) and b.shape=\(8, 9\)"),
        ((8, 8, 3), (8, 8, 3), {"channel_axis": None}, "volumes are not supported"),
        ((2, 8, 8, 3), (2, 8, 8, 3), {}, "2-D"),
        ((8, 8), (8, 8), {"win_size": 4}, "odd integer"),
        ((8, 8), (8, 8), {"win_size": 9}, "exceeds"),
        ((6, 6), (6, 6), {}, "exceeds"),
        ((8, 8), (8, 8), {"window": "box"}, "window must be"),
        ((8, 8), (8, 8), {"dtype": np.float16}, "dtype must be"),
        ((8, 8), (8, 8), {"sigma": 0}, "sigma must be positive"),
        # every option is checked whatever the window (issue 28; scikit-image refuses these too)
        ((8, 8), (8, 8), {"window": "uniform", "sigma": -1.0}, "sigma must be positive"),
        ((8, 8), (8, 8), {"window": "uniform", "sigma": float("nan")}, "sigma must be positive"),
        ((8, 8), (8, 8), {"window": "uniform", "k2": float("inf")}, "finite and non-negative"),
        ((8, 8), (8, 8), {"use_sample_covariance": "yes"}, "must be True or False"),
        ((8, 8), (8, 8), {"channel_axis": 1.5}, "integer or None"),
        ((8, 8), (8, 8), {"k1": -0.1}, "non-negative"),
        ((8, 8, 3), (8, 8, 3), {"channel_axis": 3}, "out of range"),
    ],
)
def test_bad_arguments(a_shape, b_shape, kwargs, message):
    with pytest.raises(ValueError, match=message):
        ssim(np.zeros(a_shape), np.zeros(b_shape), data_range=1.0, **kwargs)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_is_an_error(bad):
    a = np.zeros((8, 8))
    b = a.copy()
    b[3, 3] = bad
    with pytest.raises(ValueError, match="b contains NaN or infinite"):
        ssim(a, b, data_range=1.0)
    with pytest.raises(ValueError, match="real-valued"):
        ssim(a.astype(bool), a.astype(bool), data_range=1.0)
