"""Baseline models that need no weights: ``identity`` and ``classical``.

``identity`` returns its input: the floor every editing model must beat (and the perfect score
for "the background must not change" metrics).

``classical`` reads the instruction (:func:`~medibench.models.parse_instruction`) and answers it
with textbook image processing:

- perception: segment each named structure (rules in :mod:`medibench.models._segment`: Otsu /
  multi-Otsu thresholds, morphology, largest components, salient-blob detection) and blend its
  overlay colour into the input with :func:`medibench.metrics.blend_overlay`;
- modification (removal): detect the most significant compact blob (all of them for plurals) with
  :func:`~medibench.models._blobs.detect_anomalies` (a multi-scale Laplacian-of-Gaussian blob
  detector with a local annulus test), and fill it by Navier-Stokes inpainting.
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
    DetectorSettings,
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
        dilate_px: the detected region is grown by this many pixels before inpainting. The
            detector already grows each blob to its soft rim (a quarter of its contrast), and on
            the starter benchmark any further growth lowers PSNR and ROI SSIM, hence 0.
        min_significance: the anomaly detector reports no blob below this significance (mean
            contrast in local-noise units times the square root of the capped blob area; see
            :func:`~medibench.models._blobs.detect_anomalies`).
        relative_significance: for plurals, blobs below this fraction of the best one's
            significance are not reported.
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
        # perception: the overlay
        alpha: float = 0.6,
        default_color: Literal["red", "green", "blue"] = "red",
        # removal: the anomaly detector, then inpainting
        min_significance: float = 12.0, relative_significance: float = 0.4, dilate_px: int = 0,
        inpaint_radius: float = 5.0, inpaint_method: Literal["telea", "ns"] = "ns",
        # transformations: non-local means, unsharp mask, CLAHE, bilateral filter
        h_per_sigma: float = 1.0, search_window: int = 11,
        sharpen_sigma: float = 1.5, sharpen_amount: float = 1.5,
        clahe_clip_limit: float = 2.0, clahe_tiles: int = 8,
        bilateral_diameter: int = 9,
        bilateral_sigma_color: float = 40.0, bilateral_sigma_space: float = 4.0,
    ) -> None:  # fmt: skip
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if default_color not in OVERLAY_COLORS:
            raise ValueError(f"default_color must be one of {sorted(OVERLAY_COLORS)}")
        if inpaint_method not in ("telea", "ns"):
            raise ValueError(f"inpaint_method must be 'telea' or 'ns', got {inpaint_method!r}")
        if min_significance < 0:
            raise ValueError(f"min_significance must be non-negative, got {min_significance}")
        if not 0.0 <= relative_significance <= 1.0:
            raise ValueError(
                f"relative_significance must be in [0, 1], got {relative_significance}"
            )
        self.name = name
        self.alpha, self.default_color = alpha, default_color
        self.min_significance = min_significance
        self.relative_significance = relative_significance
        self.dilate_px = dilate_px
        self.inpaint_radius = inpaint_radius
        self.inpaint_method: Literal["telea", "ns"] = inpaint_method
        self.h_per_sigma, self.search_window = h_per_sigma, search_window
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
            to_gray(rgb), polarity=polarity_of(target), **self._detector_settings()
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

    def _detector_settings(self) -> DetectorSettings:
        return {
            "min_significance": self.min_significance,
            "relative_significance": self.relative_significance,
        }

    def _highlight(self, rgb: np.ndarray, intent: EditIntent) -> np.ndarray:
        gray = to_gray(rgb)
        colors = intent.colors or (self.default_color,) * len(intent.structures)
        detector = self._detector_settings()
        masks = [structure_mask(gray, phrase, **detector) for phrase in intent.structures]
        return blend_overlay(rgb, masks, list(colors), alpha=self.alpha)
