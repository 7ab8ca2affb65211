"""Colour overlays of MieDB-100k perception tasks (docs/protocols.md): draw them and read them back.

A perception target is the input ``A`` blended with a pure colour ``O`` inside the label::

    B = (1 - a) * A + a * O      inside the mask (a = 0.6),   B = A outside.

Reading the label back from any image ``B`` (target or prediction) projects ``B - A`` on
``O - A`` per pixel::

    alpha = clip(<B - A, O - A> / (|O - A|^2 + 1e-6), 0, 1),     mask = alpha > threshold.

The projection is ill-posed where the input already has the overlay colour (``|O - A|`` small, for
instance red on endoscopy images): :func:`overlay_ill_conditioned` flags those pixels.

Example:
    >>> import numpy as np
    >>> base = np.full((4, 4, 3), 100, np.uint8)
    >>> mask = np.zeros((4, 4), bool); mask[1:3, 1:3] = True
    >>> blended = blend_overlay(base, mask, "red")
    >>> blended[1, 1].tolist(), blended[0, 0].tolist()
    ([193, 40, 40], [100, 100, 100])
    >>> bool((overlay_to_mask(blended, base, "red") == mask).all())
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from medibench.metrics._checks import as_bool_mask
from medibench.samples import OVERLAY_COLORS

if TYPE_CHECKING:  # annotations only (postponed): no runtime dependency on typing_extensions
    from typing_extensions import TypeIs

__all__ = ["blend_overlay", "overlay_to_mask", "overlay_ill_conditioned", "Color"]

#: A colour: a name in ``OVERLAY_COLORS`` ("red", "green", "blue") or an ``(R, G, B)`` tuple 0-255.
Color = str | tuple[int, int, int]

# Denominator guard of the official projection (docs/protocols.md); kept to reproduce it exactly.
_EPS = 1e-6


def blend_overlay(
    base: np.ndarray,
    mask: np.ndarray | Sequence[np.ndarray],
    color: Color | Sequence[Color],
    *,
    alpha: float = 0.6,
) -> np.ndarray:
    """Blend a pure colour into ``base`` inside ``mask``: ``B = (1 - alpha) * A + alpha * O``.

    Args:
        base: uint8 image, RGB ``(H, W, 3)`` or grayscale ``(H, W)`` / ``(H, W, 1)`` (replicated
            to three channels).
        mask: boolean (or strictly binary) ``(H, W)`` mask, or a list of masks for several classes.
        color: one colour for one mask, or a list of colours paired with the list of masks.
            A colour is a name of ``OVERLAY_COLORS`` or an RGB tuple.
        alpha: blend weight of the colour, in ``[0, 1]``.

    Returns:
        uint8 RGB ``(H, W, 3)``. The blend is computed in float64 and rounded with ``np.rint``
        (round half to even), so ``0.4 * 101 + 0.6 * 255 = 193.4 -> 193``. Pixels outside every
        mask are copied unchanged. With several masks each class is blended against ``base``
        (not against the previous blend); where masks overlap, the later one wins.
    """
    rgb = _as_rgb_uint8(base, "base")
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    masks, colors = _pair_masks_colors(mask, color, rgb.shape[:2])
    out = rgb.copy()
    base_f = rgb.astype(np.float64)
    for m, c in zip(masks, colors, strict=True):
        pixels = base_f[m]
        blended = (1.0 - alpha) * pixels + alpha * np.asarray(c, np.float64)
        out[m] = np.clip(np.rint(blended), 0, 255).astype(np.uint8)
    return out


def overlay_to_mask(
    blended: np.ndarray,
    base: np.ndarray,
    color: Color | Sequence[Color],
    *,
    threshold: float = 0.5,
) -> np.ndarray:
    """Recover the overlay mask from a blended image ``B`` and the input ``A`` (docs/protocols.md).

    ``alpha = clip(<B - A, O - A> / (|O - A|^2 + 1e-6), 0, 1)`` per pixel, the dot product over
    the three RGB channels in float64; ``mask = alpha > threshold``. With a list of colours the
    result is the union of the per-colour masks (multi-class samples).

    Exact recovery: with ``alpha = 0.6`` and rounding to integers (error <= 0.5 per channel) a
    masked pixel is recovered whenever ``|O - A| > 0.5 * sqrt(3) / (0.6 - threshold)`` (8.7 for
    the defaults); pixels outside the mask (``B == A``) always give 0. Pixels that already have
    the overlay colour cannot be recovered: see :func:`overlay_ill_conditioned`.

    Args:
        blended: uint8 (or float, same 0-255 scale) RGB ``(H, W, 3)`` image, target or prediction.
        base: the input image, RGB ``(H, W, 3)`` or grayscale ``(H, W)``.
        color: one colour or a list of colours (names or RGB tuples).
        threshold: alpha above which a pixel is in the mask.

    Returns:
        Boolean ``(H, W)`` mask.
    """
    b = _as_rgb_float(blended, "blended")
    a = _as_rgb_float(base, "base")
    if a.shape != b.shape:
        raise ValueError(
            f"blended and base must have the same spatial shape, got blended.shape="
            f"{np.asarray(blended).shape} and base.shape={np.asarray(base).shape}"
        )
    diff = b - a
    union = np.zeros(a.shape[:2], bool)
    for c in _colors(color):
        towards = np.asarray(c, np.float64) - a
        num = np.einsum("ijk,ijk->ij", diff, towards)
        den = np.einsum("ijk,ijk->ij", towards, towards) + _EPS
        union |= np.clip(num / den, 0.0, 1.0) > threshold
    return union


def overlay_ill_conditioned(
    base: np.ndarray, color: Color | Sequence[Color], *, min_norm: float = 10.0
) -> np.ndarray:
    """Flag pixels where the overlay projection is ill-conditioned: ``|O - A| < min_norm``.

    There the input is already (close to) the overlay colour, so the blend barely changes it and
    rounding decides the recovered alpha. The default 10 (0-255 units, Euclidean over RGB) is
    just above the 8.7 bound under which a blended pixel may be lost (see
    :func:`overlay_to_mask`). With a list of colours a pixel is flagged if any colour flags it.

    Returns:
        Boolean ``(H, W)`` map, True where the mask recovered there should not be trusted.
    """
    if not min_norm >= 0:
        raise ValueError(f"min_norm must be non-negative, got {min_norm}")
    a = _as_rgb_float(base, "base")
    flagged = np.zeros(a.shape[:2], bool)
    for c in _colors(color):
        towards = np.asarray(c, np.float64) - a
        flagged |= np.einsum("ijk,ijk->ij", towards, towards) < float(min_norm) ** 2
    return flagged


# --- helpers ---------------------------------------------------------------------------------


def _as_rgb_uint8(image: np.ndarray, name: str) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise ValueError(f"{name} must be a uint8 image, got dtype {image.dtype}")
    return _to_rgb(image, name)


def _as_rgb_float(image: np.ndarray, name: str) -> np.ndarray:
    image = np.asarray(image)
    if not (np.issubdtype(image.dtype, np.integer) or np.issubdtype(image.dtype, np.floating)):
        raise ValueError(f"{name} must be numeric, got dtype {image.dtype}")
    if np.issubdtype(image.dtype, np.floating) and not np.isfinite(image).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return _to_rgb(image, name).astype(np.float64)


def _to_rgb(image: np.ndarray, name: str) -> np.ndarray:
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim == 3 and image.shape[2] == 3:
        return image
    raise ValueError(f"{name} must be RGB (H, W, 3) or grayscale (H, W), got shape {image.shape}")


def _color(c: Color) -> tuple[int, int, int]:
    if isinstance(c, str):
        try:
            return OVERLAY_COLORS[c.lower()]
        except KeyError:
            raise ValueError(
                f"unknown colour name {c!r}; use one of {sorted(OVERLAY_COLORS)} or an RGB tuple"
            ) from None
    rgb = tuple(c)
    if len(rgb) != 3 or not all(0 <= v <= 255 for v in rgb):
        raise ValueError(f"a colour must be a name or an (R, G, B) tuple in 0-255, got {c!r}")
    return rgb


def _is_one_color(color: Color | Sequence[Color]) -> TypeIs[Color]:
    # A tuple of three numbers is one colour; a list of names or tuples is several.
    return isinstance(color, str) or (
        len(color) == 3 and all(np.isscalar(v) and not isinstance(v, str) for v in color)
    )


def _colors(color: Color | Sequence[Color]) -> list[tuple[int, int, int]]:
    if _is_one_color(color):
        return [_color(color)]
    colors = [_color(c) for c in color]
    if not colors:
        raise ValueError("color must be a colour or a non-empty list of colours")
    return colors


def _pair_masks_colors(
    mask: np.ndarray | Sequence[np.ndarray],
    color: Color | Sequence[Color],
    shape: tuple[int, int],
) -> tuple[list[np.ndarray], list[tuple[int, int, int]]]:
    several = isinstance(mask, (list, tuple))
    given = mask if isinstance(mask, (list, tuple)) else [np.asarray(mask)]
    masks = [as_bool_mask(m, "mask") for m in given]
    if several:
        if _is_one_color(color):
            raise ValueError("a list of masks needs a list of colours of the same length")
        colors = _colors(color)
        if len(colors) != len(masks):
            raise ValueError(
                f"got {len(masks)} masks but {len(colors)} colours; pair one colour per mask"
            )
    else:
        if not _is_one_color(color):
            raise ValueError("one mask takes one colour; pass a list of masks for several colours")
        colors = _colors(color)
    for m in masks:
        if m.shape != shape:
            raise ValueError(f"mask shape {m.shape} does not match the image's (H, W) {shape}")
    return masks, colors
