"""The degradations added for the suite: each measured against what it promises."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.synth import degrade


def test_poisson_noise_variance_follows_the_photon_count() -> None:
    image = np.full((256, 256), 128, np.uint8)
    noisy = degrade.add_poisson_noise(image, 50.0, np.random.default_rng(0))
    # counts ~ Poisson(128/255*50 = 25.1): std in grey levels = sqrt(25.1) * 255 / 50 = 25.5
    assert noisy.astype(float).std() == pytest.approx(np.sqrt(128 / 255 * 50) * 255 / 50, rel=0.03)
    assert abs(noisy.astype(float).mean() - 128) < 0.6
    less = degrade.add_poisson_noise(image, 200.0, np.random.default_rng(0))
    assert less.astype(float).std() == pytest.approx(noisy.astype(float).std() / 2, rel=0.05)
    assert np.array_equal(
        degrade.add_poisson_noise(np.zeros((8, 8), np.uint8), 10.0, np.random.default_rng(1)),
        np.zeros((8, 8)),
    )


def test_rician_noise_lifts_the_background_to_a_rayleigh_mean() -> None:
    dark = np.zeros((256, 256), np.uint8)
    noisy = degrade.add_rician_noise(dark, 10.0, np.random.default_rng(0))
    assert noisy.astype(float).mean() == pytest.approx(10.0 * np.sqrt(np.pi / 2), rel=0.03)
    bright = degrade.add_rician_noise(np.full((256, 256), 200, np.uint8), 10.0,
                                      np.random.default_rng(0))  # fmt: skip
    assert bright.astype(float).std() == pytest.approx(10.0, rel=0.05)  # ~Gaussian when bright


def test_low_dose_noise_reaches_the_total_of_the_dose() -> None:
    raw = np.zeros((256, 256), np.float32)
    low = degrade.low_dose_noise(raw, 0.25, np.random.default_rng(0), full_dose_sigma=10.0)
    assert low.dtype == np.float32
    assert low.std() == pytest.approx(10.0 * np.sqrt(1 / 0.25 - 1), rel=0.02)
    assert np.array_equal(degrade.low_dose_noise(raw, 1.0, np.random.default_rng(0)), raw)
    with pytest.raises(ValueError, match="dose"):
        degrade.low_dose_noise(raw, 0.0, np.random.default_rng(0))


def test_downsample_loses_high_frequencies_and_keeps_the_size() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (64, 64), dtype=np.uint8)
    for factor in (2, 4):
        small = degrade.downsample(image, factor, keep_size=False)
        assert small.shape == (64 // factor, 64 // factor)
        # area average: each small pixel is the block mean
        block = image[:factor, :factor].astype(float).mean()
        assert abs(int(small[0, 0]) - block) <= 0.5 + 1e-9
        up = degrade.downsample(image, factor)
        assert up.shape == image.shape
        spectrum = np.abs(np.fft.fftshift(np.fft.fft2(up.astype(float) - up.mean())))
        full = np.abs(np.fft.fftshift(np.fft.fft2(image.astype(float) - image.mean())))
        c, r = 32, 32 // factor
        outer = np.ones_like(spectrum, bool)
        outer[c - r : c + r, c - r : c + r] = False
        assert spectrum[outer].sum() < 0.35 * full[outer].sum()
    with pytest.raises(ValueError, match="multiple"):
        degrade.downsample(image[:63], 2)


def test_motion_ghosts_only_along_the_phase_encode_axis() -> None:
    image = np.zeros((64, 64), np.uint8)
    image[24:40, 24:40] = 200
    assert np.array_equal(degrade.mr_motion_artefact(image, np.random.default_rng(0),
                                                     fraction=0.0), image)  # fmt: skip
    ghost = degrade.mr_motion_artefact(image, np.random.default_rng(0), fraction=0.4)
    outside = image == 0
    assert ghost[outside].astype(float).mean() > 1.0  # energy leaks out of the object
    rgb = np.repeat(image[:, :, None], 3, axis=2)
    ghost_rgb = degrade.mr_motion_artefact(rgb, np.random.default_rng(0), fraction=0.4)
    assert np.array_equal(ghost_rgb[:, :, 0], ghost) and np.array_equal(ghost_rgb[:, :, 2], ghost)


def test_rings_are_concentric_and_streaks_are_straight() -> None:
    raw = np.zeros((129, 129), np.float32)
    rings = degrade.ring_artefact(raw, np.random.default_rng(0), n_rings=1, amplitude=50.0)
    # a ring is a function of the distance to the centre only
    assert rings[64, 64 + 30] == pytest.approx(rings[64 + 30, 64], abs=1e-3)
    assert rings[64, 64 + 30] == pytest.approx(rings[64, 64 - 30], abs=1e-3)
    assert 25.0 <= np.abs(rings).max() <= 50.0 + 1e-3  # strength 0.5 to 1 times the amplitude
    streaks = degrade.streak_artefact(raw, np.random.default_rng(0), n_streaks=1,
                                      amplitude=80.0, through=(64.0, 64.0))  # fmt: skip
    assert streaks[64, 64] == pytest.approx(streaks.max())  # brightest where it passes
    assert streaks.max() > 40.0


def test_bias_field_is_smooth_and_bounded() -> None:
    field = degrade.bias_field((128, 128), np.random.default_rng(0), strength=0.3)
    assert field.min() >= np.exp(-0.3) - 1e-9 and field.max() <= np.exp(0.3) + 1e-9
    assert np.abs(np.diff(field, axis=0)).max() < 0.05  # smooth: tiny steps between pixels
    image = np.full((128, 128, 3), 100, np.uint8)
    biased = degrade.add_bias_field(image, np.random.default_rng(0), strength=0.3)
    assert np.array_equal(biased[:, :, 0], biased[:, :, 1])
    assert np.array_equal(biased[:, :, 0], np.rint(100 * field).astype(np.uint8))


def test_named_ct_windows() -> None:
    hu = np.array([[-1350.0, -600.0, 150.0, -160.0, 40.0, 240.0]], np.float32)
    lung = degrade.apply_window(hu[:, :3], "lung")
    assert lung.tolist() == [[0, 128, 255]]  # level -600, width 1500
    soft = degrade.apply_window(hu[:, 3:], "soft tissue")
    assert soft.tolist() == [[0, 128, 255]]
    assert degrade.apply_window(np.array([0.0, 80.0]), "brain").tolist() == [0, 255]
    assert degrade.apply_window(np.array([-500.0, 1300.0]), "bone").tolist() == [0, 255]
    with pytest.raises(ValueError, match="lung, soft tissue, bone, brain"):
        degrade.apply_window(hu, "liver")
