"""Degradations: their effect measured against what they promise."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.synth import add_gaussian_noise, gaussian_blur, reduce_contrast


def test_noise_has_the_asked_standard_deviation() -> None:
    image = np.full((256, 256), 128, np.uint8)
    noisy = add_gaussian_noise(image, 12.0, np.random.default_rng(0))
    diff = noisy.astype(float) - 128
    assert noisy.dtype == np.uint8 and noisy.shape == image.shape
    assert diff.std() == pytest.approx(12.0, rel=0.02)  # rounding adds 1/12 variance: negligible
    assert abs(diff.mean()) < 0.2
    again = add_gaussian_noise(image, 12.0, np.random.default_rng(0))
    assert np.array_equal(noisy, again)
    assert np.array_equal(add_gaussian_noise(image, 0.0, np.random.default_rng(1)), image)


def test_noise_per_channel_on_rgb() -> None:
    image = np.full((64, 64, 3), 100, np.uint8)
    noisy = add_gaussian_noise(image, 10.0, np.random.default_rng(2))
    assert noisy.shape == (64, 64, 3)
    assert not np.array_equal(noisy[:, :, 0], noisy[:, :, 1])


def test_blur_of_a_point_is_the_gaussian_peak() -> None:
    image = np.zeros((41, 41), np.uint8)
    image[20, 20] = 255
    blurred = gaussian_blur(image, 2.0)
    # Peak of a normalised 2-D Gaussian: 255 / (2 pi sigma^2) = 10.15 -> 10.
    assert int(blurred[20, 20]) == 10
    assert int(blurred[20, 21]) == int(blurred[21, 20]) == int(blurred[20, 19])
    assert int(blurred.sum()) == pytest.approx(255, abs=30)  # mass kept, up to rounding
    flat = np.full((16, 16, 3), 77, np.uint8)
    assert np.array_equal(gaussian_blur(flat, 3.0), flat)  # channels not mixed, borders mirrored


def test_reduce_contrast_scales_the_spread_and_keeps_the_mean() -> None:
    rng = np.random.default_rng(3)
    image = rng.integers(40, 220, size=(128, 128)).astype(np.uint8)
    low = reduce_contrast(image, 0.4)
    assert low.std() == pytest.approx(0.4 * image.std(), rel=0.01)
    assert low.mean() == pytest.approx(image.mean(), abs=0.3)
    assert np.array_equal(reduce_contrast(image, 1.0), image)
    assert int(reduce_contrast(np.array([[0, 200]], np.uint8), 0.5, center=100)[0, 1]) == 150


def test_bad_arguments() -> None:
    image = np.zeros((4, 4), np.uint8)
    with pytest.raises(ValueError, match="factor must be in"):
        reduce_contrast(image, 0.0)
    with pytest.raises(ValueError, match="sigma must be non-negative"):
        gaussian_blur(image, -1.0)
    with pytest.raises(ValueError, match="uint8"):
        add_gaussian_noise(image.astype(np.float32), 1.0, np.random.default_rng(0))
