"""Calibration of medical classifiers and VLMs, the MVC-Bench way, from saved predictions.

* Inputs: :func:`load_predictions` (``.npz``, ``.csv``, ``.parquet``), :func:`as_predictions`,
  :class:`Predictions`, :func:`save_predictions`.
* Metrics (:mod:`medibench.calibration.metrics`): accuracy, ECE, MCE, ACE (three named
  variants), class-wise ECE, Brier, NLL, smooth ECE, reliability bins; every bin edge policy
  named.
* Protocols (:mod:`medibench.calibration.protocols`): ``calibration@1`` and ``mvcbench@paper``;
  :func:`score` (the whole file and per group, with bootstrap intervals).
* Post-hoc calibrators (:mod:`medibench.calibration.calibrators`): temperature, vector and
  matrix scaling, histogram binning, isotonic regression; fitted on a validation split, saved
  with their parameters.
* Train-time losses (:mod:`medibench.calibration.losses`, needs torch): MCM, label smoothing
  (both conventions), focal, MbLS.
* Diagrams (:mod:`medibench.calibration.diagrams`), analyses
  (:mod:`medibench.calibration.analysis`: ranking stability, prompt and seed sensitivity;
  :mod:`medibench.calibration.margins`: top-two logit margins against ECE per group),
  zero-shot CLIP classification (:mod:`medibench.calibration.zero_shot`) and the MNI152 tissue
  example (:mod:`medibench.calibration.mni152`).
"""

from medibench.calibration._inputs import (
    Predictions,
    as_predictions,
    load_predictions,
    save_predictions,
    softmax,
)
from medibench.calibration.metrics import (
    accuracy,
    adaptive_calibration_error,
    brier_score,
    classwise_ece,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    reliability_bins,
    smooth_ece,
)
from medibench.calibration.protocols import (
    CALIBRATION_PROTOCOLS,
    METRIC_NAMES,
    CalibrationProtocol,
    load_calibration_protocol,
    score,
)

__all__ = [
    "CALIBRATION_PROTOCOLS",
    "METRIC_NAMES",
    "CalibrationProtocol",
    "Predictions",
    "accuracy",
    "adaptive_calibration_error",
    "as_predictions",
    "brier_score",
    "classwise_ece",
    "expected_calibration_error",
    "load_calibration_protocol",
    "load_predictions",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "reliability_bins",
    "save_predictions",
    "score",
    "smooth_ece",
    "softmax",
]
