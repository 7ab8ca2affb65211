"""Distances between sets of image features: Fréchet distance (FID), KID, cosine similarity.

Features are ``(N, D)`` float arrays, one row per image, from a declared extractor
(:mod:`medibench.analysis.features`); nothing here knows which one.

* :func:`frechet_distance`: ``|mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2))`` with the
  sample means and covariances (``N - 1`` in the denominator, as ``numpy.cov``). The trace of
  the matrix square root is computed either from eigenvalues (``method="eigen"``, the default:
  ``tr (S_a S_b)^(1/2) = sum sqrt(eig(L^T S_b L))`` with ``L L^T = S_a`` (Cholesky, or a
  symmetric root when ``S_a`` is singular), exact for PSD matrices, fast, stable on singular
  covariances) or with ``scipy.linalg.sqrtm`` (``method="sqrtm"``, pytorch-fid's
  code path: when the root is not finite, ``eps`` is added to both diagonals and it is taken
  again; a complex root whose imaginary part exceeds ``1e-3`` is an error, else its real part).
* :func:`kid`: the unbiased MMD^2 with the polynomial kernel ``k(x, y) = (x.y / D + 1)^3``,
  averaged over ``subsets`` random subsets of ``subset_size`` rows of each set (drawn without
  replacement), returned with its standard deviation over subsets.
* :func:`cosine_similarity`: per pair of rows.
* :func:`frechet_distance_ci`, :func:`kid_ci`: percentile bootstrap intervals (both sets
  resampled with replacement, the percentile convention of :func:`medibench.stats.bootstrap_ci`).

Fewer rows than dimensions (the usual case for a benchmark region: MedEBench regions hold tens of
images, Inception features have 2,048 dimensions) make the covariances singular; the value is then
the plug-in estimate from rank-deficient covariances, biased upwards, and a
:class:`FeatureSetWarning` says so.

Example:
    >>> import numpy as np
    >>> a = np.random.default_rng(0).normal(size=(500, 4))
    >>> round(frechet_distance(a, a), 10)
    0.0
    >>> round(frechet_distance(a, a + 1.0), 6)   # a shift of 1 in each of 4 dimensions
    4.0
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Literal, NamedTuple

import numpy as np

__all__ = [
    "KID",
    "FeatureSetWarning",
    "cosine_similarity",
    "frechet_distance",
    "frechet_distance_ci",
    "gaussian_frechet_distance",
    "kid",
    "kid_ci",
]

FIDMethod = Literal["eigen", "sqrtm"]


class FeatureSetWarning(UserWarning):
    """A feature set too small for the estimate asked of it (rank-deficient covariance, KID
    subsets capped)."""


class KID(NamedTuple):
    """Kernel inception distance over random subsets: ``mean`` and ``std`` of the per-subset
    unbiased MMD^2, the ``subset_size`` and number of ``subsets`` used, and ``notes`` (a
    capped subset size, for instance)."""

    mean: float
    std: float
    subset_size: int
    subsets: int
    notes: tuple[str, ...] = ()


def frechet_distance(
    a: np.ndarray, b: np.ndarray, *, method: FIDMethod = "eigen", eps: float = 1e-6
) -> float:
    """Fréchet distance between Gaussians fitted to feature sets ``a`` (N_a, D) and ``b`` (N_b, D).

    Warns (:class:`FeatureSetWarning`) when a set has fewer rows than ``D``: its covariance is
    singular and the value is the plug-in estimate from it.

    Raises:
        ValueError: not 2-D, different ``D``, fewer than 2 rows, NaN or infinite values.
    """
    a, b = _check_pair(a, b, "frechet_distance")
    for name, x in (("a", a), ("b", b)):
        if x.shape[0] <= x.shape[1]:
            warnings.warn(
                f"frechet_distance: {name} has {x.shape[0]} rows for {x.shape[1]} dimensions: its "
                f"covariance is singular (rank <= {x.shape[0] - 1}); the value is the plug-in "
                "estimate from it (biased upwards; compare only sets of equal size)",
                FeatureSetWarning,
                stacklevel=2,
            )
    mu_a, mu_b = a.mean(axis=0), b.mean(axis=0)
    return gaussian_frechet_distance(mu_a, _cov(a, mu_a), mu_b, _cov(b, mu_b), method, eps)


def gaussian_frechet_distance(
    mu_a: np.ndarray, sigma_a: np.ndarray, mu_b: np.ndarray, sigma_b: np.ndarray,
    method: FIDMethod = "eigen", eps: float = 1e-6,
) -> float:
    """``|mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2))`` from means and covariances."""
    if method not in ("eigen", "sqrtm"):
        raise ValueError(f"method must be 'eigen' or 'sqrtm', not {method!r}")
    diff = np.asarray(mu_a, np.float64) - np.asarray(mu_b, np.float64)
    if method == "eigen":
        tr_covmean = _trace_sqrt_product(sigma_a, sigma_b)
    else:
        tr_covmean = _trace_sqrtm(sigma_a, sigma_b, eps)
    return float(diff @ diff + np.trace(sigma_a) + np.trace(sigma_b) - 2.0 * tr_covmean)


def kid(
    a: np.ndarray, b: np.ndarray, *, subset_size: int = 1000, subsets: int = 100, seed: int = 0
) -> KID:
    """Kernel inception distance: unbiased polynomial-kernel MMD^2 over random subsets.

    Per subset, ``m`` rows of ``a`` (X) and of ``b`` (Y) drawn without replacement
    (``numpy.random.default_rng(seed)``; X then Y per subset):
    ``MMD^2 = sum_{i != j} k(x_i, x_j) / (m (m-1)) + sum_{i != j} k(y_i, y_j) / (m (m-1))
    - 2 sum_{i, j} k(x_i, y_j) / m^2``. ``subset_size`` larger than the smaller set is capped to
    it, with a note and a :class:`FeatureSetWarning`.
    """
    a, b = _check_pair(a, b, "kid")
    if subset_size < 2 or subsets < 1:
        raise ValueError(
            f"kid needs subset_size >= 2 and subsets >= 1, got {subset_size}, {subsets}"
        )
    notes: list[str] = []
    m = subset_size
    smaller = min(a.shape[0], b.shape[0])
    if m > smaller:
        notes.append(f"subset_size {subset_size} capped at {smaller} (the smaller set)")
        warnings.warn(f"kid: {notes[-1]}", FeatureSetWarning, stacklevel=2)
        m = smaller
    rng = np.random.default_rng(seed)
    values = np.empty(subsets)
    for s in range(subsets):
        x = a[rng.choice(a.shape[0], m, replace=False)]
        y = b[rng.choice(b.shape[0], m, replace=False)]
        values[s] = _mmd2_unbiased(x, y)
    return KID(float(values.mean()), float(values.std()), m, subsets, tuple(notes))


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of ``a`` with the same row of ``b`` (both (N, D)): (N,).

    A zero row has no direction: ``ValueError`` naming its index.
    """
    a, b = _check_pair(a, b, "cosine_similarity", min_rows=1)
    if a.shape != b.shape:
        raise ValueError(f"cosine_similarity pairs rows: shapes {a.shape} and {b.shape} differ")
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    zero = np.flatnonzero((na == 0) | (nb == 0))
    if zero.size:
        raise ValueError(f"cosine_similarity: row(s) {zero[:5].tolist()} are all zeros")
    return np.einsum("nd,nd->n", a, b) / (na * nb)


def frechet_distance_ci(
    a: np.ndarray, b: np.ndarray, *, n_resamples: int = 100, seed: int = 42, level: float = 0.95,
    method: FIDMethod = "eigen",
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`frechet_distance` (rows of each set resampled
    with replacement, ``n_resamples`` times; about one FID's time per resample)."""
    a, b = _check_pair(a, b, "frechet_distance_ci")
    with warnings.catch_warnings():  # warned once for the point estimate, not per resample
        warnings.simplefilter("ignore", FeatureSetWarning)
        return _two_sample_ci(
            a, b, lambda x, y: frechet_distance(x, y, method=method), n_resamples, seed, level
        )


def kid_ci(
    a: np.ndarray, b: np.ndarray, *, subset_size: int = 1000, subsets: int = 10,
    n_resamples: int = 100, seed: int = 42, level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the KID mean (both sets resampled with replacement)."""
    a, b = _check_pair(a, b, "kid_ci")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FeatureSetWarning)

        def stat(x: np.ndarray, y: np.ndarray) -> float:
            return kid(x, y, subset_size=subset_size, subsets=subsets, seed=seed).mean

        return _two_sample_ci(a, b, stat, n_resamples, seed, level)


# -- helpers ---------------------------------------------------------------------------------
def _check_pair(
    a: np.ndarray, b: np.ndarray, who: str, min_rows: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    out = []
    for name, x in (("a", a), ("b", b)):
        x = np.asarray(x)
        if x.ndim != 2:
            raise ValueError(f"{who}: {name} must be (N, D) features, got shape {x.shape}")
        if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
            raise ValueError(f"{who}: {name} must be numeric, got dtype {x.dtype}")
        x = x.astype(np.float64, copy=False)
        bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
        if bad.size:
            raise ValueError(
                f"{who}: {name} has NaN or infinite features in {bad.size} row(s), first "
                f"{bad[:5].tolist()}: the extractor failed on those images"
            )
        if x.shape[0] < min_rows:
            raise ValueError(f"{who}: {name} needs at least {min_rows} rows, got {x.shape[0]}")
        out.append(x)
    if out[0].shape[1] != out[1].shape[1]:
        raise ValueError(
            f"{who}: a and b have {out[0].shape[1]} and {out[1].shape[1]} dimensions: "
            "features of different extractors?"
        )
    return out[0], out[1]


def _cov(x: np.ndarray, mu: np.ndarray) -> np.ndarray:
    c = x - mu
    return (c.T @ c) / (x.shape[0] - 1)


def _trace_sqrt_product(sigma_a: np.ndarray, sigma_b: np.ndarray) -> float:
    # With any factor L L^T = S_a (Cholesky; a symmetric root when S_a is singular), S_a S_b is
    # similar to the symmetric PSD L^T S_b L: tr (S_a S_b)^(1/2) = sum sqrt(eig(L^T S_b L)).
    from scipy import linalg

    try:
        factor = linalg.cholesky(sigma_a, lower=True, check_finite=False)
    except linalg.LinAlgError:
        w, v = np.linalg.eigh(sigma_a)
        factor = v * np.sqrt(_drop_noise(w))
        m = factor.T @ sigma_b @ factor
    else:  # triangular products: half the work of two general ones
        trmm = linalg.blas.dtrmm
        m = trmm(1.0, factor, trmm(1.0, factor, sigma_b, side=1, lower=1), lower=1, trans_a=1)
    ev = linalg.eigh((m + m.T) / 2.0, eigvals_only=True, driver="evd", check_finite=False)
    return float(np.sqrt(_drop_noise(ev)).sum())


def _drop_noise(w: np.ndarray) -> np.ndarray:
    # Eigenvalues within rounding of zero (singular covariances) are zero, not sqrt(noise).
    tol = max(float(np.abs(w).max(initial=0.0)), 1e-300) * w.size * np.finfo(np.float64).eps
    return np.where(w > tol, w, 0.0)


def _trace_sqrtm(sigma_a: np.ndarray, sigma_b: np.ndarray, eps: float) -> float:
    from scipy import linalg

    covmean = linalg.sqrtm(sigma_a @ sigma_b)
    if not np.isfinite(covmean).all():
        offset = np.eye(sigma_a.shape[0]) * eps
        covmean = linalg.sqrtm((sigma_a + offset) @ (sigma_b + offset))
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            worst = float(np.max(np.abs(covmean.imag)))
            raise ValueError(
                f"frechet_distance (sqrtm): the matrix square root has an imaginary part of "
                f"{worst:.3g}; use method='eigen'"
            )
        covmean = covmean.real
    return float(np.trace(covmean))


def _mmd2_unbiased(x: np.ndarray, y: np.ndarray) -> float:
    m, d = x.shape
    kxx = (x @ x.T / d + 1.0) ** 3
    kyy = (y @ y.T / d + 1.0) ** 3
    kxy = (x @ y.T / d + 1.0) ** 3
    off = m * (m - 1)
    return float(
        (kxx.sum() - np.trace(kxx)) / off + (kyy.sum() - np.trace(kyy)) / off - 2 * kxy.mean()
    )


def _two_sample_ci(
    a: np.ndarray,
    b: np.ndarray,
    stat: Callable[[np.ndarray, np.ndarray], float],
    n_resamples: int,
    seed: int,
    level: float,
) -> tuple[float, float]:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    values = np.empty(n_resamples)
    for i in range(n_resamples):
        ia = rng.integers(0, a.shape[0], a.shape[0])
        ib = rng.integers(0, b.shape[0], b.shape[0])
        values[i] = stat(a[ia], b[ib])
    low, high = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)
