"""Calibration metrics of a classifier's probabilities: pure functions on arrays.

Every function takes ``probs`` (N x C, rows summing to 1) and integer ``labels`` (N). Top-label
metrics use the confidence ``conf_i = max_c probs[i, c]`` and the outcome ``correct_i =
[argmax_c probs[i, c] == labels[i]]`` (ties go to the lowest class index, as ``numpy.argmax``).

* :func:`accuracy`: ``mean(correct)``.
* :func:`expected_calibration_error`: ``sum_b (n_b / N) |acc_b - conf_b|`` over ``n_bins``
  equal-width bins, the edge policy named (``"right"``: ``(lo, hi]``, the default; ``"left"``;
  ``"torchmetrics"``; see :mod:`medibench.calibration._binning`).
* :func:`maximum_calibration_error`: ``max_b |acc_b - conf_b|`` over the non-empty bins
  (``variant="unweighted"``), or MVC-Bench's ``max_b (n_b / N) |acc_b - conf_b|``
  (``variant="mvcbench_count_weighted"``).
* :func:`adaptive_calibration_error`: ``variant="equal_mass"`` (the default, as torch-uncertainty:
  top-label, equal-mass bins, count-weighted), ``"netcal"`` (equal-width bins, the unweighted
  mean of ``|acc_b - conf_b|`` over the non-empty bins) or ``"mvcbench"`` (quantile bins from
  scikit-learn's ``KBinsDiscretizer``, count-weighted, with its quantile method declared).
* :func:`classwise_ece`: for each class ``c`` the ECE of the score ``probs[:, c]`` against the
  outcome ``labels == c`` (one-vs-rest), averaged over the C classes.
* :func:`brier_score`: ``mean_i sum_c (probs[i, c] - [labels[i] == c])^2`` (in [0, 2]).
* :func:`negative_log_likelihood`: ``mean_i -log p_i[labels[i]]``: from the logits by a stable
  log-softmax when they are given, else from the probabilities floored at ``eps``.
* :func:`smooth_ece`: Błasiok and Nakkiran's kernel ECE (:mod:`medibench.calibration._smooth`).

Empty bins: they contribute nothing to the ECE (weight 0), are left out of the MCE maximum and
of the netcal ACE mean, and show as ``NaN`` accuracy and confidence in :func:`reliability_bins`.
More bins than samples is an error.

Example:
    >>> import numpy as np
    >>> probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]])
    >>> labels = np.array([0, 1, 1, 1])
    >>> round(expected_calibration_error(probs, labels, n_bins=4), 6)  # (2 * .15 + 2 * .15) / 4
    0.15
    >>> round(brier_score(probs, labels), 6)
    0.25
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np

from medibench.calibration._binning import (
    BinSums,
    EdgePolicy,
    bin_index,
    bin_sums,
    check_bins,
    equal_mass_sums,
    uniform_edges,
)
from medibench.calibration._smooth import smooth_ece_fixed_point

__all__ = [
    "ACEVariant",
    "MCEVariant",
    "ReliabilityBins",
    "accuracy",
    "adaptive_calibration_error",
    "binned_reliability",
    "brier_score",
    "classwise_ece",
    "expected_calibration_error",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "reliability_bins",
    "smooth_ece",
    "top_label",
]

MCEVariant = Literal["unweighted", "mvcbench_count_weighted"]
ACEVariant = Literal["equal_mass", "netcal", "mvcbench"]


class ReliabilityBins(NamedTuple):
    """Per-bin data of a reliability diagram: ``edges`` (n + 1; the torchmetrics policy adds a
    last degenerate bin ``[1, 1]``), ``counts``, ``accuracy`` and ``confidence`` (``NaN`` where
    a bin is empty)."""

    edges: np.ndarray
    counts: np.ndarray
    accuracy: np.ndarray
    confidence: np.ndarray


def top_label(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(conf, correct)``: the top-label confidence and a float 0/1 outcome per sample."""
    probs = np.asarray(probs, dtype=np.float64)
    pred = probs.argmax(axis=1)
    conf = probs[np.arange(probs.shape[0]), pred]
    return conf, (pred == np.asarray(labels)).astype(np.float64)


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples whose top-label prediction is the label."""
    return float(top_label(probs, labels)[1].mean())


def expected_calibration_error(
    probs: np.ndarray, labels: np.ndarray, *, n_bins: int = 15, edges: EdgePolicy = "right"
) -> float:
    """Top-label ECE over ``n_bins`` equal-width bins (``sum_b |hits_b - conf_b| / N``)."""
    conf, correct = top_label(probs, labels)
    return ece_from_sums(binned_sums(conf, correct, n_bins, edges, "ECE"))


def maximum_calibration_error(
    probs: np.ndarray,
    labels: np.ndarray,
    *,
    n_bins: int = 15,
    edges: EdgePolicy = "right",
    variant: MCEVariant = "unweighted",
) -> float:
    """Top-label MCE: the largest ``|acc_b - conf_b|`` over the non-empty bins (or MVC-Bench's
    count-weighted ``(n_b / N) |acc_b - conf_b|``)."""
    conf, correct = top_label(probs, labels)
    return mce_from_sums(binned_sums(conf, correct, n_bins, edges, "MCE"), variant)


def adaptive_calibration_error(
    probs: np.ndarray,
    labels: np.ndarray,
    *,
    n_bins: int = 15,
    variant: ACEVariant = "equal_mass",
    edges: EdgePolicy = "right",
    quantile_method: str = "linear",
) -> float:
    """Top-label ACE (see the module doc for the three variants). ``edges`` applies to the
    netcal variant, ``quantile_method`` (a ``numpy.percentile`` method) to the MVC-Bench one."""
    conf, correct = top_label(probs, labels)
    return ace_from_top_label(
        conf, correct, n_bins, variant=variant, edges=edges, quantile_method=quantile_method
    )


def ace_from_top_label(
    conf: np.ndarray,
    correct: np.ndarray,
    n_bins: int,
    *,
    variant: ACEVariant = "equal_mass",
    edges: EdgePolicy = "right",
    quantile_method: str = "linear",
) -> float:
    """:func:`adaptive_calibration_error` from top-label confidences and outcomes."""
    check_bins(n_bins, conf.shape[0], "ACE")
    if variant == "equal_mass":
        return ece_from_sums(equal_mass_sums(conf, correct, n_bins))
    if variant == "netcal":
        return netcal_ace_from_sums(binned_sums(conf, correct, n_bins, edges, "ACE"))
    if variant == "mvcbench":
        from medibench.calibration._mvcbench_bins import mvcbench_ace

        return mvcbench_ace(conf, correct, n_bins, quantile_method=quantile_method)
    raise ValueError(f"ACE variant must be 'equal_mass', 'netcal' or 'mvcbench', got {variant!r}")


def classwise_ece(
    probs: np.ndarray, labels: np.ndarray, *, n_bins: int = 15, edges: EdgePolicy = "right"
) -> float:
    """Macro mean over the C classes of the one-vs-rest ECE of ``probs[:, c]``."""
    return float(np.mean(classwise_ece_per_class(probs, labels, n_bins=n_bins, edges=edges)))


def classwise_ece_per_class(
    probs: np.ndarray,
    labels: np.ndarray,
    *,
    n_bins: int = 15,
    edges: EdgePolicy = "right",
) -> np.ndarray:
    """The one-vs-rest ECE of every class (C values), all classes binned in one pass."""
    probs = np.asarray(probs, dtype=np.float64)
    n, c = probs.shape
    check_bins(n_bins, n, "class-wise ECE")
    index, slots = bin_index(probs.ravel(), n_bins, edges)
    key = index.reshape(n, c)
    key += np.arange(c) * slots
    conf_sum = np.bincount(key.ravel(), weights=probs.ravel(), minlength=slots * c)
    # only the label's own entry of each row is a positive
    hits = np.bincount(key[np.arange(n), labels], minlength=slots * c)
    gap = np.abs(hits - conf_sum).reshape(c, slots).sum(axis=1)
    return gap / n


def brier_score(probs: np.ndarray, labels: np.ndarray) -> float:
    """Multi-class Brier score: sum over classes, mean over samples."""
    return float(brier_per_sample(probs, labels).mean())


def brier_per_sample(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``sum_c (p_ic - y_ic)^2`` of each sample, as ``sum_c p_ic^2 - 2 p_iy + 1``."""
    probs = np.asarray(probs, dtype=np.float64)
    p_true = probs[np.arange(probs.shape[0]), labels]
    return np.einsum("ij,ij->i", probs, probs) - 2.0 * p_true + 1.0


def negative_log_likelihood(
    probs: np.ndarray,
    labels: np.ndarray,
    *,
    logits: np.ndarray | None = None,
    eps: float = 1e-12,
) -> float:
    """Mean ``-log p(label)``: exact from ``logits`` (log-softmax), else ``-log max(p, eps)``."""
    return float(nll_per_sample(probs, labels, logits=logits, eps=eps).mean())


def nll_per_sample(
    probs: np.ndarray,
    labels: np.ndarray,
    *,
    logits: np.ndarray | None = None,
    eps: float = 1e-12,
) -> np.ndarray:
    """``-log p_i(label_i)`` per sample (see :func:`negative_log_likelihood`)."""
    rows = np.arange(np.asarray(labels).shape[0])
    if logits is not None:
        z = np.asarray(logits, dtype=np.float64)
        top = z.max(axis=1)
        shifted = z - top[:, None]
        np.exp(shifted, out=shifted)
        lse = np.log(shifted.sum(axis=1)) + top
        return lse - z[rows, labels]
    if not 0.0 < eps < 1.0:
        raise ValueError(f"NLL: eps must be in (0, 1), got {eps!r}")
    p = np.asarray(probs, dtype=np.float64)[rows, labels]
    return -np.log(np.maximum(p, eps))


def smooth_ece(probs: np.ndarray, labels: np.ndarray, *, sigma: float | None = None) -> float:
    """Top-label smooth ECE at bandwidth ``sigma``, or at the fixed point ``sigma = smECE``."""
    conf, correct = top_label(probs, labels)
    return smooth_ece_fixed_point(conf, correct, sigma=sigma)[0]


def reliability_bins(
    probs: np.ndarray, labels: np.ndarray, *, n_bins: int = 15, edges: EdgePolicy = "right"
) -> ReliabilityBins:
    """Top-label per-bin counts, accuracies and mean confidences (for diagrams)."""
    conf, correct = top_label(probs, labels)
    return binned_reliability(conf, correct, n_bins=n_bins, edges=edges)


def binned_reliability(
    scores: np.ndarray, outcomes: np.ndarray, *, n_bins: int = 15, edges: EdgePolicy = "right"
) -> ReliabilityBins:
    """Per-bin counts, outcome rates and mean scores of any score in [0, 1] against a 0/1
    outcome (a top-label confidence and correctness, or one class's probability and
    ``labels == c``)."""
    scores = np.asarray(scores, dtype=np.float64)
    sums = binned_sums(scores, np.asarray(outcomes, dtype=np.float64), n_bins, edges, "bins")
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(sums.counts > 0, sums.hits / sums.counts, np.nan)
        mean_conf = np.where(sums.counts > 0, sums.conf / sums.counts, np.nan)
    e = uniform_edges(n_bins)
    if edges == "torchmetrics":
        e = np.append(e, 1.0)
    return ReliabilityBins(e, sums.counts.astype(np.int64), acc, mean_conf)


# --- cores shared with the protocols -------------------------------------------------------


def ece_from_sums(s: BinSums) -> float:
    """``sum_b |hits_b - conf_b| / total`` (= count-weighted ``|acc_b - conf_b|``)."""
    return float(np.abs(s.hits - s.conf).sum() / s.total)


def mce_from_sums(s: BinSums, variant: MCEVariant = "unweighted") -> float:
    """The MCE of binned sums (empty bins left out)."""
    full = s.counts > 0
    gap = np.abs(s.hits[full] - s.conf[full])
    if variant == "unweighted":
        return float((gap / s.counts[full]).max())
    if variant == "mvcbench_count_weighted":
        return float(gap.max() / s.total)
    raise ValueError(
        f"MCE variant must be 'unweighted' or 'mvcbench_count_weighted', got {variant!r}"
    )


def netcal_ace_from_sums(s: BinSums) -> float:
    """Unweighted mean of ``|acc_b - conf_b|`` over the non-empty bins."""
    full = s.counts > 0
    return float((np.abs(s.hits[full] - s.conf[full]) / s.counts[full]).mean())


def binned_sums(
    conf: np.ndarray, hits: np.ndarray, n_bins: int, edges: EdgePolicy, who: str
) -> BinSums:
    """Per-bin sums of equal-width bins (after refusing more bins than samples)."""
    check_bins(n_bins, conf.shape[0], who)
    index, slots = bin_index(conf, n_bins, edges)
    return bin_sums(index, slots, conf, hits)
