"""Smooth (kernel) ECE of Błasiok and Nakkiran (2023, "Smooth ECE: principled reliability
diagrams via kernel smoothing").

For top-label confidences ``f_i`` and outcomes ``y_i`` (1 when the prediction is right)::

    r(t) = (1/N) sum_i K_sigma(t, f_i) (y_i - f_i)        t in [0, 1]
    smECE_sigma = integral_0^1 |r(t)| dt

with ``K_sigma`` the Gaussian kernel reflected at 0 and 1 (every reflection, so it keeps its
mass inside [0, 1]). The bandwidth is the fixed point ``sigma* = smECE_{sigma*}`` (unique,
since ``smECE_sigma`` does not increase with ``sigma``), found by Brent's method; ``smooth_ece``
returns ``smECE_{sigma*}`` (which equals ``sigma*``).

Computation: the residuals are deposited on 4,096 equal cells of [0, 1] (linear sharing
between the two nearest cell centres); the reflected Gaussian is then exact in the cosine
(DCT-II) basis, where smoothing multiplies coefficient ``k`` by ``exp(-(pi k sigma)^2 / 2)``.
The error against the continuous definition is below 1e-4 for bandwidths above 0.005.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "GRID_CELLS",
    "deposit",
    "smooth_ece_at",
    "smooth_ece_fixed_point",
    "smooth_ece_of_grid",
]

#: Cells of the grid the residuals are deposited on.
GRID_CELLS = 4096


def deposit(conf: np.ndarray, hits: np.ndarray, cells: int = GRID_CELLS) -> np.ndarray:
    """The residual mass ``(y_i - f_i) / N`` shared between the two cell centres nearest each
    ``f_i`` (a cell beyond either end is its mirror image, the end cell)."""
    u = conf * cells - 0.5
    k0 = np.floor(u)
    frac = u - k0
    k0 = k0.astype(np.int64)
    k1 = np.minimum(k0 + 1, cells - 1)
    k0 = np.maximum(k0, 0)
    r = hits - conf
    g = np.bincount(k0, weights=r * (1.0 - frac), minlength=cells)
    g += np.bincount(k1, weights=r * frac, minlength=cells)
    return g / conf.shape[0]


def smooth_ece_at(coefficients: np.ndarray, sigma: float) -> float:
    """``smECE_sigma`` from the DCT-II coefficients of a deposited residual grid."""
    from scipy.fft import idct

    cells = coefficients.shape[0]
    k2 = (np.pi * np.arange(cells)) ** 2
    smoothed = idct(coefficients * np.exp(-0.5 * sigma * sigma * k2), type=2, norm="ortho")
    return float(np.abs(smoothed).sum())


def smooth_ece_fixed_point(
    conf: np.ndarray,
    hits: np.ndarray,
    *,
    sigma: float | None = None,
    tol: float = 1e-6,
) -> tuple[float, float]:
    """``(smECE, sigma)``: at the given bandwidth, or at the fixed point ``sigma = smECE``."""
    return smooth_ece_of_grid(deposit(conf, hits), sigma=sigma, tol=tol)


def smooth_ece_of_grid(
    grid: np.ndarray, *, sigma: float | None = None, tol: float = 1e-6
) -> tuple[float, float]:
    """:func:`smooth_ece_fixed_point` from a deposited residual grid (:func:`deposit`; the
    bootstrap deposits each resample's by weights)."""
    from scipy.fft import dct

    coeffs = dct(grid, type=2, norm="ortho")
    if sigma is not None:
        if not 0.0 < sigma:
            raise ValueError(f"smooth ECE: the bandwidth must be positive, got {sigma!r}")
        return smooth_ece_at(coeffs, sigma), float(sigma)
    from scipy.optimize import brentq

    top = smooth_ece_at(coeffs, 1.0)
    if top >= 1.0:
        return top, 1.0
    low = smooth_ece_at(coeffs, tol)
    if low <= tol:  # calibrated to within the tolerance
        return low, tol
    root = float(brentq(lambda s: smooth_ece_at(coeffs, s) - s, tol, 1.0, xtol=tol))
    return smooth_ece_at(coeffs, root), root
