"""``native@1``: medibench's own corrected protocol for native-format datasets (the starter suite).

All images are compared as uint8 RGB with ``data_range=255``. SSIM is the Gaussian-window SSIM
(sigma 1.5, 11x11, K1 0.01, K2 0.03, population covariance: Wang et al. 2004), computed on the
float32 path (within 1e-5 of scikit-image's float64 values).

==========  =====================================================================================
metric      definition
==========  =====================================================================================
ssim        SSIM of prediction vs target, whole image (mean with scikit-image's border crop)
psnr        PSNR of prediction vs target, whole image (``inf`` when identical)
cp          contextual preservation: SSIM-map mean of prediction vs *input* over pixels outside
            the ROI (the background must not change)
cp_psnr     PSNR of prediction vs input over pixels outside the ROI
roi_ssim    SSIM-map mean of prediction vs target over pixels inside the ROI
dice        perception only: Dice of the mask recovered from the prediction's overlay colour(s)
            (alpha > 0.5 against the input) with the stored ROI mask; both empty = 1
==========  =====================================================================================

A prediction of another size than the input is resized to it (bilinear, OpenCV), and the
resize is recorded in the score's notes.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from medibench.metrics import (
    dice,
    masked_psnr,
    masked_ssim,
    overlay_to_mask,
    psnr,
    ssim,
    ssim_by_region,
)
from medibench.protocols._base import MEDIBENCH_SSIM, PSNR_CAP_DB, Aggregation, ProtocolResult
from medibench.samples import Perspective, Sample

__all__ = ["NativeProtocol"]


@dataclass(frozen=True)
class NativeProtocol:
    """medibench's corrected metrics for samples with input, target and ROI mask."""

    name: str = "native"
    version: str = "1"
    description: str = (
        "Gaussian SSIM and PSNR vs target; CP = SSIM-map mean outside the ROI vs input; "
        "ROI SSIM vs target; Dice of the overlay-recovered mask (perception)"
    )
    metric_names: tuple[str, ...] = ("ssim", "psnr", "cp", "cp_psnr", "roi_ssim", "dice")
    judged_metrics: tuple[str, ...] = ()
    aggregation: Aggregation = Aggregation(
        k_modes=(("@1", "first"),),
        missing="skip",
        group_by=("perspective", "task"),
        caps=(("psnr", PSNR_CAP_DB), ("cp_psnr", PSNR_CAP_DB)),
    )

    def score(self, sample: Sample, images, prediction: np.ndarray) -> ProtocolResult:
        res = ProtocolResult()
        pred = _as_rgb(prediction)
        inp = images.input
        h, w = inp.shape[:2]
        if pred.shape[:2] != (h, w):
            res.notes.append(
                f"prediction resized from {pred.shape[1]}x{pred.shape[0]} to {w}x{h} (bilinear)"
            )
            pred = cv2.resize(pred, (w, h), interpolation=cv2.INTER_LINEAR)

        target, mask = images.target, images.mask
        if target is None:
            for m in ("ssim", "psnr", "roi_ssim"):
                res.missing(m, "the sample has no target image")
        else:
            res.metrics["psnr"] = psnr(pred, target, data_range=255)
            if mask is None:
                res.metrics["ssim"] = ssim(pred, target, **MEDIBENCH_SSIM)
                res.missing("roi_ssim", "the sample has no ROI mask")
            elif not mask.any():
                res.metrics["ssim"] = ssim(pred, target, **MEDIBENCH_SSIM)
                res.missing("roi_ssim", "the ROI mask is empty")
            else:
                # One SSIM map gives both the full-image mean and the ROI mean.
                both = ssim_by_region(
                    pred, target, mask, regions=("full", "inside"), **MEDIBENCH_SSIM
                )
                res.metrics["ssim"], res.metrics["roi_ssim"] = both["full"], both["inside"]

        if mask is None:
            for m in ("cp", "cp_psnr"):
                res.missing(m, "the sample has no ROI mask")
        else:
            _masked(
                res, "cp", lambda: masked_ssim(pred, inp, mask, region="outside", **MEDIBENCH_SSIM)
            )
            _masked(
                res,
                "cp_psnr",
                lambda: masked_psnr(pred, inp, mask, data_range=255, region="outside"),
            )

        if sample.perspective == Perspective.perception:
            if mask is None:
                res.missing("dice", "perception sample without a ROI mask")
            elif not sample.overlay_color:
                res.missing("dice", "perception sample without an overlay_color")
            else:
                recovered = overlay_to_mask(pred, inp, list(sample.overlay_color))
                res.metrics["dice"] = dice(recovered, mask, empty=1.0)
        return res


def _masked(res: ProtocolResult, name: str, compute) -> None:
    # An empty region (ROI covering the whole image, say) is a reason, not a crash and not a 0.
    try:
        res.metrics[name] = compute()
    except ValueError as exc:
        res.missing(name, str(exc))


def _as_rgb(image: np.ndarray) -> np.ndarray:
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise ValueError(f"prediction must be uint8, got {arr.dtype}")
    if arr.ndim == 2:
        return np.repeat(arr[:, :, None], 3, axis=2)
    if arr.ndim == 3 and arr.shape[2] == 4:
        return arr[:, :, :3]
    if arr.ndim == 3 and arr.shape[2] == 3:
        return arr
    raise ValueError(f"prediction must be (H, W), (H, W, 3) or (H, W, 4), got {arr.shape}")
