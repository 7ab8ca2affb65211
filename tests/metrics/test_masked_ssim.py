"""masked_ssim: region means of the SSIM map, dilation, strict masks and empty regions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from medibench.metrics import masked_ssim, ssim, ssim_by_region, ssim_map


@pytest.fixture()
def roi() -> np.ndarray:
    m = np.zeros((128, 128), bool)
    m[40:80, 50:100] = True
    return m


def test_outside_and_inside_are_region_means_of_the_map(ihc_pair, roi):
    a, b = ihc_pair
    full = ssim_map(a, b, data_range=255)
    assert masked_ssim(a, b, roi, data_range=255) == pytest.approx(full[~roi].mean(), abs=1e-12)
    inside = masked_ssim(a, b, roi, data_range=255, region="inside")
    assert inside == pytest.approx(full[roi].mean(), abs=1e-12)
    # The edit (a blur) sits inside the ROI: the context scores higher than the edited region.
    assert inside < masked_ssim(a, b, roi, data_range=255)


def test_empty_roi_outside_is_the_uncropped_map_mean(camera_pair):
    a, b = camera_pair
    empty = np.zeros(a.shape, bool)
    expected = ssim_map(a, b, data_range=255, channel_axis=None).mean()
    got = masked_ssim(a, b, empty, data_range=255, channel_axis=None)
    assert got == pytest.approx(expected, abs=1e-12)


def test_options_reach_the_map(camera_pair):
    a, b = camera_pair
    roi = np.zeros(a.shape, bool)
    roi[:30] = True
    opts = dict(window="uniform", use_sample_covariance=True, channel_axis=None)
    expected = ssim_map(a, b, data_range=255, **opts)[~roi].mean()
    assert masked_ssim(a, b, roi, data_range=255, **opts) == pytest.approx(expected, abs=1e-12)
    fast = masked_ssim(a, b, roi, data_range=255, dtype=np.float32, **opts)
    assert fast == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("n", [1, 3, 7])
def test_dilation_is_a_euclidean_disk(ihc_pair, roi, n):
    a, b = ihc_pair
    grown = ndimage.distance_transform_edt(~roi) <= n
    full = ssim_map(a, b, data_range=255)
    got = masked_ssim(a, b, roi, data_range=255, dilate=n)
    assert got == pytest.approx(full[~grown].mean(), abs=1e-12)


def test_dilating_past_the_edit_halo_recovers_one():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (32, 32), dtype=np.uint8)
    b = a.copy()
    b[8:16, 8:16] = 0
    roi = np.zeros((32, 32), bool)
    roi[8:16, 8:16] = True
    assert masked_ssim(a, b, roi, data_range=255) < 0.99
    # Gaussian radius is 5 px; its corners reach 5 * sqrt(2) < 8 px.
    assert masked_ssim(a, b, roi, data_range=255, dilate=8) == pytest.approx(1.0, abs=1e-12)


def test_binary_masks_of_any_two_values_are_accepted(ihc_pair, roi):
    a, b = ihc_pair
    expected = masked_ssim(a, b, roi, data_range=255)
    assert masked_ssim(a, b, roi.astype(np.uint8) * 255, data_range=255) == expected
    assert masked_ssim(a, b, roi.astype(np.float32), data_range=255) == expected


def test_grayscale_mask_is_rejected(ihc_pair, roi):
    a, b = ihc_pair
    gray = roi.astype(np.uint8) * 200
    gray[0, 0] = 17
    with pytest.raises(ValueError, match="mask is not binary: it has 3 distinct values"):
        masked_ssim(a, b, gray, data_range=255)


def test_empty_regions_are_named(ihc_pair):
    a, b = ihc_pair
    with pytest.raises(ValueError, match="region 'inside' is empty.*ROI is empty"):
        masked_ssim(a, b, np.zeros((128, 128), bool), data_range=255, region="inside")
    with pytest.raises(ValueError, match="region 'outside' is empty.*whole image"):
        masked_ssim(a, b, np.ones((128, 128), bool), data_range=255)
    small = np.zeros((128, 128), bool)
    small[::2, ::2] = True  # every pixel is within sqrt(2) px of the ROI
    with pytest.raises(ValueError, match="after dilating the ROI by 2 px"):
        masked_ssim(a, b, small, data_range=255, dilate=2)


@pytest.mark.parametrize(
    "kwargs,mask_shape,message",
    [
        ({}, (128, 127), r"mask shape \(128, 127\) does not match .* \(128, 128\)"),
        ({"region": "border"}, (128, 128), "region must be"),
        ({"dilate": -1}, (128, 128), "dilate must be a non-negative integer"),
        ({"dilate": 1.5}, (128, 128), "dilate must be a non-negative integer"),
        ({"data_range": None}, (128, 128), "data_range is required"),
    ],
)
def test_bad_arguments(ihc_pair, kwargs, mask_shape, message):
    a, b = ihc_pair
    kwargs = {"data_range": 255, **kwargs}
    mask = np.zeros(mask_shape, bool)
    mask[:5, :5] = True
    with pytest.raises(ValueError, match=message):
        masked_ssim(a, b, mask, **kwargs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("window", ["gaussian", "uniform"])
def test_ssim_by_region_equals_the_single_metrics(dtype, window):
    rng = np.random.default_rng(11)
    a = rng.integers(0, 256, (40, 36, 3), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-30, 30, a.shape), 0, 255).astype(np.uint8)
    roi = np.zeros((40, 36), bool)
    roi[5:20, 10:30] = True
    opts = dict(data_range=255, window=window, dtype=dtype)
    got = ssim_by_region(a, b, roi, dilate=2, **opts)
    assert got["full"] == ssim(a, b, **opts)
    assert got["outside"] == masked_ssim(a, b, roi, dilate=2, **opts)
    assert got["inside"] == masked_ssim(a, b, roi, dilate=2, region="inside", **opts)
    assert list(ssim_by_region(a, b, roi, regions=("inside",), **opts)) == ["inside"]


def test_ssim_by_region_rejects_unknown_regions_and_empty_ones():
    a = np.zeros((16, 16), np.uint8)
    with pytest.raises(ValueError, match="subset of"):
        ssim_by_region(a, a, a > 0, data_range=255, regions=("border",))
    with pytest.raises(ValueError, match="inside"):
        ssim_by_region(a, a, a > 0, data_range=255, regions=("inside",))
