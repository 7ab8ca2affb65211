"""MVC-Bench's calibration metrics as its official code computes them, quirks included: the
variants a :class:`~.protocols.CalibrationProtocol` can name one by one (the two evaluators end
to end are :mod:`._mvcbench_paths`).

Read from ashshaksharifdeen/MVC-Bench: ``tools/metrics.py`` (``ECE``, ``MCE``, ``AdaptiveECE``,
``binary_calibration_error``, ``one_vs_rest_classwise_ece``, ``multiclass_brier_score``), the
dassl evaluator it ships (``Dassl.pytorch/dassl/evaluation/evaluator.py``: ECE with
``TEST.CALIBRATION_BINS = 20``, MCE and ACE with their default 10 bins, class-wise ECE with 20)
and ``trainers/classification/temp_scaling.py`` (the logged "NLL"). Each quirk, named:

* ``ece_drops_one``: ECE bins are ``[lo, hi)`` (``numpy.digitize(conf, edges) - 1``), so a
  confidence of exactly 1.0 lands in no bin's accuracy or mean confidence, yet
  ``numpy.histogram`` (whose last bin is closed) counts it in the last bin's weight.
* ``mce_count_weighted``: MCE is ``max_b (n_b / N) |acc_b - conf_b|``, not ``max_b |acc_b -
  conf_b|``; bins ``[lo, hi)`` with 1.0 in the last one (``numpy.digitize`` on the inner edges):
  :func:`medibench.calibration.metrics.maximum_calibration_error` with ``edges="left"`` and
  ``variant="mvcbench_count_weighted"``.
* ``ace_kbins_quantile``: "ACE" bins by ``KBinsDiscretizer(strategy="quantile")`` (edges are
  ``numpy.percentile`` of the confidences, edges closer than 1e-8 merged, ``searchsorted(...,
  side="right")`` on the inner edges) and is count-weighted; the bin count drops to the number
  of distinct confidences (at least 2), one distinct value is one bin. The percentile method is
  declared here because scikit-learn 1.9 changed its default from ``"linear"`` (the code's
  behaviour when it was written) to ``"averaged_inverted_cdf"``. All samples fit the edges
  (scikit-learn subsamples 200,000 at random beyond that, which no one can reproduce).
* ``classwise_ovr_present_classes``: class-wise ECE is one-vs-rest with bins ``(lo, hi]``
  (``digitize(..., right=True)``), averaged over the classes that have samples.
* ``nll_mean_true_logit``: the NLL logged by temperature scaling is ``-mean(logit[label])``,
  the mean negated true-class logit, not a log-likelihood (it is one only for log-probabilities).

All values are fractions; the official code logs them multiplied by 100.
"""

from __future__ import annotations

import numpy as np

from medibench.calibration._mvcbench_bins import (
    mvcbench_ace,
    mvcbench_ece,
    mvcbench_ece_from_sums,
    mvcbench_ece_index,
)

__all__ = [
    "mvcbench_ace",
    "mvcbench_classwise_ece",
    "mvcbench_ece",
    "mvcbench_ece_from_sums",
    "mvcbench_ece_index",
    "mvcbench_nll",
]


def mvcbench_classwise_ece(probs: np.ndarray, labels: np.ndarray, n_bins: int) -> float:
    """``one_vs_rest_classwise_ece`` + ``summarize_classwise_metric``: the one-vs-rest ECE with
    bins ``(lo, hi]`` (``digitize(..., right=True)``: the ``"right"`` policy), averaged over the
    classes that have samples."""
    from medibench.calibration.metrics import classwise_ece_per_class

    per_class = classwise_ece_per_class(probs, labels, n_bins=n_bins, edges="right")
    present = np.bincount(labels, minlength=probs.shape[1]) > 0
    return float(per_class[present].mean())


def mvcbench_nll(logits: np.ndarray, labels: np.ndarray) -> float:
    """``temp_scaling.py`` ``cross_entropy_loss``: ``-mean(logits[i, labels[i]])``."""
    return float(-np.mean(logits[np.arange(labels.shape[0]), labels]))
