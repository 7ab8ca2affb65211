"""``paintbench@1``: PaintBench's per-problem scores (SPEC section 5; PaintBench ``src/eval.py``).

With ``dE = DeltaE76(output, answer)`` (sRGB -> linear -> XYZ D65 -> CIE Lab, per pixel),
``edit = any(input != answer)`` over the channels, ``preservation = not edit``, and for each
threshold ``t`` in 0..10 ``correct = dE <= t``:

===========================  ======================================================================
metric                       definition (each the mean over the 11 thresholds)
===========================  ======================================================================
iou                          ``|correct & edit| / (|edit| + |preservation & not correct|)``
                             (1 when the denominator is 0), :func:`medibench.metrics.paint_iou`
edit_accuracy                ``|correct & edit| / |edit|`` (1 when there is no edit pixel)
preservation_accuracy        ``|correct & preservation| / |preservation|`` (1 when there is none)
===========================  ======================================================================

Images are decoded as eval.py does (PIL, ``convert("RGB")``). An output of another size than the
answer is resized with nearest neighbour to cover it and centre-cropped
(:func:`medibench.metrics.resize_cover`); the resize is recorded in the notes.

Aggregation as PaintBench's ``stats.py``: one output per problem; a problem without an output
scores 0 on every metric (``_zero_stats``: ``missing="zero"``, still counted as missing); per
task the mean over problems, per category the mean over its tasks, and the benchmark number the
mean over categories (``macro_over=("metadata.category", "task")``); its CI is
:func:`medibench.report.hierarchical_bootstrap_ci` (PaintBench: 10,000 resamples, seed 0).

Known differences from eval.py, below any printed digit: eval.py converts to Lab in float32,
medibench in float64, so a pixel whose dE lies within ~1e-5 of an integer threshold can fall on
the other side; and ``resize_cover`` must sample the pixels PIL's ``NEAREST`` does (see its
documentation).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medibench.datasets import SampleImages
from medibench.metrics import delta_e76, paint_iou, resize_cover
from medibench.protocols._base import Aggregation, ProtocolResult
from medibench.protocols.medgen import as_rgb, read_rgb
from medibench.samples import Sample

__all__ = ["PaintBenchProtocol"]


@dataclass(frozen=True)
class PaintBenchProtocol:
    """PaintBench's DeltaE76 IoU, edit and preservation accuracy (module docstring)."""

    name: str = "paintbench"
    version: str = "1"
    description: str = (
        "PaintBench: DeltaE76 IoU, edit and preservation accuracy over thresholds 0..10; missing "
        "output = 0; macro over tasks within a category, then over categories"
    )
    metric_names: tuple[str, ...] = ("iou", "edit_accuracy", "preservation_accuracy")
    judged_metrics: tuple[str, ...] = ()
    thresholds: tuple[int, ...] = tuple(range(11))
    aggregation: Aggregation = Aggregation(
        k_modes=(("@1", "first"),),
        missing="zero",
        group_by=("metadata.category", "task"),
        macro_over=("metadata.category", "task"),
    )

    def load_images(self, sample: Sample) -> SampleImages:
        """Input and answer decoded as eval.py does (PIL, ``convert("RGB")``); no mask."""
        return SampleImages(
            input=read_rgb(sample.input),
            target=None if sample.target is None else read_rgb(sample.target),
            mask=None,
        )

    def read_prediction(self, path: str | Path) -> np.ndarray:
        """The output decoded as eval.py does (PIL, ``convert("RGB")``)."""
        return read_rgb(path)

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        res = ProtocolResult()
        inp, answer = images.input, images.target
        problem = None
        if answer is None:
            problem = "the problem has no answer image"
        elif inp.shape != answer.shape:
            problem = f"input {inp.shape} and answer {answer.shape} differ in size"
        if problem:
            for m in self.metric_names:
                res.missing(m, problem)
            return res
        out = as_rgb(prediction)
        if out.shape != answer.shape:
            h, w = answer.shape[:2]
            res.notes.append(
                f"output resized from {out.shape[1]}x{out.shape[0]} to cover {w}x{h} "
                "(nearest) and centre-cropped, as PaintBench does"
            )
            out = resize_cover(out, (h, w))
        res.metrics["iou"] = paint_iou(out, answer, inp, thresholds=self.thresholds)
        edit = np.any(inp != answer, axis=-1)
        de = delta_e76(out, answer)
        res.metrics["edit_accuracy"] = _accuracy(de[edit], self.thresholds)
        res.metrics["preservation_accuracy"] = _accuracy(de[~edit], self.thresholds)
        return res


def _accuracy(errors: np.ndarray, thresholds: tuple[int, ...]) -> float:
    """Mean over thresholds of the fraction of ``errors`` <= t (1 for no pixel, as eval.py)."""
    if errors.size == 0:
        return 1.0
    # One sort, then |dE <= t| by binary search for every t.
    ordered = np.sort(errors)
    counts = np.searchsorted(ordered, np.asarray(thresholds, dtype=np.float64), side="right")
    return float(np.mean(counts / errors.size))
