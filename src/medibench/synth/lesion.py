"""Synthetic lesions inserted into real images, with an exact mask of what changed.

A lesion is a soft-edged ellipse (optionally lobulated) with a little smooth texture, brighter
(``contrast > 0``) or darker (``contrast < 0``) than what lies beneath it. Because the lesion is
*added* to a real image, the image before insertion is an exact counterfactual: the target of a
"remove the lesion" task.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> img = np.full((64, 64), 100, np.uint8)
    >>> out, mask = insert_lesion(img, center=(32, 32), radius=8, contrast=60, rng=rng)
    >>> bool((out[~mask] == img[~mask]).all()), int(out[32, 32]) > 150
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from scipy import ndimage
from skimage.filters import threshold_otsu

__all__ = ["insert_lesion", "body_mask", "choose_lesion_center"]

LesionShape = Literal["ellipse", "circle", "lobulated"]


def insert_lesion(
    image: np.ndarray,
    *,
    center: tuple[float, float],
    radius: float | tuple[float, float],
    contrast: float,
    rng: np.random.Generator,
    shape: LesionShape = "ellipse",
    edge_softness: float = 0.4,
    texture: float = 0.15,
    tint: Sequence[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Add a synthetic lesion to ``image``; return ``(lesioned, mask)``.

    The intensity change at a pixel is ``contrast * w(rho) * t``: ``rho`` is the elliptic radius
    (1 on the lesion's border), ``w`` is 1 inside ``rho <= 1 - edge_softness`` and falls to 0 at
    ``rho = 1`` along a half cosine, ``t = max(0, 1 + texture * n)`` with ``n`` a smooth Gaussian
    random field of unit standard deviation. The result is rounded (``np.rint``) and clipped.

    The mask is the set of pixels whose value changed, with the holes that set encloses filled
    (a pixel inside the lesion can stay unchanged where the image is already saturated at 0 or
    255, or where the soft edge rounds to no change). Hence, exactly: ``lesioned == image``
    outside the mask, and the mask lies inside the ellipse ``rho < 1``.

    Args:
        image: uint8 ``(H, W)`` grayscale or ``(H, W, 3)`` RGB.
        center: ``(row, col)`` of the lesion centre, in pixels.
        radius: semi-axis in pixels; a number draws the other semi-axis as ``radius * U(0.7, 1)``
            (1 for ``shape="circle"``) and a random orientation; ``(r_row, r_col)`` fixes both
            semi-axes (the orientation is still drawn unless the shape is a circle).
        contrast: intensity change at the lesion's core in 0-255 units; positive is brighter.
        rng: every random choice (shape, orientation, lobes, texture) is drawn from it.
        shape: ``"ellipse"``, ``"circle"``, or ``"lobulated"`` (an ellipse whose border is
            modulated by a few random low-order harmonics, like a nodule).
        edge_softness: fraction of the radius, in ``[0, 1]``, over which the edge fades.
        texture: relative amplitude of the intensity texture inside the lesion (0 = flat).
        tint: RGB images only: per-channel weights of the change (default ``(1, 1, 1)``),
            for example ``(0.5, 0.9, 1.0)`` for a reddish dark haemorrhage on a fundus.

    Returns:
        ``lesioned``: uint8, same shape as ``image``; ``mask``: bool ``(H, W)``.

    Raises:
        ValueError: bad arguments, or a lesion that changes no pixel (too faint, or off-image).
    """
    img = np.asarray(image)
    if img.dtype != np.uint8 or not (img.ndim == 2 or (img.ndim == 3 and img.shape[2] == 3)):
        raise ValueError(f"image must be uint8 (H, W) or (H, W, 3), got {img.dtype} {img.shape}")
    if not 0.0 <= edge_softness <= 1.0:
        raise ValueError(f"edge_softness must be in [0, 1], got {edge_softness}")
    if texture < 0:
        raise ValueError(f"texture must be non-negative, got {texture}")
    if shape not in ("ellipse", "circle", "lobulated"):
        raise ValueError(f"shape must be 'ellipse', 'circle' or 'lobulated', got {shape!r}")
    r_row, r_col, angle = _semi_axes(radius, shape, rng)
    lobes = rng.uniform(0.0, 0.12, size=3) if shape == "lobulated" else np.zeros(3)
    phases = rng.uniform(0.0, 2 * np.pi, size=3)

    # Work in the lesion's bounding box only.
    h, w = img.shape[:2]
    reach = max(r_row, r_col) * (1.0 + lobes.sum()) + 2
    cy, cx = float(center[0]), float(center[1])
    top, bottom = max(0, int(np.floor(cy - reach))), min(h, int(np.ceil(cy + reach)) + 1)
    left, right = max(0, int(np.floor(cx - reach))), min(w, int(np.ceil(cx + reach)) + 1)
    if top >= bottom or left >= right:
        raise ValueError(f"lesion at {center} with radius {radius} lies outside the {h}x{w} image")
    yy, xx = np.mgrid[top:bottom, left:right].astype(np.float64)
    dy, dx = yy - cy, xx - cx
    cos, sin = np.cos(angle), np.sin(angle)
    u, v = cos * dy + sin * dx, -sin * dy + cos * dx
    rho = np.hypot(u / r_row, v / r_col)
    theta = np.arctan2(v, u)
    border = 1.0 + sum(
        a * np.cos((k + 2) * theta + p) for k, (a, p) in enumerate(zip(lobes, phases, strict=True))
    )
    rho = rho / border

    weight = _soft_edge(rho, edge_softness)
    field = rng.standard_normal(rho.shape)
    field = ndimage.gaussian_filter(field, sigma=max(1.0, min(r_row, r_col) / 3.0), mode="reflect")
    field /= field.std() or 1.0
    delta = float(contrast) * weight * np.maximum(0.0, 1.0 + texture * field)

    box = img[top:bottom, left:right].astype(np.float64)
    if img.ndim == 3:
        weights = np.ones(3) if tint is None else np.asarray(tint, np.float64)
        if weights.shape != (3,):
            raise ValueError(f"tint must have three weights (R, G, B), got {tint!r}")
        delta = delta[:, :, None] * weights
    elif tint is not None:
        raise ValueError("tint applies to RGB images only")
    changed_box = np.clip(np.rint(box + delta), 0, 255).astype(np.uint8)

    lesioned = img.copy()
    lesioned[top:bottom, left:right] = changed_box
    changed = lesioned != img
    if changed.ndim == 3:
        changed = changed.any(axis=2)
    if not changed.any():
        raise ValueError(
            f"the lesion (contrast {contrast}, radius {radius}) changed no pixel; "
            "raise the contrast or move it where the image is not saturated"
        )
    return lesioned, ndimage.binary_fill_holes(changed)


def body_mask(image: np.ndarray) -> np.ndarray:
    """The anatomy in an image: Otsu threshold, holes filled, largest connected component.

    ``image`` is uint8 ``(H, W)`` or ``(H, W, 3)`` (channels averaged); returns bool ``(H, W)``.
    """
    gray = _gray(image)
    if gray.min() == gray.max():
        return np.ones(gray.shape, bool)
    inside = ndimage.binary_fill_holes(gray > threshold_otsu(gray))
    return largest_component(inside)


def choose_lesion_center(
    region: np.ndarray, radius: float, rng: np.random.Generator, *, margin: float = 2.0
) -> tuple[int, int]:
    """Draw a lesion centre ``(row, col)`` uniformly among the pixels of ``region`` that are at
    least ``radius + margin`` pixels from its border, so the whole lesion lies in the region.

    Raises:
        ValueError: the region has no such pixel (too small for the lesion).
    """
    region = np.asarray(region, bool)
    depth = ndimage.distance_transform_edt(np.pad(region, 1))[1:-1, 1:-1]
    rows, cols = np.nonzero(depth >= radius + margin)
    if rows.size == 0:
        raise ValueError(
            f"no room for a lesion of radius {radius} (+{margin}) in the region "
            f"({int(region.sum())} pixels, deepest point {depth.max():.1f} px from its border)"
        )
    i = int(rng.integers(rows.size))
    return int(rows[i]), int(cols[i])


# --- helpers ---------------------------------------------------------------------------------


def _semi_axes(
    radius: float | tuple[float, float], shape: str, rng: np.random.Generator
) -> tuple[float, float, float]:
    if np.isscalar(radius):
        major = float(radius)  # type: ignore[arg-type]
        minor = major if shape == "circle" else major * rng.uniform(0.7, 1.0)
    else:
        major, minor = (float(r) for r in radius)  # type: ignore[union-attr]
    if not (major > 0 and minor > 0):
        raise ValueError(f"radius must be positive, got {radius!r}")
    angle = 0.0 if shape == "circle" else rng.uniform(0.0, np.pi)
    return major, minor, angle


def _soft_edge(rho: np.ndarray, softness: float) -> np.ndarray:
    """1 for ``rho <= 1 - softness``, half-cosine down to 0 at ``rho = 1``, 0 beyond."""
    weight = (rho < 1.0).astype(np.float64)
    if softness > 0:
        start = 1.0 - softness
        ramp = (rho > start) & (rho < 1.0)
        weight[ramp] = 0.5 * (1.0 + np.cos(np.pi * (rho[ramp] - start) / softness))
    return weight


def _gray(image: np.ndarray) -> np.ndarray:
    img = np.asarray(image)
    return img.mean(axis=2) if img.ndim == 3 else img.astype(np.float64)


def largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest 4-connected component of ``mask`` (bool, same shape); ``mask`` as bool when it
    has at most one component."""
    labels, n = ndimage.label(mask)
    if n <= 1:
        return mask.astype(bool)
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    return labels == int(np.argmax(sizes))
