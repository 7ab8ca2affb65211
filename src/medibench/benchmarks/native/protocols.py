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
resize is recorded in the score's notes. A target or mask of another size than the input is not
resized (it is a data error): the metrics that need it are ``None`` with a reason naming the
sample, both files and their sizes. RGBA images (input, target, prediction) are composited on
black (``alpha``: the declared choice) and a mask with values other than 0 and its maximum is
binarised at half its maximum; both are recorded in the notes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from medibench.datasets import SampleImages, size_mismatch
from medibench.metrics import (
    dice,
    masked_psnr,
    masked_ssim,
    overlay_to_mask,
    psnr,
    ssim,
    ssim_by_region,
)
from medibench.protocols import (
    MEDIBENCH_SSIM,
    PSNR_CAP_DB,
    Aggregation,
    CorrectedReading,
    ProtocolResult,
    as_rgb,
    resize_noted,
)
from medibench.samples import Perspective, Sample

__all__ = ["NativeProtocol"]


@dataclass(frozen=True)
class NativeProtocol(CorrectedReading):
    """medibench's corrected metrics for samples with input, target and ROI mask; files read
    and alpha composited as :class:`~medibench.protocols.CorrectedReading` says."""

    name: str = "native"
    version: str = "1"
    description: str = (
        "Gaussian SSIM and PSNR vs target; CP = SSIM-map mean outside the ROI vs input; "
        "ROI SSIM vs target; Dice of the overlay-recovered mask (perception)"
    )
    metric_names: tuple[str, ...] = ("ssim", "psnr", "cp", "cp_psnr", "roi_ssim", "dice")
    aggregation: Aggregation = Aggregation(
        k_modes=(("@1", "first"),),
        missing="skip",
        group_by=("perspective", "task"),
        caps=(("psnr", PSNR_CAP_DB), ("cp_psnr", PSNR_CAP_DB)),
    )

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        res = ProtocolResult.for_images(images)
        pred = as_rgb(prediction, "prediction", alpha=self.alpha, notes=res.notes)
        inp = images.input
        h, w = inp.shape[:2]
        pred = resize_noted(pred, (w, h), method="cv2-bilinear", notes=res.notes, how="(bilinear)")

        target, mask = images.target, images.mask
        target_off = (
            None if target is None else size_mismatch(sample, "target", target, "input", inp)
        )
        mask_off = None if mask is None else size_mismatch(sample, "mask", mask, "input", inp)
        if mask_off:
            res.missing(("cp", "cp_psnr", "roi_ssim", "dice"), mask_off)
            mask = None
        if target is None or target_off:
            for m in ("ssim", "psnr", "roi_ssim"):
                if m not in res.reasons:
                    res.missing(m, target_off or "the sample has no target image")
        else:
            res.metrics["psnr"] = psnr(pred, target, data_range=255)
            if mask is None:
                res.metrics["ssim"] = ssim(pred, target, options=MEDIBENCH_SSIM)
                if "roi_ssim" not in res.reasons:
                    res.missing("roi_ssim", "the sample has no ROI mask")
            elif not mask.any():
                res.metrics["ssim"] = ssim(pred, target, options=MEDIBENCH_SSIM)
                res.missing("roi_ssim", "the ROI mask is empty")
            else:
                # One SSIM map gives both the full-image mean and the ROI mean.
                both = ssim_by_region(
                    pred, target, mask, regions=("full", "inside"), options=MEDIBENCH_SSIM
                )
                res.metrics["ssim"], res.metrics["roi_ssim"] = both["full"], both["inside"]

        if mask is None:
            for m in ("cp", "cp_psnr"):
                if m not in res.reasons:
                    res.missing(m, "the sample has no ROI mask")
        else:  # an empty region (ROI covering the whole image) is a reason, not a 0
            res.attempt(
                "cp",
                lambda: masked_ssim(pred, inp, mask, region="outside", options=MEDIBENCH_SSIM),
            )
            res.attempt(
                "cp_psnr", lambda: masked_psnr(pred, inp, mask, data_range=255, region="outside")
            )

        if sample.perspective == Perspective.perception and "dice" not in res.reasons:
            if mask is None:
                res.missing("dice", "perception sample without a ROI mask")
            elif not sample.overlay_color:
                res.missing("dice", "perception sample without an overlay_color")
            else:
                recovered = overlay_to_mask(pred, inp, list(sample.overlay_color))
                res.metrics["dice"] = dice(recovered, mask, empty=1.0)
        return res
