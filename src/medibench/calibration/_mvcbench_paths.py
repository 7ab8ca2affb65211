"""MVC-Bench's two evaluators, each end to end, as its code computes them (values are fractions;
the code logs them x100).

* **The VL path** (``trainers/classification/base_learner.py`` ``test()`` feeding
  ``evaluators/vl_evaluator.py`` over ``tools/metrics.py``): the trainer softmaxes the logits
  (``scipy.special.softmax``) and hands the probabilities to ``evaluate``, which passes them
  through ``ensure_probability_matrix`` (rows that look like probabilities, non-negative
  within 1e-8 and summing to 1 within ``atol = rtol = 1e-4``, are clipped to [0, 1] and
  **divided by their sum**, so a confidence one ulp under a bin edge can cross it; anything
  else is softmaxed as logits); every metric at one bin count (``ECE_BINS``): ECE ``[lo, hi)``
  with 1.0 weighted but in no bin, count-weighted MCE, ``AdaptiveECE`` with its bin count cut
  to the number of distinct confidences. ``multiclass_brier_score``,
  ``top_label_classwise_ece`` and ``one_vs_rest_classwise_ece`` each call
  ``ensure_probability_matrix`` **again** on the renormalised rows: the Brier score and the
  class-wise tables (top-label confidences, predictions and one-vs-rest scores) are taken on
  rows divided by their sum a second time, whose values can sit one ulp from the first ones,
  across a bin edge (:func:`vl_probabilities_twice`).
* **The patched Dassl path** (``Dassl.pytorch/dassl/evaluation/evaluator.py``, the evaluator
  MVC-Bench's ``train.py`` runs): ``logits_to_probs`` (the same test with ``atol = rtol = 1e-4``
  and -1e-7, rows clamped to [0, 1] but **not** renormalised; else softmax); ``ECE_Loss`` over
  ``(lo, hi]`` bins whose edges are ``torch.linspace`` in **float32** (at
  ``TEST.CALIBRATION_BINS`` = 20); ``MCE`` and ``AdaptiveECE`` at their default 10 bins, the
  latter **not** cut to the distinct confidences (scikit-learn's KBinsDiscretizer merges edges
  closer than 1e-8 itself); Brier and class-wise tables at 20 bins.

Both report the Brier score and its ``/ C`` form, and two class-wise ECE tables summarised over
the classes that have samples (macro, sample-weighted, max): top-label per true class
(``toplabel_ece_*``: the top-label confidence against correctness among that class's samples)
and one-vs-rest (``ovr_ece_*``: the class's probability against ``label == c`` over all
samples), both with bins ``(lo, hi]`` (``digitize(..., right=True)`` on the inner edges), and
the class-wise Brier (mean per-sample Brier per true class, macro over present classes).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from medibench.calibration._mvcbench_bins import _count_weighted_sum, kbins_ace, mvcbench_ece
from medibench.calibration.metrics import top_label

__all__ = [
    "EXTRA_METRICS",
    "dassl_ece",
    "dassl_probabilities",
    "float32_linspace_edges",
    "kbins_ace",
    "path_metrics",
    "vl_probabilities",
    "vl_probabilities_twice",
]

Path = Literal["vl", "dassl"]
#: The values the two paths report besides medibench's common ones.
EXTRA_METRICS = (
    "brier_norm",
    "toplabel_ece_macro",
    "toplabel_ece_weighted",
    "toplabel_ece_max",
    "ovr_ece_macro",
    "ovr_ece_weighted",
    "ovr_ece_max",
    "classwise_brier_macro",
)


def vl_probabilities(scores: np.ndarray) -> np.ndarray:
    """``ensure_probability_matrix``: probability-like rows clipped and renormalised by their
    sum; other scores softmaxed (module docstring)."""
    s = np.asarray(scores, dtype=np.float64)
    if _looks_like_probabilities(s, floor=-1e-8):
        p = np.clip(s, 0.0, 1.0)
        return p / np.clip(p.sum(axis=1, keepdims=True), 1e-12, None)
    return _softmax(s)


def vl_probabilities_twice(
    scores: np.ndarray, *, from_logits: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The VL path's two readings of the saved ``scores`` (N x C): ``(first, second)``, the
    rows ``evaluate`` bins (the trainer's softmax of the logits, or the probabilities as
    saved, through :func:`vl_probabilities`) and those its Brier and class-wise calls bin
    (``first`` through :func:`vl_probabilities` again: every row divided by its sum once
    more)."""
    s = _softmax(np.asarray(scores, dtype=np.float64)) if from_logits else scores
    first = vl_probabilities(s)
    return first, vl_probabilities(first)


def dassl_probabilities(scores: np.ndarray) -> np.ndarray:
    """``logits_to_probs``: probability-like rows clamped to [0, 1] (not renormalised); other
    scores softmaxed (module docstring)."""
    s = np.asarray(scores, dtype=np.float64)
    if _looks_like_probabilities(s, floor=-1e-7):
        return np.clip(s, 0.0, 1.0)
    return _softmax(s)


def float32_linspace_edges(n_bins: int) -> np.ndarray:
    """``torch.linspace(0, 1, n_bins + 1)`` (float32) as float64: the step in float32, each
    edge ``step * i`` from 0 (first half) or ``1 - step * (n - i)`` (second half), rounded once
    to float32 as torch's kernel does."""
    steps = n_bins + 1
    step = float(np.float32(1.0) / np.float32(n_bins))
    i = np.arange(steps, dtype=np.float64)
    upper = i >= steps // 2
    exact = np.where(upper, 1.0 - step * (n_bins - i), step * i)
    return exact.astype(np.float32).astype(np.float64)


def dassl_ece(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """``ECE_Loss``: bins ``(lo, hi]`` with float32 edges; a confidence of 0 is in no bin; the
    weight of a bin is its count over all samples."""
    edges = float32_linspace_edges(n_bins)
    index = np.searchsorted(edges, conf, side="left") - 1  # edges[j] < conf <= edges[j + 1]
    inside = (index >= 0) & (index < n_bins)
    return _count_weighted_sum(index[inside], n_bins, conf[inside], correct[inside], conf.size)


def path_metrics(
    path: Path,
    scores: np.ndarray,
    labels: np.ndarray,
    *,
    from_logits: bool,
    ece_bins: int,
    mce_bins: int,
    ace_bins: int,
    classwise_bins: int,
    quantile_method: str = "linear",
) -> dict[str, float]:
    """``accuracy``, ``ece``, ``mce``, ``ace``, ``classwise_ece`` (= ``ovr_ece_macro``),
    ``brier`` and :data:`EXTRA_METRICS` of one path from the saved ``scores`` (logits, with
    ``from_logits``, or probabilities, as the trainer hands them to the evaluator)."""
    vl = path == "vl"
    if vl:
        probs, again = vl_probabilities_twice(scores, from_logits=from_logits)
    else:
        probs = again = dassl_probabilities(scores)
    conf, correct = top_label(probs, labels)
    out = {
        "accuracy": float(correct.mean()),
        "ece": mvcbench_ece(conf, correct, ece_bins) if vl else dassl_ece(conf, correct, ece_bins),
        "mce": _left_count_weighted_max(conf, correct, mce_bins),
        "ace": kbins_ace(
            conf, correct, ace_bins, cut_to_distinct=vl, clip=vl, quantile_method=quantile_method
        ),
    }
    per_sample = np.sum((again - np.eye(again.shape[1])[labels]) ** 2, axis=1)
    out["brier"] = float(per_sample.mean())
    out["brier_norm"] = out["brier"] / again.shape[1]
    out.update(_classwise(again, labels, per_sample, classwise_bins, clip=vl))
    out["classwise_ece"] = out["ovr_ece_macro"]
    return out


# -- helpers ----------------------------------------------------------------------------------
def _looks_like_probabilities(s: np.ndarray, *, floor: float) -> bool:
    sums = s.sum(axis=1)
    return bool(np.all(s >= floor) and np.all(np.abs(sums - 1.0) <= 1e-4 + 1e-4 * 1.0))


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / np.clip(e.sum(axis=1, keepdims=True), 1e-12, None)


def _left_count_weighted_max(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """``MCE``: ``digitize`` on the inner edges (``[lo, hi)``, 1.0 in the last bin), the
    largest ``n_b / N |acc_b - conf_b|``."""
    index = np.digitize(conf, np.linspace(0, 1, n_bins + 1)[1:-1])
    gap = np.abs(
        np.bincount(index, weights=correct, minlength=n_bins)
        - np.bincount(index, weights=conf, minlength=n_bins)
    )
    return float(gap.max() / conf.size)


def _binary_ece(scores: np.ndarray, targets: np.ndarray, n_bins: int, clip: bool) -> float:
    """``binary_calibration_error``: bins ``(lo, hi]`` by ``digitize(right=True)``."""
    s = np.clip(scores, 0.0, 1.0) if clip else scores
    index = np.digitize(s, np.linspace(0.0, 1.0, n_bins + 1)[1:-1], right=True)
    return _count_weighted_sum(index, n_bins, s, targets, s.size)


def _classwise(probs, labels, per_sample, n_bins, *, clip) -> dict[str, float]:
    """The top-label and one-vs-rest tables and the class-wise Brier of ``probs`` (the top
    label and its confidence taken from ``probs`` itself, as each official call does)."""
    conf, correct = top_label(probs, labels)
    counts = np.bincount(labels, minlength=probs.shape[1])
    present = np.flatnonzero(counts > 0)
    top = np.array(
        [_binary_ece(conf[labels == c], correct[labels == c], n_bins, clip) for c in present]
    )
    ovr = np.array(
        [_binary_ece(probs[:, c], (labels == c).astype(np.float64), n_bins, clip) for c in present]
    )
    brier = np.array([per_sample[labels == c].mean() for c in present])
    weights = counts[present].astype(np.float64)
    out: dict[str, float] = {}
    for name, values in (("toplabel_ece", top), ("ovr_ece", ovr)):
        out[f"{name}_macro"] = float(values.mean())
        out[f"{name}_weighted"] = float(np.average(values, weights=weights))
        out[f"{name}_max"] = float(values.max())
    out["classwise_brier_macro"] = float(brier.mean())
    return out
