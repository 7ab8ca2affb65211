"""Baseline models that need no weights: ``identity`` and ``classical``.

``identity`` returns its input: the floor every editing model must beat (and the perfect score
for "the background must not change" metrics).

``classical`` reads the instruction (:func:`~medibench.models.parse_instruction`) and answers it
with textbook image processing:

- perception: segment each named structure (rules in :mod:`medibench.models._segment`: Otsu /
  multi-Otsu thresholds, morphology, largest components, salient-blob detection) and blend its
  overlay colour into the input with :func:`medibench.metrics.blend_overlay`;
- modification (removal): detect the most salient compact blob (all of them for plurals) with
  :func:`~medibench.models._segment.detect_anomalies`, dilate it, and fill it by inpainting.
  When nothing stands out the input comes back unchanged: a decision, not a failure;
- transformation: non-local means denoising, unsharp-mask deblurring, CLAHE contrast
  enhancement, bilateral smoothing (:mod:`medibench.models._transform`).

Instructions outside the vocabulary raise :class:`UnsupportedInstructionError`. Nothing is
random: the seed is accepted and does not change the output. Gray-looking inputs stay gray-looking
for removal and transformations (perception overlays are coloured by definition).
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np

from medibench.metrics import blend_overlay
from medibench.models import _transform
from medibench.models._base import as_rgb_uint8
from medibench.models._instructions import EditIntent, parse_instruction
from medibench.models._segment import (
    detect_anomalies,
    polarity_of,
    structure_mask,
    to_gray,
    wants_all,
)
from medibench.samples import OVERLAY_COLORS

__all__ = ["ClassicalModel", "IdentityModel"]


class IdentityModel:
    """Returns a copy of the input image, whatever the instruction."""

    def __init__(self, *, name: str = "identity") -> None:
        self.name = name

    def edit(self, image: np.ndarray, instruction: str, *, seed: int) -> np.ndarray:
        return as_rgb_uint8(image).copy()


class ClassicalModel:
    """A classical image-processing baseline that follows the instruction it is given.

    Args:
        name: recorded model name.
        alpha: overlay blend weight for perception (MieDB-100k uses 0.6).
        default_color: overlay colour when a perception instruction names none.
        inpaint_radius: neighbourhood radius (px) of ``cv2.inpaint``.
        inpaint_method: ``"telea"`` or ``"ns"`` (Navier-Stokes).
        dilate_px: the detected region is grown by this many pixels before inpainting, so that
            its soft rim is filled too.
        k_high, k_low: hysteresis thresholds of the anomaly detector, in robust noise units.
        background_fraction: median-filter window of the anomaly detector, as a fraction of the
            shorter image side; blobs wider than about half of it are not found.
        h_per_sigma: non-local means strength per grey level of estimated noise sigma.
        search_window: non-local means search window (px, odd).
        sharpen_sigma, sharpen_amount: unsharp mask Gaussian sigma (px) and gain.
        clahe_clip_limit, clahe_tiles: CLAHE clip limit and tiles per side.
        bilateral_diameter, bilateral_sigma_color, bilateral_sigma_space: bilateral filter.
    """

    def __init__(
        self,
        *,
        name: str = "classical",
        alpha: float = 0.6,
        default_color: Literal["red", "green", "blue"] = "red",
        inpaint_radius: float = 5.0,
        inpaint_method: Literal["telea", "ns"] = "telea",
        dilate_px: int = 3,
        k_high: float = 4.0,
        k_low: float = 3.0,
        background_fraction: float = 0.3,
        h_per_sigma: float = 1.0,
        search_window: int = 11,
        sharpen_sigma: float = 1.5,
        sharpen_amount: float = 1.5,
        clahe_clip_limit: float = 2.0,
        clahe_tiles: int = 8,
        bilateral_diameter: int = 9,
        bilateral_sigma_color: float = 40.0,
        bilateral_sigma_space: float = 4.0,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if default_color not in OVERLAY_COLORS:
            raise ValueError(f"default_color must be one of {sorted(OVERLAY_COLORS)}")
        if inpaint_method not in ("telea", "ns"):
            raise ValueError(f"inpaint_method must be 'telea' or 'ns', got {inpaint_method!r}")
        if not 0.0 < background_fraction <= 1.0:
            raise ValueError(f"background_fraction must be in (0, 1], got {background_fraction}")
        self.name = name
        self.alpha = alpha
        self.default_color = default_color
        self.inpaint_radius = inpaint_radius
        self.inpaint_method: Literal["telea", "ns"] = inpaint_method
        self.dilate_px = dilate_px
        self.k_high, self.k_low = k_high, k_low
        self.background_fraction = background_fraction
        self.h_per_sigma = h_per_sigma
        self.search_window = search_window
        self.sharpen_sigma, self.sharpen_amount = sharpen_sigma, sharpen_amount
        self.clahe_clip_limit, self.clahe_tiles = clahe_clip_limit, clahe_tiles
        self.bilateral_diameter = bilateral_diameter
        self.bilateral_sigma_color = bilateral_sigma_color
        self.bilateral_sigma_space = bilateral_sigma_space

    def edit(self, image: np.ndarray, instruction: str, *, seed: int) -> np.ndarray:
        """Carry out ``instruction`` on ``image`` (uint8 RGB ``(H, W, 3)``); same size out.

        Raises:
            UnsupportedInstructionError: the instruction is outside the parser's vocabulary.
        """
        intent = parse_instruction(instruction)
        rgb = as_rgb_uint8(image)
        return self.apply(rgb, intent)

    def apply(self, rgb: np.ndarray, intent: EditIntent) -> np.ndarray:
        """Carry out an already parsed instruction."""
        if intent.action == "overlay":
            return self._highlight(rgb, intent)
        if intent.action == "remove":
            return self._remove(rgb, intent.target)
        if intent.action == "denoise":
            return _transform.nl_means_denoise(
                rgb, h_per_sigma=self.h_per_sigma, search_window=self.search_window
            )
        if intent.action == "deblur":
            return _transform.unsharp_mask(
                rgb, sigma=self.sharpen_sigma, amount=self.sharpen_amount
            )
        if intent.action == "enhance_contrast":
            return _transform.clahe_contrast(
                rgb, clip_limit=self.clahe_clip_limit, tiles=self.clahe_tiles
            )
        return _transform.bilateral_smooth(
            rgb,
            diameter=self.bilateral_diameter,
            sigma_color=self.bilateral_sigma_color,
            sigma_space=self.bilateral_sigma_space,
        )

    def removal_mask(self, rgb: np.ndarray, target: str) -> np.ndarray:
        """The pixels a removal of ``target`` would inpaint (dilated blob(s); maybe empty)."""
        blobs = detect_anomalies(
            to_gray(rgb),
            polarity=polarity_of(target),
            k_high=self.k_high,
            k_low=self.k_low,
            background_fraction=self.background_fraction,
        )
        mask = np.zeros(rgb.shape[:2], bool)
        for blob in blobs if wants_all(target) else blobs[:1]:
            mask |= blob
        if mask.any() and self.dilate_px > 0:
            size = 2 * self.dilate_px + 1
            disk = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
            mask = cv2.dilate(mask.astype(np.uint8), disk) > 0
        return mask

    def _remove(self, rgb: np.ndarray, target: str) -> np.ndarray:
        mask = self.removal_mask(rgb, target)
        if not mask.any():
            return rgb.copy()
        return _transform.inpaint_region(
            rgb, mask, radius=self.inpaint_radius, method=self.inpaint_method
        )

    def _highlight(self, rgb: np.ndarray, intent: EditIntent) -> np.ndarray:
        gray = to_gray(rgb)
        colors = intent.colors or (self.default_color,) * len(intent.structures)
        detector = {
            "k_high": self.k_high,
            "k_low": self.k_low,
            "background_fraction": self.background_fraction,
        }
        masks = [structure_mask(gray, phrase, **detector) for phrase in intent.structures]
        return blend_overlay(rgb, masks, list(colors), alpha=self.alpha)
