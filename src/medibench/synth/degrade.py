"""Image degradations for transformation tasks (denoise, deblur, enhance contrast).

Each takes a uint8 image, grayscale ``(H, W)`` or colour ``(H, W, C)``, and returns a uint8
image of the same shape. Results are rounded with ``np.rint`` and clipped to 0-255.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

__all__ = ["add_gaussian_noise", "gaussian_blur", "reduce_contrast"]


def add_gaussian_noise(image: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Add i.i.d. Gaussian noise of standard deviation ``sigma`` (0-255 units) to every value.

    Every element (every channel of every pixel) gets its own draw; to keep a grayscale image
    gray, add noise to the ``(H, W)`` image before stacking it to RGB. Clipping at 0 and 255
    lowers the measured standard deviation near black or white.
    """
    img = _check_uint8(image)
    if not sigma >= 0:
        raise ValueError(f"sigma must be non-negative, got {sigma}")
    noisy = img.astype(np.float64) + rng.normal(0.0, float(sigma), size=img.shape)
    return _to_uint8(noisy)


def gaussian_blur(image: np.ndarray, sigma: float, *, truncate: float = 4.0) -> np.ndarray:
    """Blur the spatial axes with a Gaussian of standard deviation ``sigma`` pixels.

    ``scipy.ndimage.gaussian_filter`` in float64, borders mirrored (``mode="reflect"``), kernel
    cut at ``truncate * sigma``; channels are blurred independently.
    """
    img = _check_uint8(image)
    if not sigma >= 0:
        raise ValueError(f"sigma must be non-negative, got {sigma}")
    sigmas = (float(sigma), float(sigma)) + (0.0,) * (img.ndim - 2)
    blurred = ndimage.gaussian_filter(
        img.astype(np.float64), sigma=sigmas, mode="reflect", truncate=truncate
    )
    return _to_uint8(blurred)


def reduce_contrast(image: np.ndarray, factor: float, *, center: float | None = None) -> np.ndarray:
    """Scale deviations from ``center`` by ``factor``: ``out = center + factor * (x - center)``.

    ``center`` defaults to the image mean (over all values), so the mean brightness is kept;
    ``factor`` in ``(0, 1)`` lowers the contrast (the standard deviation shrinks by ``factor``
    up to rounding), ``1`` returns the image unchanged.
    """
    img = _check_uint8(image)
    if not 0 < factor <= 1:
        raise ValueError(f"factor must be in (0, 1], got {factor}")
    c = float(img.mean()) if center is None else float(center)
    return _to_uint8(c + float(factor) * (img.astype(np.float64) - c))


def _check_uint8(image: np.ndarray) -> np.ndarray:
    img = np.asarray(image)
    if img.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image, got dtype {img.dtype}")
    if img.ndim not in (2, 3):
        raise ValueError(f"expected an (H, W) or (H, W, C) image, got shape {img.shape}")
    return img


def _to_uint8(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)
