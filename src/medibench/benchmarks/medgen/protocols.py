"""``medgen@code``: MedGEN-Bench as its code computes it, edges included; ``medgen@1``: the
corrected protocol beside it (docs/protocols.md, docs/medgen.md).

The protocol covers the three formats: an editing record is scored by the image tier below; a
VQA record by the text tier (:mod:`.answers`: BLEU, BERTScore, task accuracy, EM/F1, clinical
entities, RadGraph F1, the code's pass flags); a generation record by both (the image tier on
the image the model made, missing with that reason when it made none). A text prediction is a
``.txt`` file (with its ``.png`` beside it), read as an :class:`~.answers.Answer`; every row
(editing, VQA, generation) carries ``format=... task=... subtask=...`` as its first note. The
judge's without-ground-truth view fills the ``*_nogt`` metrics (the reference-free score of the
pairing-sensitivity test, :mod:`.controls`).

The image tier:

What the official ``util/metrics.py`` (``FR_IQA``) and ``eval.py`` do, and this protocol does:

* Images are decoded with PIL and ``convert("RGB")`` (the output and the ground truth; the
  input is read the same way but not scored). An output of another size than the ground truth is
  resized to it with PIL ``LANCZOS``; the resize is recorded in the notes. An image with
  transparent pixels has its alpha dropped, as ``convert("RGB")`` does (noted for the input and
  the ground truth).
* ``psnr``: ``10 log10(255^2 / MSE)`` over the 0-255 RGB values, **100.0 when MSE = 0** (the
  code's cap, so identical images do not give infinity; noted when it applies). The code takes
  the MSE in float32 (``np.mean`` of a float32 array); medibench takes it exactly, so values can
  differ in the 6th-7th significant digit.
* ``ssim``: both images converted to 8-bit grayscale with PIL ``convert("L")`` (ITU-R 601-2
  luma), then scikit-image's ``structural_similarity`` defaults with ``data_range=255``: 7x7
  uniform window, sample covariance, K1 0.01, K2 0.03, float64, border cropped from the mean.
* ``psnr_pass`` = 1.0 if ``psnr >= 28`` else 0.0 and ``ssim_pass`` = 1.0 if ``ssim >= 0.7``
  (the thresholds of the code's ``METRIC_THRESHOLDS``), so their means are the pass rates. The
  aggregation also declares the code's five pass rates (PSNR >= 28, SSIM >= 0.7, LPIPS <= 0.6,
  embedding similarity >= 0.7, judge overall >= 8) for the summary tables.
* ``lpips`` (AlexNet, 256x256) and ``embedding_similarity`` (Rad-DINO cosine in the code,
  MedImageInsight in the paper) need a feature extractor: the ``features`` setting
  (``--features lpips-alex:DIR --features rad-dino:DIR``, :mod:`medibench.analysis.feature_scores`)
  computes them on the resized output against the ground truth and names the extractor in the
  notes; without one they are ``None`` with that reason.
* The judge dimensions (1-10 each) are ``judged_metrics``, filled by a judge stage.

Where medibench differs from the code, on purpose:

* An output the official agent could not make is written as ``output_image: "Edit Error:
  ..."``; the dataset indexes it as a failed output, scored ``missing`` with that text as the
  reason (not as a file that cannot be read).
* An output image that cannot be opened: the code (3450b8e) logs a warning, leaves that record
  out of the batch's image lists, and writes the batch's scores back onto the records by list
  position, so every later record of the batch gets its successor's value (record 11 carries
  record 12's PSNR) and the batch's last record none; its means are over the images that did
  load, so they are right. medibench scores each record on its own files (the per-record values
  are the right ones; this bug is not copied) and records the failed sample as missing, left
  out of the means (``missing="skip"``) and counted.
* The code reads judge results with ``.get(key, 0)`` on keys the current rubric no longer
  produces (``content_accuracy``, ``relevance_and_responsiveness``, ``consistency``) and on
  ``overall_score``, and turns a failed metric batch into a list of 0.0: several metrics are
  silently 0. medibench never fills a value it did not compute: it is ``None`` with a reason.
* Non-finite values: the code drops them from its means; medibench never produces one here.

The text tier's edges (empty, whitespace and ``null`` responses, JSON-string report answers,
multiple-choice responses naming no option, integer and empty answers) are scored as the code
scores them (:mod:`.answers`).

``medgen@1`` (:class:`MedGenProtocol`) differs from ``medgen@code`` where the code is wrong:

* an empty, whitespace or ``null`` response is a failed prediction: its text metrics are
  ``None`` with that reason (counted as missing, never a score);
* a multiple-choice response naming none of the record's choices is wrong (0) and noted;
* a report answer stored as a JSON string is compared by its sections, as an object is;
  a record with an empty answer has no text metrics ("no reference text");
* ``psnr`` is taken in float64 and identical images give ``inf`` (stored; 100 dB in means,
  as the other corrected protocols cap it), not the code's 100.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from PIL import Image

from medibench.benchmarks.medgen.answers import TEXT_METRICS, Answer, read_answer, score_text
from medibench.benchmarks.medgen.predictions import read_answer_error
from medibench.datasets import SampleImages
from medibench.metrics import psnr, ssim
from medibench.protocols import (
    PSNR_CAP_DB,
    SKIMAGE_DEFAULT_SSIM,
    Aggregation,
    PaperReading,
    ProtocolResult,
    read_pil_rgb,
    resize_noted,
)
from medibench.protocols import as_rgb as _prepare_rgb
from medibench.samples import Sample

__all__ = ["MedGenCodeProtocol", "MedGenProtocol", "PSNR_PASS", "SSIM_PASS"]

#: Pass thresholds of the code's METRIC_THRESHOLDS (LPIPS passes at or below its threshold).
PSNR_PASS = 28.0
SSIM_PASS = 0.7
LPIPS_PASS = 0.6
EMBEDDING_PASS = 0.7
JUDGE_PASS = 8.0

_NEEDS_EXTRACTOR = (
    "needs a feature extractor: --features lpips-alex:DIR (LPIPS), rad-dino:DIR (embedding "
    "similarity), as in `medibench analyze features --protocol medgen@code`"
)
#: The judge's scores (its rubric's fields), filled by the judge stage.
_JUDGED = (
    "anatomical_accuracy",
    "clinical_finding_accuracy",
    "instruction_compliance",
    "cross_modal_consistency",
    "hallucination_control",
    "overall",
)
#: The same six from the judge's without-ground-truth view (the reference-free score).
_JUDGED_NOGT = tuple(f"{m}_nogt" for m in _JUDGED)
_IMAGE_METRICS = ("psnr", "ssim", "psnr_pass", "ssim_pass", "lpips", "embedding_similarity")
_SSIM = SKIMAGE_DEFAULT_SSIM.replace(channel_axis=None)


@dataclass(frozen=True)
class MedGenCodeProtocol(PaperReading):
    """MedGEN-Bench's image tier as its evaluation code computes it (module docstring); files
    read as the code reads them (:class:`~medibench.protocols.PaperReading`: PIL, no mask)."""

    name: str = "medgen"
    version: str = "code"
    description: str = (
        "MedGEN-Bench image tier as its code computes it: PIL LANCZOS resize to the ground truth, "
        "RGB PSNR capped at 100, grayscale SSIM (skimage defaults), pass flags PSNR>=28, SSIM>=0.7"
    )
    metric_names: tuple[str, ...] = (*_IMAGE_METRICS, *TEXT_METRICS, *_JUDGED, *_JUDGED_NOGT)
    judged_metrics: tuple[str, ...] = (*_JUDGED, *_JUDGED_NOGT)
    aggregation: Aggregation = Aggregation(
        k_modes=(("@1", "first"),),
        missing="skip",
        group_by=("task",),
        lower_is_better=frozenset({"lpips", "entity_hallucination_rate", "entity_omission_rate"}),
        pass_rates=(
            ("psnr_pass_rate", "psnr", PSNR_PASS),
            ("ssim_pass_rate", "ssim", SSIM_PASS),
            ("lpips_pass_rate", "lpips", LPIPS_PASS),
            ("embedding_pass_rate", "embedding_similarity", EMBEDDING_PASS),
            ("overall_pass_rate", "overall", JUDGE_PASS),
            ("overall_nogt_pass_rate", "overall_nogt", JUDGE_PASS),
            ("bleu_pass_rate", "bleu", 0.09),
            ("bertscore_pass_rate", "bertscore", 0.9),
            ("entity_hallucination_pass_rate", "entity_hallucination_rate", 0.1),
            ("entity_omission_pass_rate", "entity_omission_rate", 0.1),
            ("entity_factual_precision_pass_rate", "entity_factual_precision", 0.9),
        ),
    )
    #: Feature extractors ``NAME:PATH`` (:mod:`medibench.analysis.feature_scores`): LPIPS
    #: (``lpips-alex:DIR``: AlexNet at 256x256, as the code) and the embedding model
    #: (``rad-dino:DIR``, as the code); without them ``lpips`` and ``embedding_similarity``
    #: are None with that reason. Each value's notes name the extractor and its weights' sha256.
    features: tuple[str, ...] = ()
    #: How the text tier treats its edges (:func:`~.answers.score_text`); PSNR's 100 cap.
    _edges: ClassVar[Literal["code", "medibench"]] = "code"

    def read_prediction(self, path: str | os.PathLike) -> Any:
        """An editing output as the code reads it (PIL RGB); a text prediction (a ``.txt``
        file, or a ``.png`` with one beside it) as an :class:`~.answers.Answer`."""
        p = Path(path)
        if p.suffix == ".error":  # an answer the layout could not read (medgen/predictions.py)
            read_answer_error(p)
        if p.suffix.lower() == ".txt" or p.with_suffix(".txt").is_file():
            return read_answer(p, read_pil_rgb)
        return read_pil_rgb(p)

    def applicable_metrics(self, sample: Sample) -> tuple[str, ...] | None:
        """Editing samples: the image tier and the judge; VQA: the text tier and the judge;
        generation: all three."""
        fmt = sample.metadata.get("format")
        judged = (*_JUDGED, *_JUDGED_NOGT)
        if fmt == "VQA":
            return (*TEXT_METRICS, *judged)
        if fmt == "MultimodalGeneration":
            return None
        return (*_IMAGE_METRICS, *judged)

    def score(self, sample: Sample, images: SampleImages, prediction: Any) -> ProtocolResult:
        res = ProtocolResult.for_images(images)
        fmt = sample.metadata.get("format") or "ImageEditing"
        subtask = sample.metadata.get("subtask") or ""
        res.notes.insert(0, f"format={fmt} task={sample.task} subtask={subtask}")
        if not isinstance(prediction, Answer) and fmt == "ImageEditing":
            self._image_tier(images, prediction, res)
            return res
        # A text answer (VQA, generation; or an editing sample answered by a text + image model)
        answer = prediction if isinstance(prediction, Answer) else Answer("", prediction)
        if fmt != "ImageEditing":
            score_text(sample, answer.text, res, self._edges)
        if fmt != "VQA" and res.failure is None:
            if answer.image is None:
                res.missing(_IMAGE_METRICS, "the model made no image")
            else:
                self._image_tier(images, answer.image, res)
        return res

    def _image_tier(self, images: SampleImages, prediction: np.ndarray, res: ProtocolResult):
        target = images.target
        if target is None:
            res.missing(_IMAGE_METRICS, "the sample has no ground-truth image")
            return
        ref = _prepare_rgb(target, "ground truth", alpha="drop", notes=res.notes)
        out = _prepare_rgb(prediction, "prediction", alpha="drop", notes=res.notes)
        size = (ref.shape[1], ref.shape[0])
        how = "(PIL LANCZOS), as the code does"
        out = resize_noted(out, size, method="pil-lanczos", notes=res.notes, how=how)
        _feature_pairs(self.features, ref, out, res)
        value = psnr(ref, out, data_range=255)
        if np.isinf(value) and self._edges == "code":
            res.notes.append(f"MSE = 0: PSNR reported as {PSNR_CAP_DB:g}, the code's cap")
            value = PSNR_CAP_DB
        res.metrics["psnr"] = value
        res.metrics["psnr_pass"] = 1.0 if value >= PSNR_PASS else 0.0
        try:
            s = ssim(_grey(ref), _grey(out), options=_SSIM)
        except ValueError as exc:  # an image smaller than the 7x7 window
            res.missing("ssim", str(exc))
            res.missing("ssim_pass", "no SSIM")
        else:
            res.metrics["ssim"] = s
            res.metrics["ssim_pass"] = 1.0 if s >= SSIM_PASS else 0.0


@dataclass(frozen=True)
class MedGenProtocol(MedGenCodeProtocol):
    """``medgen@1``: the code's tiers with its defects corrected (module docstring)."""

    version: str = "1"
    description: str = (
        "MedGEN-Bench corrected: empty answers are failed predictions, a choice-less MC answer "
        "is wrong, JSON report answers by section, PSNR float64 with inf (100 dB in means)"
    )
    aggregation: Aggregation = dataclasses.replace(
        MedGenCodeProtocol.aggregation, caps=(("psnr", PSNR_CAP_DB),)
    )
    _edges: ClassVar[Literal["code", "medibench"]] = "medibench"


def _feature_pairs(specs: tuple[str, ...], ref: np.ndarray, out: np.ndarray, res) -> None:
    """LPIPS and embedding similarity by the configured extractors, else their reason."""
    from medibench.analysis.feature_scores import feature_roles, pair_scores

    values, notes = pair_scores(ref, out, feature_roles(specs))
    res.metrics.update(values)
    res.notes.extend(notes)
    res.missing([m for m in ("lpips", "embedding_similarity") if m not in values], _NEEDS_EXTRACTOR)


def _grey(rgb: np.ndarray) -> np.ndarray:
    """PIL ``convert("L")``, as the code turns images grey for SSIM."""
    return np.asarray(Image.fromarray(rgb).convert("L"))
