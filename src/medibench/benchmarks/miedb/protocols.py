"""MieDB-100k protocols (docs/protocols.md): ``miedb@paper`` (the shipped scripts) and ``miedb@1``.

Both score one output against the sample's input and target; the label of a perception sample is
read back from the target's colour overlay (``overlay_to_mask(target, input, colours)``, alpha
> 0.5, union over red, green and blue for ``note == "Multiclasses"``), since the benchmark ships
no label files. A prediction of another size than the input is resized to it with bilinear
interpolation (``cv2.INTER_LINEAR``, the official scripts' ``cv2.resize`` default), recorded in
the notes; the target is never resized: a target (or stored mask) of another size is a reason
naming the sample, both files and their sizes. Alpha: ``miedb@paper`` drops it as ``cv2.imread``
does (noted for input and target), ``miedb@1`` composites it on black (``alpha``, noted).
A stored mask with values other than 0 and its maximum is binarised at half its maximum, noted.

``miedb@paper``, as Raiiyf/MieDB-100k ``evaluation/DICE.py``, ``PSNR-SSIM-perception.py`` and
``PSNR-SSIM-transformation.py`` compute it (every file decoded with ``cv2.imread``, 3 channels):

==============  ==================================================================================
metric          definition
==============  ==================================================================================
dice            perception: ``miedb_dice`` (``(2|G&P| + 1e-6) / (|G| + |P| + 1e-6)``) of the
                overlay masks of target (G) and prediction (P), both read against the input
bg_psnr         perception, the shipped "background" PSNR: ``img[1 - G] = 255`` with a 0/1 array
                of shape (H, W) indexes *rows*, so rows 0 and 1 of target and prediction are set
                to 255 (row 0 only if G is not empty, row 1 only if G is not full) and the rest is
                untouched; then the full-image PSNR, data_range 255
bg_ssim         the same images, full-image SSIM with scikit-image's defaults (7x7 uniform window,
                sample covariance, K1 .01, K2 .03, data_range 255, float64, 3 border pixels
                cropped, channels averaged)
psnr, ssim      transformation: full-image PSNR and SSIM (same SSIM settings) vs the target
rubric          modification: filled by a judge (the official rubric is unpublished)
==============  ==================================================================================

Aggregation: ``@1`` = first available output, ``@3`` = best available output per metric; a
sample with no output counts 0 for every metric (the scripts append 0); means per perspective.
Perception accuracy (fraction of samples with DICE >= 0.8, a missing sample counting as failed)
is declared as the aggregation's pass rate ``perception_accuracy``.

Known divergence (degenerate samples only): the perception script writes the 255 rows into its
*loaded target* in place, and re-reads the label from that modified target for the next output.
When the label is empty (or covers the whole image), the rows set for the second and later
outputs may then differ from the first's. This protocol scores each output independently and
always reproduces the first output's behaviour; it notes the records where this can matter.

``miedb@1`` (corrected):

==========================  ======================================================================
metric                      definition
==========================  ======================================================================
dice                        perception: ``dice`` (both empty = 1) of the label (stored mask when
                            the sample has one, else the target overlay) and the prediction's
                            overlay mask
bg_psnr, bg_ssim            perception: PSNR and SSIM-map mean (Gaussian sigma 1.5, float32) of
                            prediction vs *input* over the pixels outside the label: the
                            background must not change
ill_conditioned_fraction    perception: fraction of the label-or-predicted pixels where the input
                            already has the overlay colour (``overlay_ill_conditioned``), so the
                            overlay reading there is unreliable (noted when > 0)
psnr, ssim                  transformation: vs target, Gaussian SSIM (float32), data_range 255
rubric                      modification: judged
==========================  ======================================================================

Aggregation as the paper's, but a sample without output is skipped (and counted), not zeroed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from medibench.benchmarks.miedb._steps import (
    at_input_size,
    imread_color,
    official_rows_bug,
    overlay_colours,
    perception_label,
    usable_target,
)
from medibench.datasets import SampleImages
from medibench.metrics import (
    dice,
    masked_psnr,
    masked_ssim,
    miedb_dice,
    overlay_ill_conditioned,
    overlay_to_mask,
    psnr,
    ssim,
)
from medibench.protocols import (
    MEDIBENCH_SSIM,
    PSNR_CAP_DB,
    SKIMAGE_DEFAULT_SSIM,
    Aggregation,
    CorrectedReading,
    ProtocolResult,
    as_rgb,
)
from medibench.samples import Perspective, Sample

__all__ = [
    "MieDBImages",
    "MieDBPaperProtocol",
    "MieDBProtocol",
    "PERCEPTION_TAU",
]

#: DICE threshold of MieDB-100k's perception accuracy.
PERCEPTION_TAU = 0.8

#: The scripts' aggregation: @1 = first output, @3 = best output per metric, a sample without
#: output counting 0, per perspective, and perception accuracy (DICE >= tau, missing = failed).
#: ``miedb@1`` takes it as it is but skips (and counts) a sample without output.
_PAPER_AGGREGATION = Aggregation(
    k_modes=(("@1", "first"), ("@3", "best")),
    missing="zero",
    group_by=("perspective",),
    pass_rates=(("perception_accuracy", "dice", PERCEPTION_TAU),),
)
_PER_PERSPECTIVE = {
    Perspective.perception: ("dice", "bg_psnr", "bg_ssim"),
    Perspective.transformation: ("psnr", "ssim"),
    Perspective.modification: ("rubric",),
}


@dataclass(frozen=True)
class MieDBImages(SampleImages):
    """A sample's pixels plus what every output of it shares (computed once per sample).

    Attributes:
        label: perception only: bool ``(H, W)`` label at the input's size, or ``None``.
        label_source: ``"stored mask"`` or ``"target overlay"`` (empty when no label).
        ill_conditioned: ``miedb@1`` perception only: ``overlay_ill_conditioned(input, colours)``.
    """

    label: np.ndarray | None = None
    label_source: str = ""
    ill_conditioned: np.ndarray | None = None


@dataclass(frozen=True)
class _MieDBBase:
    """What the two protocols share: the name, the judged rubric, which metrics apply to a
    sample."""

    name: str = "miedb"
    judged_metrics: tuple[str, ...] = ("rubric",)
    #: whether perception records carry ``ill_conditioned_fraction``.
    _flags_ill_conditioned: ClassVar[bool] = False

    def applicable_metrics(self, sample: Sample) -> tuple[str, ...]:
        """The metrics that describe ``sample`` (by perspective): only these count in means,
        are zero-filled for a missing output, or are sent to a judge."""
        names = _PER_PERSPECTIVE[sample.perspective]
        if sample.perspective is Perspective.perception and self._flags_ill_conditioned:
            return (*names, "ill_conditioned_fraction")
        return names


@dataclass(frozen=True)
class MieDBPaperProtocol(_MieDBBase):
    """MieDB-100k as the shipped evaluation scripts compute it (module docstring)."""

    version: str = "paper"
    description: str = (
        "MieDB-100k as the shipped scripts compute it: overlay DICE, 'background' PSNR/SSIM "
        "(rows 0-1 set to 255, full image), transformation PSNR/SSIM, skimage defaults, @1/@3"
    )
    metric_names: tuple[str, ...] = ("dice", "bg_psnr", "bg_ssim", "psnr", "ssim", "rubric")
    aggregation: Aggregation = _PAPER_AGGREGATION

    def load_images(self, sample: Sample) -> MieDBImages:
        """Input and target decoded as ``cv2.imread`` does (3 channels; RGB order here), and the
        perception label read from the target overlay. Transparent pixels are noted (the
        alpha is dropped, as ``cv2.imread`` does)."""
        notes: list[str] = []

        def read(role: str, path: str) -> np.ndarray:
            image = imread_color(path, "OpenCV could not decode it", keep_alpha=True)
            return as_rgb(image, f"{role} {path}", alpha="drop", notes=notes)

        inp = read("input", sample.input)
        target = None if sample.target is None else read("target", sample.target)
        label = None
        if (
            sample.perspective is Perspective.perception
            and target is not None
            and target.shape == inp.shape
            and sample.overlay_color
        ):
            label = overlay_to_mask(target, inp, list(sample.overlay_color))
        source = "target overlay" if label is not None else ""
        return MieDBImages(inp, target, None, tuple(notes), label=label, label_source=source)

    def read_prediction(self, path: str | Path) -> np.ndarray:
        """Decode like ``cv2.imread(path)`` (IMREAD_COLOR: 3 channels, 8 bits, alpha dropped),
        returned in RGB order. An undecodable file raises ``ImageReadError``; the official
        scripts count such an output as missing."""
        return imread_color(
            path,
            "OpenCV could not decode it (cv2.imread returns None: the official scripts count "
            "this output as missing)",
        )

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        res = ProtocolResult.for_images(images)
        inp, target = images.input, images.target
        if sample.perspective is Perspective.modification:
            return res  # rubric: judged
        names = _PER_PERSPECTIVE[sample.perspective]
        target = usable_target(res, names, sample, inp, target, official=True)
        if target is None:
            return res
        pred = as_rgb(prediction, "prediction", alpha="drop", notes=res.notes)
        pred = at_input_size(res, pred, inp)
        if sample.perspective is Perspective.transformation:
            res.metrics["psnr"] = psnr(target, pred, data_range=255)
            res.metrics["ssim"] = ssim(target, pred, options=SKIMAGE_DEFAULT_SSIM)
            return res
        colours = overlay_colours(res, sample, names)
        if not colours:
            return res
        label = getattr(images, "label", None)
        if label is None:
            label = overlay_to_mask(target, inp, colours)
        res.metrics["dice"] = miedb_dice(overlay_to_mask(pred, inp, colours), label)
        rows = official_rows_bug(label)
        if len(rows) < 2:
            res.notes.append(
                f"the target label is {'empty' if not label.any() else 'the whole image'}: only "
                f"row {rows[0]} is set to 255 (the official script, which re-reads the label "
                "from its modified target, may set both rows for its second and later outputs)"
            )
        t_rows, p_rows = target.copy(), pred.copy()
        t_rows[rows] = 255
        p_rows[rows] = 255
        res.metrics["bg_psnr"] = psnr(t_rows, p_rows, data_range=255)
        res.metrics["bg_ssim"] = ssim(t_rows, p_rows, options=SKIMAGE_DEFAULT_SSIM)
        return res


@dataclass(frozen=True)
class MieDBProtocol(_MieDBBase, CorrectedReading):
    """medibench's corrected MieDB-100k protocol (module docstring); ``alpha``: how an RGBA
    image becomes RGB (:class:`~medibench.protocols.CorrectedReading`)."""

    version: str = "1"
    description: str = (
        "MieDB-100k corrected: Dice vs stored (or overlay) label, background PSNR/SSIM vs input "
        "outside the label, ill-conditioned overlay pixels flagged, Gaussian SSIM, @1/@3"
    )
    metric_names: tuple[str, ...] = (
        "dice", "bg_psnr", "bg_ssim", "ill_conditioned_fraction", "psnr", "ssim", "rubric",
    )  # fmt: skip
    aggregation: Aggregation = replace(
        _PAPER_AGGREGATION,
        missing="skip",
        caps=(("bg_psnr", PSNR_CAP_DB), ("psnr", PSNR_CAP_DB)),
    )
    _flags_ill_conditioned: ClassVar[bool] = True

    def load_images(self, sample: Sample) -> MieDBImages:
        """Decoded images (:class:`~medibench.protocols.CorrectedReading`), the label (stored
        mask, else the target overlay) and the input's ill-conditioned overlay pixels."""
        base = super().load_images(sample)
        label, source, ill = None, "", None
        if sample.perspective is Perspective.perception and sample.overlay_color:
            colours = list(sample.overlay_color)
            ill = overlay_ill_conditioned(base.input, colours)
            label, source = perception_label(sample, base, colours)
        return MieDBImages(
            base.input,
            base.target,
            base.mask,
            base.notes,
            label=label,
            label_source=source,
            ill_conditioned=ill,
        )

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        res = ProtocolResult.for_images(images)
        inp, target = images.input, images.target
        if sample.perspective is Perspective.modification:
            return res  # rubric: judged
        pred = as_rgb(prediction, "prediction", alpha=self.alpha, notes=res.notes)
        if sample.perspective is Perspective.transformation:
            target = usable_target(res, ("psnr", "ssim"), sample, inp, target)
            if target is None:
                return res
            pred = at_input_size(res, pred, inp)
            res.metrics["psnr"] = psnr(pred, target, data_range=255)
            res.metrics["ssim"] = ssim(pred, target, options=MEDIBENCH_SSIM)
            return res
        names = self.applicable_metrics(sample)
        colours = overlay_colours(res, sample, names)
        if not colours:
            return res
        label = getattr(images, "label", None)
        source = getattr(images, "label_source", "")
        if label is None:
            label, source = perception_label(sample, images, colours)
        if label is None:
            res.missing(names, source)
            return res
        res.notes.append(f"label from the {source}")
        pred = at_input_size(res, pred, inp)
        predicted = overlay_to_mask(pred, inp, colours)
        res.metrics["dice"] = dice(predicted, label, empty=1.0)
        # A label covering the whole image leaves no background: a reason, not a 0.
        res.attempt(
            "bg_psnr", lambda: masked_psnr(pred, inp, label, data_range=255, region="outside")
        )
        res.attempt(
            "bg_ssim",
            lambda: masked_ssim(pred, inp, label, region="outside", options=MEDIBENCH_SSIM),
        )
        ill = getattr(images, "ill_conditioned", None)
        if ill is None:
            ill = overlay_ill_conditioned(inp, colours)
        at_stake = label | predicted
        n = int(np.count_nonzero(at_stake))
        fraction = int(np.count_nonzero(ill & at_stake)) / n if n else 0.0
        res.metrics["ill_conditioned_fraction"] = fraction
        if fraction > 0:
            res.notes.append(
                f"{fraction:.1%} of the label and predicted pixels already have the overlay "
                f"colour ({', '.join(colours)}) in the input: the overlay reading there is "
                "unreliable"
            )
        return res
