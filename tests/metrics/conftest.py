"""Shared images for the metric tests: small, generated or shipped with scikit-image (offline)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data

cv2.setNumThreads(1)


@pytest.fixture(scope="session")
def rng_images() -> tuple[np.ndarray, np.ndarray]:
    """A random uint8 RGB image (40 x 48) and a noisy copy."""
    rng = np.random.default_rng(1234)
    a = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
    b = np.clip(a + rng.normal(0, 25, a.shape), 0, 255).astype(np.uint8)
    return a, b


@pytest.fixture(scope="session")
def camera_pair() -> tuple[np.ndarray, np.ndarray]:
    """A 128 x 128 crop of skimage's camera and a blurred, noisy edit of it (uint8 gray)."""
    a = data.camera()[200:328, 200:328]
    rng = np.random.default_rng(7)
    b = cv2.GaussianBlur(a, (5, 5), 1.2).astype(np.float64) + rng.normal(0, 6, a.shape)
    return a, np.clip(b, 0, 255).astype(np.uint8)


@pytest.fixture(scope="session")
def retina_rgb() -> np.ndarray:
    """skimage's retina fundus photograph resized to 160 x 160 RGB uint8."""
    return cv2.resize(data.retina(), (160, 160), interpolation=cv2.INTER_AREA)


@pytest.fixture(scope="session")
def ihc_pair() -> tuple[np.ndarray, np.ndarray]:
    """A 128 x 128 immunohistochemistry crop (RGB) and a locally edited, noisy copy."""
    a = data.immunohistochemistry()[100:228, 150:278].copy()
    rng = np.random.default_rng(11)
    b = a.astype(np.float64) + rng.normal(0, 4, a.shape)
    b[40:80, 50:100] = cv2.GaussianBlur(a, (9, 9), 3)[40:80, 50:100]
    return a, np.clip(b, 0, 255).astype(np.uint8)
