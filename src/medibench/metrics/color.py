"""CIE Lab conversion and the CIE76 colour difference of sRGB images.

sRGB (uint8) -> linear RGB -> XYZ (D65) -> CIE L*a*b*, then ``DeltaE76 = |Lab_a - Lab_b|``::

    linear = c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4     (c = value / 255)
    XYZ    = M @ linear,  M = IEC 61966-2-1 sRGB matrix (7 digits), white D65 (0.95047, 1, 1.08883)
    f(t)   = t ** (1/3) if t > (6/29) ** 3 else t / (3 (6/29) ** 2) + 16/116
    L = 116 f(Y) - 16,  a = 500 (f(X) - f(Y)),  b = 200 (f(Y) - f(Z))

``constants="paintbench"`` (default) are the constants of PaintBench's scorer (docs/protocols.md).
``dtype=np.float64`` (default) computes in float64; ``dtype=np.float32`` computes every step in
float32 in PaintBench's order (``c = uint8 / 255``, the linearisation, ``XYZ = linear @ M.T /
white``, ``f``, Lab, then the norm of the difference), which is what its ``eval.py`` compares
with the integer thresholds: a flat region whose dE lies within float32 rounding of an integer
falls on the side that float32 puts it. ``constants="skimage"`` uses those of
``skimage.color.rgb2lab`` (6-digit matrix, ``t > 0.008856``, slope 7.787) and matches it to 1e-10;
the two differ by up to 0.005 in Lab (mostly b*, from the matrix's last column).

Example:
    >>> import numpy as np
    >>> black = np.zeros((1, 1, 3), np.uint8); white = np.full((1, 1, 3), 255, np.uint8)
    >>> round(float(delta_e76(black, white)[0, 0]), 3)
    100.0
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np

from medibench.metrics._checks import check_same_shape

__all__ = ["rgb_to_lab", "delta_e76", "LabConstants", "LabPrecision"]

LabConstants = Literal["paintbench", "skimage"]
#: The float type the conversion runs in (``np.float64`` or ``np.float32``).
LabPrecision = type[np.float64] | type[np.float32]

_WHITE_D65 = np.array([0.95047, 1.0, 1.08883])
_DELTA = 6.0 / 29.0
# Per convention: (sRGB -> XYZ matrix, cube-root threshold, slope of the linear segment).
_CONSTANTS = {
    "paintbench": (
        np.array(
            [
                [0.4124564, 0.3575761, 0.1804375],
                [0.2126729, 0.7151522, 0.0721750],
                [0.0193339, 0.1191920, 0.9503041],
            ]
        ),
        _DELTA**3,
        1.0 / (3 * _DELTA**2),
    ),
    "skimage": (
        np.array(
            [
                [0.412453, 0.357580, 0.180423],
                [0.212671, 0.715160, 0.072169],
                [0.019334, 0.119193, 0.950227],
            ]
        ),
        0.008856,
        7.787,
    ),
}


def _linear_lut() -> np.ndarray:
    c = np.arange(256) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _linear_lut32() -> np.ndarray:
    # The float32 operations of PaintBench's per-pixel code, once per uint8 level: elementwise,
    # so the table gives the same bits as computing them pixel by pixel.
    c = np.arange(256, dtype=np.float32) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4).astype(np.float32)


# uint8 input has 256 levels: linearise by table lookup instead of a power per pixel.
_LINEAR = _linear_lut()
_LINEAR32 = _linear_lut32()


def rgb_to_lab(
    image: np.ndarray,
    *,
    constants: LabConstants = "paintbench",
    dtype: LabPrecision = np.float64,
) -> np.ndarray:
    """CIE L*a*b* (D65) of an sRGB uint8 image ``(..., 3)``, ``dtype`` of the same shape."""
    image = _as_srgb_uint8(image, "image")
    if constants not in _CONSTANTS:
        raise ValueError(f"constants must be one of {sorted(_CONSTANTS)}, got {constants!r}")
    matrix, eps, slope = _CONSTANTS[constants]
    if np.dtype(dtype) == np.float32:
        return _rgb_to_lab32(image, matrix, eps, slope)
    if np.dtype(dtype) != np.float64:
        raise ValueError(f"dtype must be np.float64 or np.float32, got {dtype!r}")
    # Scale rows of M by 1/white so XYZ comes out already normalised.
    m = (matrix / _WHITE_D65[:, None]).T
    t = _LINEAR[image] @ m
    f = np.where(t > eps, np.cbrt(t), slope * t + 16.0 / 116.0)
    lab = np.empty_like(f)
    lab[..., 0] = 116.0 * f[..., 1] - 16.0
    lab[..., 1] = 500.0 * (f[..., 0] - f[..., 1])
    lab[..., 2] = 200.0 * (f[..., 1] - f[..., 2])
    return lab


def delta_e76(
    a: np.ndarray,
    b: np.ndarray,
    *,
    constants: LabConstants = "paintbench",
    dtype: LabPrecision = np.float64,
) -> np.ndarray:
    """Per-pixel CIE76 colour difference of two sRGB uint8 images ``(H, W, 3)``: ``(H, W)``,
    computed in ``dtype`` (module docstring)."""
    a = _as_srgb_uint8(a, "a")
    b = _as_srgb_uint8(b, "b")
    check_same_shape(a, b)
    diff = rgb_to_lab(a, constants=constants, dtype=dtype) - rgb_to_lab(
        b, constants=constants, dtype=dtype
    )
    if np.dtype(dtype) == np.float32:
        # numpy's sum over a length-3 axis adds left to right: (d0^2 + d1^2) + d2^2, the same
        # bits as PaintBench's ``(diff ** 2).sum(axis=-1)``, without the slow short-axis reduce.
        np.multiply(diff, diff, out=diff)
        sq = diff[..., 0] + diff[..., 1]
        sq += diff[..., 2]
        return np.sqrt(sq, out=sq)
    return np.sqrt(np.einsum("...k,...k->...", diff, diff))


def _rgb_to_lab32(image: np.ndarray, matrix: np.ndarray, eps: float, slope: float) -> np.ndarray:
    """PaintBench's float32 Lab, bit for bit, computed once per distinct colour when few.

    Every step is elementwise per pixel except ``linear @ M.T``, a 3-term dot product per pixel
    that BLAS evaluates in the same order for any number of rows >= 2 (tested), so Lab of a
    colour does not depend on where, or among how many others, it is computed. PaintBench's
    images are mostly flat colours: a 1024x1024 problem has a few thousand runs of one colour.
    """
    shape = image.shape
    pixels = image.reshape(-1, 3)
    n = pixels.shape[0]
    if n >= _RUNS_MIN_PIXELS:
        # Runs of one colour along the rows (flat regions): convert each distinct colour once.
        codes = _colour_codes(pixels)
        starts = np.flatnonzero(codes[1:] != codes[:-1]) + 1
        if (starts.size + 1) * _RUNS_RATIO <= n:
            starts = np.concatenate(([0], starts))
            distinct, run_index = np.unique(codes[starts], return_inverse=True)
            # Two rows at least: numpy multiplies a single row without BLAS (other rounding).
            colours = np.empty((max(distinct.size, 2), 3), np.uint8)
            colours[: distinct.size, 0] = distinct >> 16
            colours[: distinct.size, 1] = (distinct >> 8) & 255
            colours[: distinct.size, 2] = distinct & 255
            colours[distinct.size :] = colours[0]
            lab = _lab32_rows(colours, matrix, eps, slope)[run_index]
            lengths = np.diff(starts, append=n)
            return np.repeat(lab, lengths, axis=0).reshape(shape)
    return _lab32_rows(pixels, matrix, eps, slope).reshape(shape)


# Below this many pixels, or with more than 1/_RUNS_RATIO as many colour runs, convert directly.
_RUNS_MIN_PIXELS = 4096
_RUNS_RATIO = 8


def _lab32_rows(pixels: np.ndarray, matrix: np.ndarray, eps: float, slope: float) -> np.ndarray:
    """``(N, 3)`` uint8 -> ``(N, 3)`` float32 Lab in PaintBench's float32 operations."""
    # Python floats stay "weak" next to float32 arrays (NEP 50): every step is float32.
    linear = cv2.LUT(np.ascontiguousarray(pixels).reshape(-1, 1, 3), _LINEAR32).reshape(-1, 3)
    xyz = linear @ matrix.astype(np.float32).T
    xyz /= _WHITE_D65.astype(np.float32)
    f = np.where(xyz > eps, np.cbrt(xyz), slope * xyz + 16.0 / 116.0)
    lab = np.empty_like(f)
    np.multiply(f[:, 1], 116, out=lab[:, 0])
    lab[:, 0] -= 16
    np.subtract(f[:, 0], f[:, 1], out=lab[:, 1])
    lab[:, 1] *= 500
    np.subtract(f[:, 1], f[:, 2], out=lab[:, 2])
    lab[:, 2] *= 200
    return lab


def _colour_codes(pixels: np.ndarray) -> np.ndarray:
    """``(N, 3)`` uint8 -> ``(N,)`` int32 ``r << 16 | g << 8 | b``."""
    codes = pixels[:, 0].astype(np.int32) << 16
    codes |= pixels[:, 1].astype(np.int32) << 8
    codes |= pixels[:, 2]
    return codes


def _as_srgb_uint8(image: np.ndarray, name: str) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise ValueError(f"{name} must be an sRGB uint8 image, got dtype {image.dtype}")
    if image.ndim < 1 or image.shape[-1] != 3:
        raise ValueError(f"{name} must have 3 colour channels last (H, W, 3), got {image.shape}")
    return image
