"""Metrics of medibench: pure functions on numpy arrays (docs/protocols.md).

* Structure: :func:`ssim`, :func:`ssim_map`, :func:`masked_ssim` (MedEBench CP, medibench protocol),
  :func:`ssim_by_region`; their settings as one :class:`SSIMOptions` (``options=``).
* Fidelity: :func:`psnr`, :func:`masked_psnr`.
* Masks: :func:`dice`, :func:`iou`, :func:`miedb_dice`, :func:`perception_accuracy`.
* Overlays (perception tasks): :func:`blend_overlay`, :func:`overlay_to_mask`,
  :func:`overlay_ill_conditioned`.
* Colour (PaintBench): :func:`rgb_to_lab`, :func:`delta_e76`, :func:`paint_iou`.
* Feature sets (FID/KID, embedding similarity): :func:`frechet_distance`, :func:`kid`,
  :func:`cosine_similarity` (:mod:`medibench.metrics.features`).
* Text (MedGEN-Bench's text tier): :func:`bleu`, :func:`token_em_f1`, :func:`task_accuracy`,
  :func:`entity_metrics` (:mod:`medibench.metrics.text`).

Every function that compares intensities takes an explicit ``data_range``: it is never guessed.
"""

from medibench.metrics.color import delta_e76, rgb_to_lab
from medibench.metrics.features import cosine_similarity, frechet_distance, kid
from medibench.metrics.masked_ssim import masked_ssim, ssim_by_region
from medibench.metrics.overlap import dice, iou, miedb_dice, perception_accuracy
from medibench.metrics.overlay import blend_overlay, overlay_ill_conditioned, overlay_to_mask
from medibench.metrics.paint_iou import paint_iou, resize_cover
from medibench.metrics.psnr import masked_psnr, psnr
from medibench.metrics.ssim import SSIMOptions, ssim, ssim_map
from medibench.metrics.text import bleu, entity_metrics, task_accuracy, token_em_f1

__all__ = [
    "SSIMOptions",
    "blend_overlay",
    "bleu",
    "cosine_similarity",
    "delta_e76",
    "dice",
    "entity_metrics",
    "frechet_distance",
    "iou",
    "kid",
    "masked_psnr",
    "masked_ssim",
    "ssim_by_region",
    "miedb_dice",
    "overlay_ill_conditioned",
    "overlay_to_mask",
    "paint_iou",
    "perception_accuracy",
    "psnr",
    "resize_cover",
    "rgb_to_lab",
    "ssim",
    "ssim_map",
    "task_accuracy",
    "token_em_f1",
]
