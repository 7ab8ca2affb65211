"""Image degradations for transformation tasks: the input is degraded, the target is clean.

Display-space degradations take a uint8 image, grayscale ``(H, W)`` or colour ``(H, W, C)``, and
return a uint8 image of the same shape, rounded with ``np.rint`` and clipped to 0-255:
:func:`add_gaussian_noise`, :func:`add_poisson_noise`, :func:`add_rician_noise`,
:func:`gaussian_blur`, :func:`downsample`, :func:`mr_motion_artefact`, :func:`add_bias_field`,
:func:`reduce_contrast`.

Raw-unit degradations take a float image in the modality's own units (Hounsfield units for CT) and
return float32 of the same shape, to be mapped to display with :func:`to_display` or
:func:`apply_window`: :func:`low_dose_noise`, :func:`ring_artefact`, :func:`streak_artefact`.

All are pure: randomness comes only from the ``rng`` argument.
"""

from __future__ import annotations

import cv2
import numpy as np
from scipy import ndimage

__all__ = [
    "CT_WINDOWS",
    "add_bias_field",
    "add_gaussian_noise",
    "add_poisson_noise",
    "add_rician_noise",
    "apply_window",
    "bias_field",
    "downsample",
    "gaussian_blur",
    "low_dose_noise",
    "mr_motion_artefact",
    "reduce_contrast",
    "ring_artefact",
    "streak_artefact",
    "to_display",
]

#: Named CT display windows, ``name -> (level, width)`` in Hounsfield units.
CT_WINDOWS: dict[str, tuple[float, float]] = {
    "lung": (-600.0, 1500.0),
    "soft tissue": (40.0, 400.0),
    "bone": (400.0, 1800.0),
    "brain": (40.0, 80.0),
}


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


def add_poisson_noise(image: np.ndarray, peak: float, rng: np.random.Generator) -> np.ndarray:
    """Photon (shot) noise: each value becomes ``Poisson(x / 255 * peak) / peak * 255``.

    ``peak`` is the expected photon count of a white (255) pixel, the dose level: the noise
    standard deviation at value ``x`` is ``sqrt(x * 255 / peak)`` grey levels, so halving the
    dose multiplies it by ``sqrt(2)``. Every element gets its own draw.
    """
    img = _check_uint8(image)
    if not peak > 0:
        raise ValueError(f"peak must be positive, got {peak}")
    counts = rng.poisson(img.astype(np.float64) * (float(peak) / 255.0))
    return _to_uint8(counts * (255.0 / float(peak)))


def add_rician_noise(image: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """MR magnitude noise: ``sqrt((x + n1)^2 + n2^2)`` with ``n1, n2 ~ N(0, sigma^2)`` i.i.d.

    ``sigma`` is in grey levels (0-255). This is the magnitude of a complex image whose real and
    imaginary channels carry Gaussian noise: the background (``x = 0``) becomes Rayleigh
    distributed (mean ``sigma * sqrt(pi / 2)``), bright tissue nearly Gaussian.
    """
    img = _check_uint8(image)
    if not sigma >= 0:
        raise ValueError(f"sigma must be non-negative, got {sigma}")
    x = img.astype(np.float64)
    real = x + rng.normal(0.0, float(sigma), size=img.shape)
    imag = rng.normal(0.0, float(sigma), size=img.shape)
    return _to_uint8(np.hypot(real, imag))


def low_dose_noise(
    raw: np.ndarray, dose: float, rng: np.random.Generator, *, full_dose_sigma: float = 10.0,
    correlation_px: float = 0.7,
) -> np.ndarray:
    """Simulate a low-dose CT acquisition of a full-dose image ``raw`` (float, in HU).

    CT noise standard deviation scales as ``1 / sqrt(dose)``: a full-dose image carrying
    ``full_dose_sigma`` HU of noise gets independent extra noise of
    ``full_dose_sigma * sqrt(1 / dose - 1)`` HU, so the total is ``full_dose_sigma / sqrt(dose)``.
    The extra noise is spatially correlated like reconstructed CT noise (white noise blurred by a
    Gaussian of ``correlation_px`` pixels, rescaled to the asked standard deviation).
    ``dose`` is the fraction of the full dose, in ``(0, 1]``. Returns float32.
    """
    x = _check_raw(raw)
    if not 0 < dose <= 1:
        raise ValueError(f"dose must be in (0, 1], got {dose}")
    sigma = float(full_dose_sigma) * np.sqrt(1.0 / float(dose) - 1.0)
    noise = _correlated_noise(x.shape, rng, correlation_px)
    return (x + sigma * noise).astype(np.float32)


def downsample(image: np.ndarray, factor: int, *, keep_size: bool = True) -> np.ndarray:
    """Lose resolution by ``factor`` (2, 4, ...): area-average down, then bicubic back up.

    The image is reduced to ``(H // factor, W // factor)`` with ``cv2.INTER_AREA`` (each output
    pixel the mean of a ``factor x factor`` block) and, with ``keep_size`` (the default, what the
    suite's super-resolution tasks use), enlarged back to ``(H, W)`` with ``cv2.INTER_CUBIC``, so
    the input and the target have the same size and every metric applies directly. With
    ``keep_size=False`` the small image is returned. ``H`` and ``W`` must be multiples of
    ``factor``.
    """
    img = _check_uint8(image)
    f = int(factor)
    if f < 2 or f != factor:
        raise ValueError(f"factor must be an integer >= 2, got {factor}")
    h, w = img.shape[:2]
    if h % f or w % f:
        raise ValueError(f"image size {h}x{w} is not a multiple of the factor {f}")
    small = cv2.resize(img, (w // f, h // f), interpolation=cv2.INTER_AREA)
    if not keep_size:
        return small
    up = cv2.resize(small.astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
    return _to_uint8(up.reshape(img.shape))


def mr_motion_artefact(
    image: np.ndarray, rng: np.random.Generator, *, fraction: float = 0.3,
    max_shift_px: float = 3.0,
) -> np.ndarray:
    """Rigid patient motion during an MR acquisition: ghosting along the phase-encode axis.

    The image's 2-D FFT stands for k-space with phase encoding along rows (axis 0). A random
    ``fraction`` of the k-space rows is acquired with the object translated by a random shift of
    up to ``max_shift_px`` pixels in each direction (the Fourier shift theorem: those rows are
    multiplied by ``exp(-2 pi i (ky dy / H + kx dx / W))``); the result is the magnitude of the
    inverse FFT. Colour channels get the same corruption.
    """
    img = _check_uint8(image)
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    h, w = img.shape[:2]
    rows = np.flatnonzero(rng.random(h) < float(fraction))
    shifts = rng.uniform(-max_shift_px, max_shift_px, size=(rows.size, 2))
    ky = np.fft.fftfreq(h)[rows][:, None]
    kx = np.fft.fftfreq(w)[None, :]
    phase = np.exp(-2j * np.pi * (ky * shifts[:, :1] + kx * shifts[:, 1:]))
    planes = img[:, :, None] if img.ndim == 2 else img
    out = np.empty(planes.shape, np.float64)
    for c in range(planes.shape[2]):
        k = np.fft.fft2(planes[:, :, c].astype(np.float64))
        k[rows] *= phase
        out[:, :, c] = np.abs(np.fft.ifft2(k))
    return _to_uint8(out.reshape(img.shape))


def ring_artefact(
    raw: np.ndarray, rng: np.random.Generator, *, n_rings: int = 4, amplitude: float = 60.0,
    width_px: float = 1.0, center: tuple[float, float] | None = None,
) -> np.ndarray:
    """CT ring artefacts (a miscalibrated detector element): thin concentric rings.

    ``n_rings`` rings centred on the rotation centre (``center``, default the image centre) at
    random radii between 5% and 45% of the image width, each a Gaussian profile of
    ``width_px`` pixels and a random signed strength of 0.5 to 1 times ``amplitude`` (raw units,
    HU for CT), are added to ``raw``. Returns float32.
    """
    x = _check_raw(raw)
    h, w = x.shape
    cy, cx = ((h - 1) / 2, (w - 1) / 2) if center is None else center
    radius = np.sqrt((np.arange(h)[:, None] - cy) ** 2 + (np.arange(w)[None, :] - cx) ** 2)
    radii = rng.uniform(0.05, 0.45, size=int(n_rings)) * w
    strengths = rng.uniform(0.5, 1.0, size=int(n_rings)) * rng.choice([-1.0, 1.0], int(n_rings))
    out = x.astype(np.float64)
    for r, s in zip(radii, strengths, strict=True):
        out += float(amplitude) * s * np.exp(-0.5 * ((radius - r) / float(width_px)) ** 2)
    return out.astype(np.float32)


def streak_artefact(
    raw: np.ndarray, rng: np.random.Generator, *, n_streaks: int = 6, amplitude: float = 80.0,
    width_px: float = 1.5, through: tuple[float, float] | None = None,
) -> np.ndarray:
    """CT streak artefacts (photon starvation, beam hardening near dense objects).

    ``n_streaks`` straight bands at random angles through the point ``through`` (default: a
    random point in the central half of the image), alternately bright and dark, each with a
    Gaussian cross-section of ``width_px`` pixels, a strength of 0.5 to 1 times ``amplitude``
    (raw units) and a slow fall-off away from the point, are added to ``raw``. Returns float32.
    """
    x = _check_raw(raw)
    h, w = x.shape
    if through is None:
        through = (rng.uniform(0.25, 0.75) * h, rng.uniform(0.25, 0.75) * w)
    py, px = float(through[0]), float(through[1])
    yy = np.arange(h, dtype=np.float64)[:, None] - py
    xx = np.arange(w, dtype=np.float64)[None, :] - px
    falloff = np.exp(-np.hypot(yy, xx) / (0.6 * max(h, w)))
    angles = rng.uniform(0.0, np.pi, size=int(n_streaks))
    strengths = rng.uniform(0.5, 1.0, size=int(n_streaks))
    out = x.astype(np.float64)
    for i, (a, s) in enumerate(zip(angles, strengths, strict=True)):
        distance = xx * np.sin(a) - yy * np.cos(a)
        sign = 1.0 if i % 2 == 0 else -1.0
        band = np.exp(-0.5 * (distance / float(width_px)) ** 2)
        out += sign * float(amplitude) * s * band * falloff
    return out.astype(np.float32)


def bias_field(
    shape: tuple[int, int], rng: np.random.Generator, *, strength: float = 0.3, grid: int = 4
) -> np.ndarray:
    """A smooth multiplicative field, float64 ``shape``: ``exp(strength * s)``.

    ``s`` is a ``grid x grid`` array of standard normal values enlarged bicubically to ``shape``
    and scaled to a maximum magnitude of 1, so the field lies in ``[exp(-strength),
    exp(strength)]`` and varies over about ``1 / grid`` of the image (MR receive-coil
    inhomogeneity).
    """
    if not strength >= 0:
        raise ValueError(f"strength must be non-negative, got {strength}")
    coarse = rng.standard_normal((int(grid), int(grid))).astype(np.float32)
    smooth = cv2.resize(coarse, (shape[1], shape[0]), interpolation=cv2.INTER_CUBIC)
    smooth = smooth.astype(np.float64) / max(float(np.abs(smooth).max()), 1e-12)
    return np.exp(float(strength) * smooth)


def add_bias_field(
    image: np.ndarray, rng: np.random.Generator, *, strength: float = 0.3, grid: int = 4
) -> np.ndarray:
    """Multiply ``image`` by :func:`bias_field` (the same field on every channel)."""
    img = _check_uint8(image)
    field = bias_field(img.shape[:2], rng, strength=strength, grid=grid)
    if img.ndim == 3:
        field = field[:, :, None]
    return _to_uint8(img.astype(np.float64) * field)


def to_display(raw: np.ndarray, low: float, high: float) -> np.ndarray:
    """Map raw values linearly to uint8: ``low -> 0``, ``high -> 255``, clipped, ``np.rint``.

    Computed in float32: ``rint(clip((raw - low) * (255 / (high - low)), 0, 255))``, the same
    arithmetic as the scenes' display mapping, so ``to_display(rendered.raw, *rendered.display)``
    reproduces a grey render's pixels.
    """
    if not high > low:
        raise ValueError(f"display range needs high > low, got ({low}, {high})")
    # float32 arithmetic, as the scenes' own display mapping, so both round alike
    x = np.asarray(raw, np.float32)
    scaled = (x - np.float32(low)) * np.float32(255.0 / (float(high) - float(low)))
    return np.rint(np.clip(scaled, 0, 255)).astype(np.uint8)


def apply_window(raw: np.ndarray, window: str | tuple[float, float]) -> np.ndarray:
    """Display CT values ``raw`` (HU) in a window: a name of :data:`CT_WINDOWS` or
    ``(level, width)``; the range ``level -/+ width / 2`` maps to 0-255 (:func:`to_display`)."""
    if isinstance(window, str):
        if window not in CT_WINDOWS:
            raise ValueError(f"unknown CT window {window!r}; known: {', '.join(CT_WINDOWS)}")
        window = CT_WINDOWS[window]
    level, width = float(window[0]), float(window[1])
    return to_display(raw, level - width / 2, level + width / 2)


def _check_uint8(image: np.ndarray) -> np.ndarray:
    img = np.asarray(image)
    if img.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image, got dtype {img.dtype}")
    if img.ndim not in (2, 3):
        raise ValueError(f"expected an (H, W) or (H, W, C) image, got shape {img.shape}")
    return img


def _to_uint8(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def _check_raw(raw: np.ndarray) -> np.ndarray:
    x = np.asarray(raw)
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"expected a numeric (H, W) raw image, got {x.dtype} {x.shape}")
    return x


def _correlated_noise(shape: tuple[int, ...], rng: np.random.Generator, sigma_px: float):
    """Unit-variance Gaussian noise, smoothed by a Gaussian of ``sigma_px`` pixels."""
    white = rng.standard_normal(shape)
    if sigma_px <= 0:
        return white
    smooth = ndimage.gaussian_filter(white, sigma_px, mode="reflect")
    return smooth / max(float(smooth.std()), 1e-12)
