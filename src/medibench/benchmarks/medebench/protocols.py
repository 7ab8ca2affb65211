"""MedEBench protocols (docs/protocols.md): ``medebench@paper`` and ``medebench@1``.

``medebench@paper`` computes Contextual Preservation (CP) as the official script does
(mliuby/MedEBench ``src/eval_metrics/traditional_metrics_eval.py``, ``masked_ssim``):

1. read the input, prediction and mask with PIL: ``.convert("RGB")`` for the images,
   ``.convert("L")`` for the mask (its raw grey levels are kept, not binarised);
2. resize the prediction to the input size with ``Image.BICUBIC`` and the mask with
   ``Image.NEAREST`` (PIL);
3. in float32: ``x / 255 * (1 - mask / 255)`` for both input and prediction (the ROI is
   zero-filled; a grey mask level scales the pixel), then back to uint8 as ``ToPILImage`` does,
   ``* 255`` and truncation toward zero (so some unmasked values drop by 1);
4. ``skimage.metrics.structural_similarity(input, prediction, channel_axis=-1)`` with its
   defaults: 7x7 uniform window, sample covariance, data_range 255, float64, a 3-pixel border
   cropped from the mean (here :func:`medibench.metrics.ssim` with those settings).

A sample with any of its four files missing (input, ground truth, mask, prediction) is skipped
by the official script: here ``cp`` is ``None`` with that reason. What the official reading does
to unusual files is kept: an image with transparent pixels has its alpha dropped
(``convert("RGB")``; noted for the input and ground truth), and a mask with grey levels other
than 0 and 255 (a JPEG mask's halos) scales those pixels by ``1 - level/255`` instead of being
binarised. Zero-filled windows score 1, so this CP grows with the ROI's area whatever the model
does inside it.

``medebench@1`` is the corrected definition. The prediction (and a ground truth of another
size) is resized to the input size with PIL bicubic, as in the paper protocol, and the mask with
PIL nearest; each resize is recorded in the notes. The mask is binary where it is non-zero; a mask
with values other than 0 and its maximum (a JPEG mask) is binarised at half its maximum, and an
RGBA image (input, ground truth, prediction) is composited on black (``alpha``); both are noted.

==========  =====================================================================================
metric      definition (medebench@1)
==========  =====================================================================================
cp          SSIM-map mean of prediction vs *input* over the pixels outside the ROI (dilated by
            ``dilate`` px when set): Gaussian sigma 1.5 (11x11), K1 .01, K2 .03, population
            covariance, data_range 255, float32 path, no border crop
cp_psnr     PSNR of prediction vs input over the same pixels (``inf`` when unchanged)
roi_ssim    SSIM-map mean of prediction vs ground truth over the ROI (not dilated)
roi_psnr    PSNR of prediction vs ground truth over the ROI (not dilated)
==========  =====================================================================================

Both protocols declare ``ea`` and ``vq`` (GPT-4o judge, 0-1) as judged metrics, filled by the
judge stage, and carry ``fid``, a set-level metric that no single record can hold (``None``
with that reason): ``medibench analyze features --features inception:PATH --protocol
medebench@paper`` computes it per region and overall over the outputs against the ground-truth
set (:mod:`medibench.analysis.feature_scores`) and prints it in this protocol's summary.
Only ``<id>_0.png`` counts officially: the dataset's ``expected_k = 1`` keeps the other
outputs out, and the tables take the first output (``@1``), per sample, with a per-region
breakdown, the per-sample overall mean (micro) and the mean of region means (macro).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from medibench.datasets import SampleImages
from medibench.io import mask_with_note
from medibench.metrics import masked_psnr, masked_ssim, ssim
from medibench.protocols import (
    MEDIBENCH_SSIM,
    PSNR_CAP_DB,
    SKIMAGE_DEFAULT_SSIM,
    Aggregation,
    CorrectedReading,
    PaperReading,
    ProtocolResult,
    ResizeMethod,
    as_rgb,
    resize_noted,
)
from medibench.samples import Sample

__all__ = ["MedEBenchPaperProtocol", "MedEBenchProtocol"]

#: Why ``fid`` is ``None`` on every record.
FID_REASON = (
    "set-level metric: computed over all outputs against the ground-truth set, not per sample "
    "(medibench analyze features --features inception:PATH --protocol medebench@paper)"
)

_AGGREGATION = Aggregation(
    k_modes=(("@1", "first"),),
    missing="skip",
    group_by=("region",),
    macro_over=("region",),
    caps=(("cp_psnr", PSNR_CAP_DB), ("roi_psnr", PSNR_CAP_DB)),  # only medebench@1 has them
)


class _PerImageScores:
    """What both MedEBench protocols score the same way: ``_pixels`` fills the per-image
    metrics; ``fid`` is set-level, so every record carries its reason."""

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        res = ProtocolResult.for_images(images)
        self._pixels(images, prediction, res)
        res.missing("fid", FID_REASON)
        return res

    def _pixels(self, images: SampleImages, prediction: np.ndarray, res: ProtocolResult) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class MedEBenchPaperProtocol(_PerImageScores, PaperReading):
    """CP exactly as the official MedEBench script computes it (module docstring); files read
    as it reads them (:class:`~medibench.protocols.PaperReading`, the mask's raw grey levels)."""

    name: str = "medebench"
    version: str = "paper"
    description: str = (
        "official CP: PIL bicubic/nearest resize to the input, ROI zero-filled in float32 "
        "(x/255*(1-mask/255), *255, truncated), skimage SSIM defaults (7x7 uniform, sample "
        "covariance); EA/VQ judged; FID set-level"
    )
    metric_names: tuple[str, ...] = ("cp", "ea", "vq", "fid")
    judged_metrics: tuple[str, ...] = ("ea", "vq")
    aggregation: Aggregation = _AGGREGATION
    pil_mask_mode = "L"

    def _pixels(self, images: SampleImages, prediction: np.ndarray, res: ProtocolResult) -> None:
        absent = [
            what
            for what, value in (("ground-truth image", images.target), ("mask", images.mask))
            if value is None
        ]
        if absent:
            res.missing(
                "cp",
                "the official script skips samples with a missing file "
                f"(no {' and no '.join(absent)})",
            )
            return
        prev = as_rgb(images.input, "input", alpha="drop", notes=res.notes)
        h, w = prev.shape[:2]
        edited = as_rgb(prediction, "prediction", alpha="drop", notes=res.notes)
        edited = _resize(edited, (w, h), "bicubic", "prediction", res)
        mask = np.asarray(images.mask)
        if mask.dtype == bool:  # a binary mask from elsewhere: 0/255 levels, as a PNG stores it
            mask = mask.astype(np.uint8) * 255
        mask = _resize(_as_grey(mask), (w, h), "nearest", "mask", res)
        keep = np.float32(1.0) - mask.astype(np.float32) / np.float32(255)
        prev, edited = zero_fill_roi(prev, keep), zero_fill_roi(edited, keep)
        # an image under 7x7 is a reason: skimage raises too
        res.attempt("cp", lambda: ssim(prev, edited, options=SKIMAGE_DEFAULT_SSIM))


@dataclass(frozen=True)
class MedEBenchProtocol(_PerImageScores, CorrectedReading):
    """Corrected MedEBench metrics: CP outside the ROI vs input, ROI fidelity vs ground truth.

    Attributes:
        dilate: grow the ROI by this many pixels before taking its outside for ``cp`` and
            ``cp_psnr`` (keeps the edit's halo out of the context); 0 by default.
        alpha: how an RGBA image becomes RGB (:class:`~medibench.protocols.CorrectedReading`).
    """

    dilate: int = 0
    name: str = "medebench"
    version: str = "1"
    description: str = field(default="")
    metric_names: tuple[str, ...] = ("cp", "cp_psnr", "roi_ssim", "roi_psnr", "ea", "vq", "fid")
    judged_metrics: tuple[str, ...] = ("ea", "vq")
    aggregation: Aggregation = _AGGREGATION

    def __post_init__(self) -> None:
        if isinstance(self.dilate, bool) or not isinstance(self.dilate, int) or self.dilate < 0:
            raise ValueError(f"dilate must be a non-negative integer (pixels), got {self.dilate!r}")
        if not self.description:
            object.__setattr__(
                self,
                "description",
                "CP = Gaussian SSIM-map mean (sigma 1.5, float32) and PSNR vs input outside the "
                f"ROI (dilated by {self.dilate} px); ROI SSIM/PSNR vs ground truth; PIL bicubic "
                "resize to the input; EA/VQ judged; FID set-level",
            )

    def _pixels(self, images: SampleImages, prediction: np.ndarray, res: ProtocolResult) -> None:
        inp = as_rgb(images.input, "input", alpha=self.alpha, notes=res.notes)
        h, w = inp.shape[:2]
        pred = as_rgb(prediction, "prediction", alpha=self.alpha, notes=res.notes)
        pred = _resize(pred, (w, h), "bicubic", "prediction", res)
        if images.mask is None:
            res.missing(
                ("cp", "cp_psnr", "roi_ssim", "roi_psnr"),
                "the sample has no ROI mask (no previous_mask file)",
            )
            return
        mask = _resize(_as_binary(images.mask, res), (w, h), "nearest", "mask", res) > 0
        if self.dilate:
            res.notes.append(f"ROI dilated by {self.dilate} px for cp and cp_psnr")
        # An empty region (ROI covering the whole image) is a reason, never a 0.
        dilate = self.dilate
        res.attempt(
            "cp", lambda: masked_ssim(pred, inp, mask, dilate=dilate, options=MEDIBENCH_SSIM)
        )
        res.attempt("cp_psnr", lambda: masked_psnr(pred, inp, mask, data_range=255, dilate=dilate))
        if images.target is None:
            res.missing(
                ("roi_ssim", "roi_psnr"),
                "the sample has no ground-truth image (no changed_image file)",
            )
            return
        target = as_rgb(images.target, "target", alpha=self.alpha, notes=res.notes)
        target = _resize(target, (w, h), "bicubic", "target", res)
        res.attempt(
            "roi_ssim",
            lambda: masked_ssim(pred, target, mask, region="inside", options=MEDIBENCH_SSIM),
        )
        res.attempt(
            "roi_psnr", lambda: masked_psnr(pred, target, mask, data_range=255, region="inside")
        )


# --- helpers ---------------------------------------------------------------------------------


def _resize(
    image: np.ndarray, size: tuple[int, int], method: str, what: str, res: ProtocolResult
) -> np.ndarray:
    """``image`` resized to ``size`` = (width, height) with PIL, noted; unchanged if it fits."""
    pil: ResizeMethod = "pil-bicubic" if method == "bicubic" else "pil-nearest"
    return resize_noted(image, size, method=pil, notes=res.notes, how=f"({method}, PIL)", what=what)


def zero_fill_roi(image: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The paper protocol's named quirk: the ROI blacked out before a whole-image SSIM.

    The official CP script multiplies each image by ``1 - mask/255`` through torchvision's
    ``ToTensor`` / ``ToPILImage`` round trip: ``x/255 * keep`` in float32, then ``*255`` cast to
    uint8, which truncates toward zero (at grey mask levels some kept values drop by 1). SSIM of
    two images that are both 0 inside the ROI scores those windows 1, so CP rises with ROI area;
    ``medebench@1`` averages the SSIM map outside the ROI instead (docs/protocols.md).

    ``image``: uint8 ``(H, W, 3)``; ``keep``: float32 ``(H, W)``, ``1 - mask/255``.
    """
    scaled = image.astype(np.float32) / np.float32(255)
    scaled *= keep[:, :, None]
    scaled *= np.float32(255)
    return scaled.astype(np.uint8)  # float -> uint8 casts truncate toward zero, as .byte() does


def _as_grey(mask: np.ndarray) -> np.ndarray:
    if mask.ndim != 2 or mask.dtype != np.uint8:
        raise ValueError(f"mask must be uint8 (H, W) grey levels, got {mask.dtype} {mask.shape}")
    return mask


def _as_binary(mask: np.ndarray, res: ProtocolResult) -> np.ndarray:
    """A mask (bool, or grey levels: binarised at half the maximum when not binary, noted) as
    uint8 0/1, so that PIL can resize it."""
    arr = np.asarray(mask)
    if arr.ndim != 2:
        raise ValueError(f"mask must be (H, W), got shape {arr.shape}")
    binary, note = mask_with_note(arr, name="mask")
    if note and note not in res.notes:
        res.notes.append(note)
    return binary.astype(np.uint8)
