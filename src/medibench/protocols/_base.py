"""What a protocol is: metric names + settings + resize policy + aggregation, with a version.

A protocol scores one prediction of one sample and returns metric values, with a reason for each
value it could not compute (never a 0 in its place) and notes for what it did to the inputs
(a resize, for instance). Its ``name`` and ``version`` go into every score record; changing what a
protocol computes means a new version. How records become table values (which of k outputs
counts, how a missing output counts, which groups and which macro averages) is part of the
protocol too: its :class:`Aggregation`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Literal, runtime_checkable
from typing import Protocol as _Protocol

import numpy as np

from medibench.datasets import SampleImages
from medibench.io import AlphaPolicy
from medibench.metrics import SSIMOptions
from medibench.protocols._prepare import read_pil_images, read_pil_rgb, read_rgba
from medibench.samples import Sample

__all__ = [
    "Aggregation",
    "CorrectedReading",
    "KReduction",
    "MEDIBENCH_SSIM",
    "NOT_JUDGED",
    "PSNR_CAP_DB",
    "PaperReading",
    "ProtocolDefaults",
    "ProtocolResult",
    "SKIMAGE_DEFAULT_SSIM",
    "ScoringProtocol",
    "with_defaults",
]

#: scikit-image's ``structural_similarity`` defaults on uint8 RGB (7x7 uniform window, sample
#: covariance, K1 .01, K2 .03, float64): what the papers' official scripts compute.
SKIMAGE_DEFAULT_SSIM = SSIMOptions(
    data_range=255,
    window="uniform",
    win_size=7,
    use_sample_covariance=True,
    k1=0.01,
    k2=0.03,
    channel_axis=-1,
    dtype=np.float64,
)

#: medibench's corrected SSIM on uint8 RGB: Gaussian window (sigma 1.5, 11x11), population
#: covariance (Wang et al. 2004), float32 path (within 1e-5 of float64, tested).
MEDIBENCH_SSIM = SSIMOptions(
    data_range=255,
    window="gaussian",
    sigma=1.5,
    k1=0.01,
    k2=0.03,
    channel_axis=-1,
    dtype=np.float32,
)

#: PSNR cap in the corrected protocols' means (MedGEN's code also reports 100 for MSE = 0).
PSNR_CAP_DB = 100.0

#: The reason recorded for a judge-based metric that no judge has filled yet.
NOT_JUDGED = "not judged (run `medibench judge` to fill it)"

KReduction = Literal["first", "best", "mean"]


@dataclass(frozen=True)
class Aggregation:
    """How a protocol's score records become table values.

    Attributes:
        k_modes: ``(label, reduction)`` pairs, one table column set each. ``"first"``: the
            first available output (lowest k with a prediction; MieDB's "@1"); ``"best"``: the
            best value over the available outputs, per metric (MieDB's "@k"); ``"mean"``: the
            mean over the available outputs.
        missing: how a sample with no output at all counts: ``"skip"`` (left out of the means,
            counted in ``n_missing``) or ``"zero"`` (every metric counts as 0, as MieDB's
            official scripts do; still counted in ``n_missing``).
        group_by: sample fields (or ``metadata.<key>``) to break the table down by; an overall
            row (``all``) is always added.
        macro_over: a hierarchy of fields for the named macro average of the overall row: the
            mean over groups of the first field of the means over groups of the next, and so on
            (``("region",)``: mean of region means; ``("metadata.category", "task")``: PaintBench).
        lower_is_better: metrics for which "best" means the smallest value.
        pass_rates: ``(name, metric, threshold)`` triples: the table gets ``name`` = the fraction
            of samples whose ``metric`` is at least ``threshold`` (at most, for metrics in
            ``lower_is_better``), e.g. MieDB's Perception Accuracy ``("perception_accuracy",
            "dice", 0.8)``. Samples without a value are left out (or count as failing under
            ``missing="zero"``), never silently passed.
        caps: ``{metric: cap}``: in means (and CIs), values above ``cap`` count as ``cap``
            (PSNR of identical images is ``inf`` in the records; one ``inf`` would make the mean
            ``inf`` and hide every other sample). The records keep the exact values.
        ci_resamples, ci_seed, ci_level: the percentile bootstrap CI every mean gets
            (hierarchical for the macro row: items resampled within each leaf group, as
            PaintBench does); ``ci_resamples=0`` turns CIs off.
        outside: ``(field, value)`` pairs: a sample whose ``field`` has ``value`` is reported
            only in its own group row of that field, and left out of every other group and of
            the overall rows (PaintBench's diagnostic task: ``(("task", "preservation"),)``).
        ci_order: sample fields (or ``metadata.<key>``) the values are sorted by before they
            are resampled (numbers numerically), so a CI is the one an official script computes
            from its own value order (PaintBench: mode, visual condition, problem id); ``()``:
            the order of the records.
        macro_within: ``(field, fields)`` pairs for ``group_by`` fields outside ``macro_over``:
            a group row of ``field`` is the macro mean over ``fields`` (the mean of the means
            of its groups of those fields), with the hierarchical CI (PaintBench's visual
            condition rows: ``(("metadata.visual_condition", ("task",)),)``, the mean of the task
            means within that condition).
        skip_empty: ``group_by`` fields whose empty value (a sample without the field) gets no
            row (PaintBench's mode rows exist only for tasks of more than one mode).
        outside_also: ``group_by`` fields whose rows the ``outside`` samples enter too
            (PaintBench reports the modes of its diagnostic task: ``("metadata.task_mode",)``).

    A group row of a ``macro_over`` field that has fields below it (PaintBench's categories,
    above its tasks) is the macro mean over those fields, with a hierarchical CI, as the
    overall macro row is.
    """

    k_modes: tuple[tuple[str, KReduction], ...] = (("@1", "first"),)
    missing: Literal["skip", "zero"] = "skip"
    group_by: tuple[str, ...] = ("perspective",)
    macro_over: tuple[str, ...] = ()
    lower_is_better: frozenset[str] = frozenset()
    pass_rates: tuple[tuple[str, str, float], ...] = ()
    caps: tuple[tuple[str, float], ...] = ()
    ci_resamples: int = 1000
    ci_seed: int = 42
    ci_level: float = 0.95
    outside: tuple[tuple[str, str], ...] = ()
    ci_order: tuple[str, ...] = ()
    macro_within: tuple[tuple[str, tuple[str, ...]], ...] = ()
    skip_empty: tuple[str, ...] = ()
    outside_also: tuple[str, ...] = ()


@dataclass
class ProtocolResult:
    """Metric values for one prediction; ``None`` values have their reason in ``reasons``."""

    metrics: dict[str, float | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Set by :meth:`fail`: the prediction itself failed (an empty answer), so the record is
    #: ``missing`` with this reason, not a row of ``None`` metrics.
    failure: str | None = None

    def fail(self, reason: str) -> None:
        """The prediction is a failed one (``reason``): counted as missing, never scored."""
        self.failure = reason

    @classmethod
    def for_images(cls, images: SampleImages) -> ProtocolResult:
        """An empty result that starts with what decoding did to the sample's files (its
        ``notes``: alpha composited, a mask binarised), so that every score records it."""
        return cls(notes=list(getattr(images, "notes", ())))

    def missing(self, names: str | Iterable[str], reason: str) -> None:
        """Metric ``names`` (one name, or several) are ``None`` with ``reason``."""
        for name in (names,) if isinstance(names, str) else names:
            self.metrics[name] = None
            self.reasons[name] = reason

    def attempt(self, name: str, compute: Callable[[], float]) -> None:
        """``metrics[name] = compute()``; a ``ValueError`` it raises (an empty region, an image
        under the SSIM window) becomes ``name``'s reason instead: never a 0, never a crash."""
        try:
            self.metrics[name] = compute()
        except ValueError as exc:
            self.missing(name, str(exc))

    @property
    def error(self) -> str | None:
        """All reasons as one string (``"cp: no ROI mask; dice: ..."``), or ``None``."""
        if not self.reasons:
            return None
        return "; ".join(f"{k}: {v}" for k, v in self.reasons.items())


@runtime_checkable
class ScoringProtocol(_Protocol):
    """A benchmark's scoring rules.

    Attributes:
        name, version: written into every score record.
        description: one line for ``medibench protocols``.
        metric_names: every metric the records carry (computed here or filled by a judge).
        judged_metrics: the subset filled by a judge stage; until then they are ``None`` with
            :data:`NOT_JUDGED` as the reason, never 0.
        aggregation: how records become table values.

    Besides :meth:`score`, the runner calls three hooks, declared here; a protocol that does
    not define one gets :class:`ProtocolDefaults`' (through :func:`with_defaults`, which the
    runner applies): :meth:`load_images` (the paper protocols read raw mask levels, for
    instance), :meth:`read_prediction` and :meth:`applicable_metrics`.
    """

    name: str
    version: str
    description: str
    metric_names: tuple[str, ...]
    judged_metrics: tuple[str, ...]
    aggregation: Aggregation

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        """Score ``prediction`` (uint8 RGB, any size) for ``sample`` given its decoded images."""
        ...

    def load_images(self, sample: Sample) -> SampleImages:
        """The sample's decoded files, as :meth:`score` wants them."""
        ...

    def read_prediction(self, path: str | os.PathLike) -> np.ndarray:
        """A model's output file, as :meth:`score` wants it."""
        ...

    def applicable_metrics(self, sample: Sample) -> tuple[str, ...] | None:
        """The metrics that describe ``sample``; ``None``: any of :attr:`metric_names`."""
        ...


class ProtocolDefaults:
    """The default hooks of :class:`ScoringProtocol`, for a protocol class to inherit."""

    judged_metrics: tuple[str, ...] = ()

    def load_images(self, sample: Sample) -> SampleImages:
        """:func:`medibench.datasets.load_images` (alpha on black, noted)."""
        from medibench.datasets import load_images

        return load_images(sample)

    def read_prediction(self, path: str | os.PathLike) -> np.ndarray:
        """``read_image(path, mode="rgb")``."""
        from medibench.io import read_image

        return read_image(path, mode="rgb")

    def applicable_metrics(self, sample: Sample) -> tuple[str, ...] | None:
        """``None``: no metric is declared inapplicable to a sample."""
        return None


class PaperReading(ProtocolDefaults):
    """The hooks of a paper protocol whose official code reads every file with PIL
    (:func:`~medibench.protocols.read_pil_images`, :func:`~medibench.protocols.read_pil_rgb`).

    Input and target: ``convert("RGB")`` (transparent pixels dropped, noted); the mask:
    ``convert(pil_mask_mode)`` raw levels, not binarised (``None``: the protocol reads no mask);
    the prediction: ``convert("RGB")``.
    """

    pil_mask_mode: ClassVar[str | None] = None

    def load_images(self, sample: Sample) -> SampleImages:
        """The sample's files as the official code reads them (PIL; see the class)."""
        return read_pil_images(sample, mask_mode=self.pil_mask_mode)

    def read_prediction(self, path: str | os.PathLike) -> np.ndarray:
        """The output as the official code reads it: ``Image.open(path).convert("RGB")``."""
        return read_pil_rgb(path)


@dataclass(frozen=True)
class CorrectedReading(ProtocolDefaults):
    """The hooks of a corrected protocol: files through :func:`medibench.datasets.load_images`
    (an RGBA image composited as :attr:`alpha` says, a non-binary mask binarised at half its
    maximum; both noted), the prediction read as RGBA so that ``score`` composites its alpha
    (:func:`~medibench.protocols.as_rgb`) by the same declared choice, noted.

    Attributes:
        alpha: how an RGBA image becomes RGB (noted whenever a pixel is not opaque).
    """

    alpha: AlphaPolicy = "black"

    def load_images(self, sample: Sample) -> SampleImages:
        """The sample's decoded files (see the class)."""
        from medibench.datasets import load_images

        return load_images(sample, alpha=self.alpha)

    def read_prediction(self, path: str | os.PathLike) -> np.ndarray:
        """The output as RGBA (:func:`~medibench.protocols.read_rgba`)."""
        return read_rgba(path)


def with_defaults(
    protocol: object, *, load_images: Callable[[Sample], SampleImages] | None = None
) -> ScoringProtocol:
    """``protocol`` itself when it defines every hook of :class:`ScoringProtocol`; otherwise a
    stand-in that forwards everything to it and adds :class:`ProtocolDefaults`' hooks for the
    ones it lacks (plug-in protocols need only ``score`` and the attributes). ``load_images``
    replaces the default ``load_images`` hook."""
    if isinstance(protocol, (ScoringProtocol, _WithDefaults)):
        return protocol  # type: ignore[return-value]
    return _WithDefaults(protocol, load_images)  # type: ignore[return-value]


class _WithDefaults(ProtocolDefaults):
    """A protocol with the default hooks it lacks; every other attribute is the protocol's."""

    def __init__(
        self, protocol: object, load_images: Callable[[Sample], SampleImages] | None = None
    ) -> None:
        self.__dict__.update(protocol=protocol, fallback=load_images)

    def __getattr__(self, name: str):
        if name.startswith("__") or "protocol" not in self.__dict__:  # copy and pickle
            raise AttributeError(name)
        return getattr(self.__dict__["protocol"], name)

    @property
    def judged_metrics(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(getattr(self.protocol, "judged_metrics", ()))

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        return self.protocol.score(sample, images, prediction)

    def load_images(self, sample: Sample) -> SampleImages:
        own = getattr(self.protocol, "load_images", None) or self.fallback
        return own(sample) if own else super().load_images(sample)

    def read_prediction(self, path: str | os.PathLike) -> np.ndarray:
        own = getattr(self.protocol, "read_prediction", None)
        return own(path) if own else super().read_prediction(path)

    def applicable_metrics(self, sample: Sample) -> tuple[str, ...] | None:
        own = getattr(self.protocol, "applicable_metrics", None)
        return tuple(own(sample)) if own else None
