"""``paintbench@1``: PaintBench's per-problem scores (docs/protocols.md; its ``src/eval.py``).

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
cie76_0 ... cie76_10         the IoU at that one threshold (the per-threshold rows of the paper)
===========================  ======================================================================

``dE`` is computed in float32 as eval.py does (:mod:`medibench.metrics.color`, ``dtype``): a flat
region whose float64 dE lies within float32 rounding of an integer threshold would otherwise
flip across it (a whole region, so the score moves by 1/11 of it).

Images are decoded as eval.py does (PIL, ``convert("RGB")``). An output of another size than the
answer is resized with nearest neighbour to cover it and centre-cropped
(:func:`medibench.metrics.resize_cover`); the resize is recorded in the notes.

Aggregation as PaintBench's ``stats.py``: one output per problem; a problem without an output
scores 0 on every metric (``_zero_stats``: ``missing="zero"``, still counted as missing); per
task the mean over its problems, per category the mean of its task means (not the mean over its
problems), and the benchmark number the mean over categories (``macro_over=("metadata.category",
"task")``). CIs: percentile bootstrap with 10,000 resamples, seed 0, the values of a task in
PaintBench's order (mode, visual condition, problem id); plain for a task, hierarchical
(problems resampled within each task) for a category and for the benchmark
(:func:`medibench.report.hierarchical_bootstrap_ci`). The diagnostic ``preservation`` task
(answer = input) is scored and reported as a task of its own, outside every category, the micro
row and the benchmark mean (``outside=(("task", "preservation"),)``). As stats.py, two more
breakdowns: a row per mode of each task that has more than one (``metadata.task_mode``,
``"<task>/<mode>"``; plain bootstrap; ``preservation``'s modes included), and a row per visual
condition, the mean of the task means within it over the tasks outside ``preservation``
(hierarchical CI, tasks in name order).
Per-problem means over the thresholds are summed in eval.py's order, so they equal its values
bit for bit.

Known difference from eval.py: ``resize_cover`` must sample the pixels PIL's ``NEAREST`` does
(see its documentation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from medibench.datasets import SampleImages
from medibench.metrics import resize_cover
from medibench.metrics.paint_iou import paint_scores
from medibench.protocols import Aggregation, PaperReading, ProtocolResult, as_rgb
from medibench.samples import Sample

__all__ = ["PaintBenchProtocol"]


@dataclass(frozen=True)
class PaintBenchProtocol(PaperReading):
    """PaintBench's DeltaE76 IoU, edit and preservation accuracy (module docstring); files read
    as eval.py reads them (:class:`~medibench.protocols.PaperReading`: PIL, no mask)."""

    name: str = "paintbench"
    version: str = "1"
    description: str = (
        "PaintBench: DeltaE76 IoU, edit and preservation accuracy over thresholds 0..10; missing "
        "output = 0; macro over tasks within a category, then over categories"
    )
    metric_names: tuple[str, ...] = (
        "iou", "edit_accuracy", "preservation_accuracy", *(f"cie76_{t}" for t in range(11)),
    )  # fmt: skip
    thresholds: tuple[int, ...] = tuple(range(11))
    aggregation: Aggregation = Aggregation(
        k_modes=(("@1", "first"),),
        missing="zero",
        group_by=("metadata.category", "task", "metadata.task_mode", "metadata.visual_condition"),
        macro_over=("metadata.category", "task"),
        macro_within=(("metadata.visual_condition", ("task",)),),
        skip_empty=("metadata.task_mode", "metadata.visual_condition"),
        outside=(("task", "preservation"),),
        outside_also=("metadata.task_mode",),
        ci_resamples=10_000,
        ci_seed=0,
        ci_order=("metadata.mode", "metadata.visual_condition", "metadata.problem_id"),
    )

    def score(self, sample: Sample, images: SampleImages, prediction: np.ndarray) -> ProtocolResult:
        res = ProtocolResult()
        inp, answer = images.input, images.target
        problem = None
        if answer is None:
            problem = "the problem has no answer image"
        elif inp.shape != answer.shape:
            problem = f"input {inp.shape} and answer {answer.shape} differ in size"
        if problem or answer is None:
            res.missing(self.metric_names, problem or "the problem has no answer image")
            return res
        out = as_rgb(prediction, alpha="drop")  # convert("RGB"), as its evaluator reads
        if out.shape != answer.shape:
            h, w = answer.shape[:2]
            res.notes.append(
                f"output resized from {out.shape[1]}x{out.shape[0]} to cover {w}x{h} "
                "(nearest) and centre-cropped, as PaintBench does"
            )
            out = resize_cover(out, (h, w))
        scores = paint_scores(out, answer, inp, self.thresholds, dtype=np.float32)
        # eval.py's cie76_mean: a left-to-right sum over the thresholds, then / their count.
        n = len(self.thresholds)
        res.metrics["iou"] = sum(scores.iou.tolist()) / n
        res.metrics["edit_accuracy"] = sum(scores.edit_accuracy.tolist()) / n
        res.metrics["preservation_accuracy"] = sum(scores.preservation_accuracy.tolist()) / n
        for t, value in zip(self.thresholds, scores.iou, strict=True):
            res.metrics[f"cie76_{t}"] = float(value)
        return res
