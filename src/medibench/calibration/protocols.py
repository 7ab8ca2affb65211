"""Calibration protocols: every setting of every metric declared as data, with a version.

* ``calibration@1``: medibench's one setting. 15 equal-width bins ``(lo, hi]`` for ECE, MCE
  (unweighted) and class-wise ECE (one-vs-rest, macro over all classes); ACE over 15 equal-mass
  bins; Brier; NLL (log-softmax of the logits, or ``-log max(p, 1e-12)``); smooth ECE at its
  fixed-point bandwidth; 95% percentile-bootstrap intervals (1,000 resamples, seed 42) through
  :func:`medibench.stats.bootstrap_ci`.
* ``mvcbench@paper``: MVC-Bench's official code (:mod:`medibench.calibration._mvcbench`): ECE
  over 20 bins dropping confidences of 1.0 from the bins' statistics, count-weighted MCE and
  KBinsDiscretizer-quantile ACE over 10 bins, class-wise ECE over 20 bins averaged over the
  classes present, "NLL" as the negated mean true-class logit. Its smooth ECE is medibench's
  (the official ``ECE_KDE`` is not reproduced).

:func:`score` returns one JSON-ready dict with the protocol's name, version and settings beside
the values, for the whole file and per group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from medibench.calibration import metrics as M
from medibench.calibration._binning import EdgePolicy, check_bins
from medibench.calibration._inputs import Predictions
from medibench.calibration._mvcbench import (
    mvcbench_ace,
    mvcbench_classwise_ece,
    mvcbench_ece,
    mvcbench_nll,
)
from medibench.calibration._smooth import smooth_ece_fixed_point
from medibench.registry import Registry

__all__ = [
    "CALIBRATION_PROTOCOLS",
    "METRIC_NAMES",
    "CalibrationProtocol",
    "bootstrap_intervals",
    "load_calibration_protocol",
    "score",
]

#: The values every protocol reports, in this order.
METRIC_NAMES = ("accuracy", "ece", "mce", "ace", "classwise_ece", "brier", "nll", "smooth_ece")
#: The most resample x sample index entries a bootstrap may hold at once (about 0.8 GB).
MAX_BOOTSTRAP_ENTRIES = 50_000_000


@dataclass(frozen=True)
class CalibrationProtocol:
    """The declared settings of every calibration metric (see the module doc)."""

    name: str
    version: str
    description: str
    ece_bins: int
    mce_bins: int
    ace_bins: int
    classwise_bins: int
    edges: EdgePolicy = "right"
    ece_variant: Literal["standard", "mvcbench_drops_one"] = "standard"
    mce_variant: M.MCEVariant = "unweighted"
    ace_variant: M.ACEVariant = "equal_mass"
    ace_quantile_method: str = "linear"
    classwise_variant: Literal["all_classes", "mvcbench_present_classes"] = "all_classes"
    nll_variant: Literal["log_likelihood", "mvcbench_mean_true_logit"] = "log_likelihood"
    nll_eps: float = 1e-12
    bootstrap_resamples: int = 1000
    bootstrap_seed: int = 42
    level: float = 0.95
    quirks: tuple[str, ...] = ()

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    def with_bins(self, n_bins: int) -> CalibrationProtocol:
        """The same protocol with every bin count set to ``n_bins`` (recorded in settings)."""
        check_bins(n_bins, n_bins, self.spec)
        return dataclasses.replace(
            self, ece_bins=n_bins, mce_bins=n_bins, ace_bins=n_bins, classwise_bins=n_bins
        )

    def settings(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["quirks"] = list(self.quirks)
        return out

    def metrics(self, pred: Predictions) -> dict[str, float]:
        """Every value of :data:`METRIC_NAMES` for ``pred`` (fractions, not percent)."""
        probs, labels = pred.probs, pred.labels
        conf, correct = M.top_label(probs, labels)
        most = max(self.ece_bins, self.mce_bins, self.ace_bins, self.classwise_bins)
        check_bins(most, pred.n, f"{pred.source} ({self.spec})")
        out = {"accuracy": float(correct.mean())}
        if self.ece_variant == "mvcbench_drops_one":
            out["ece"] = mvcbench_ece(conf, correct, self.ece_bins)
        else:
            sums = M.binned_sums(conf, correct, self.ece_bins, self.edges, "ECE")
            out["ece"] = M.ece_from_sums(sums)
        sums = M.binned_sums(conf, correct, self.mce_bins, self.edges, "MCE")
        out["mce"] = M.mce_from_sums(sums, self.mce_variant)
        if self.ace_variant == "mvcbench":
            out["ace"] = mvcbench_ace(
                conf, correct, self.ace_bins, quantile_method=self.ace_quantile_method
            )
        else:
            out["ace"] = M.ace_from_top_label(
                conf, correct, self.ace_bins, variant=self.ace_variant, edges=self.edges
            )
        if self.classwise_variant == "mvcbench_present_classes":
            out["classwise_ece"] = mvcbench_classwise_ece(probs, labels, self.classwise_bins)
        else:
            out["classwise_ece"] = M.classwise_ece(
                probs, labels, n_bins=self.classwise_bins, edges=self.edges
            )
        out["brier"] = M.brier_score(probs, labels)
        if self.nll_variant == "mvcbench_mean_true_logit":
            logits = pred.logits if pred.logits is not None else np.log(np.maximum(probs, 1e-300))
            out["nll"] = mvcbench_nll(logits, labels)
        else:
            out["nll"] = M.negative_log_likelihood(
                probs, labels, logits=pred.logits, eps=self.nll_eps
            )
        out["smooth_ece"] = smooth_ece_fixed_point(conf, correct, tol=1e-5)[0]
        return out


CALIBRATION = CalibrationProtocol(
    name="calibration",
    version="1",
    description="medibench's calibration setting: 15 bins (lo, hi], unweighted MCE, "
    "equal-mass ACE, one-vs-rest class-wise ECE, Brier, NLL, smooth ECE, bootstrap CIs",
    ece_bins=15,
    mce_bins=15,
    ace_bins=15,
    classwise_bins=15,
)

MVCBENCH_PAPER = CalibrationProtocol(
    name="mvcbench",
    version="paper",
    description="MVC-Bench's official code: ECE@20 dropping 1.0 from bin statistics, "
    "count-weighted MCE@10, KBinsDiscretizer ACE@10, class-wise ECE@20, NLL = -mean true logit",
    ece_bins=20,
    mce_bins=10,
    ace_bins=10,
    classwise_bins=20,
    edges="left",
    ece_variant="mvcbench_drops_one",
    mce_variant="mvcbench_count_weighted",
    ace_variant="mvcbench",
    ace_quantile_method="linear",
    classwise_variant="mvcbench_present_classes",
    nll_variant="mvcbench_mean_true_logit",
    quirks=(
        "ece_drops_one",
        "mce_count_weighted",
        "ace_kbins_quantile",
        "classwise_ovr_present_classes",
        "nll_mean_true_logit",
        "bins_ece20_mce10_ace10",
    ),
)

#: The calibration protocols, ``name@version``.
CALIBRATION_PROTOCOLS: Registry[CalibrationProtocol] = Registry("calibration protocol")
CALIBRATION_PROTOCOLS.register("calibration@1", lambda: CALIBRATION, help=CALIBRATION.description)
CALIBRATION_PROTOCOLS.register(
    "mvcbench@paper", lambda: MVCBENCH_PAPER, help=MVCBENCH_PAPER.description
)
_LATEST = {"calibration": "calibration@1", "mvcbench": "mvcbench@paper"}


def load_calibration_protocol(spec: str | CalibrationProtocol) -> CalibrationProtocol:
    """``"calibration@1"``, ``"mvcbench@paper"`` (a bare name is its latest version)."""
    if isinstance(spec, CalibrationProtocol):
        return spec
    return CALIBRATION_PROTOCOLS.create(_LATEST.get(spec, spec))


def score(
    pred: Predictions,
    protocol: str | CalibrationProtocol = "calibration@1",
    *,
    by: Sequence[str] = (),
    n_bins: int | None = None,
    n_resamples: int | None = None,
) -> dict[str, Any]:
    """Every metric of ``protocol`` for the whole of ``pred`` and, with ``by``, per group.

    Returns ``{"protocol", "protocol_name", "protocol_version", "settings", "source", "n",
    "n_classes", <each of METRIC_NAMES>, "ci": {metric: [low, high]}, "notes", "groups"}``;
    ``groups`` (only with ``by``) maps a group's values joined by ``"/"`` to the same fields
    plus ``"by"`` (column -> value). ``n_bins`` overrides every bin count; ``n_resamples``
    the protocol's bootstrap resamples (0: no intervals).
    """
    proto = load_calibration_protocol(protocol)
    if n_bins is not None:
        proto = proto.with_bins(n_bins)
    resamples = proto.bootstrap_resamples if n_resamples is None else n_resamples
    out: dict[str, Any] = {
        "protocol": proto.spec,
        "protocol_name": proto.name,
        "protocol_version": proto.version,
        "settings": proto.settings(),
        "source": pred.source,
    }
    out.update(_one(pred, proto, resamples))
    if by:
        groups: dict[str, Any] = {}
        for values, rows in pred.group_keys(list(by)):
            key = "/".join(values)
            part = pred.subset(rows, source=f"{pred.source} [{key}]")
            groups[key] = {"by": dict(zip(by, values, strict=True)), **_one(part, proto, resamples)}
        out["groups"] = groups
    return out


def bootstrap_intervals(
    pred: Predictions, protocol: CalibrationProtocol, *, n_resamples: int
) -> dict[str, list[float]]:
    """Percentile-bootstrap interval of every metric, resampling samples with replacement.

    The resamples are exactly :func:`medibench.stats.bootstrap_ci`'s (it draws the indices;
    each resample's metrics are computed once and shared by all metrics).
    """
    from medibench.stats import bootstrap_ci

    if n_resamples * pred.n > MAX_BOOTSTRAP_ENTRIES:
        raise ValueError(
            f"{pred.source}: a bootstrap of {pred.n} samples x {n_resamples} resamples holds "
            f"{n_resamples * pred.n:,} indices (limit {MAX_BOOTSTRAP_ENTRIES:,}): use fewer "
            "resamples, or 0 for no intervals"
        )
    table: dict[str, np.ndarray] = {}

    def statistic_of(name: str):
        def statistic(rows: np.ndarray, axis: int = 1) -> np.ndarray:
            if not table:
                values = [protocol.metrics(pred.subset(r.astype(np.int64))) for r in rows]
                table.update({m: np.array([v[m] for v in values]) for m in METRIC_NAMES})
            return table[name]

        return statistic

    index = np.arange(pred.n, dtype=np.float64)
    out = {}
    for name in METRIC_NAMES:
        low, high = bootstrap_ci(
            index,
            n_resamples=n_resamples,
            seed=protocol.bootstrap_seed,
            level=protocol.level,
            statistic=statistic_of(name),
        )
        out[name] = [low, high]
    return out


def _one(pred: Predictions, proto: CalibrationProtocol, resamples: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n": pred.n, "n_classes": pred.n_classes}
    out.update(proto.metrics(pred))
    out["ci"] = bootstrap_intervals(pred, proto, n_resamples=resamples) if resamples else {}
    notes = []
    if proto.nll_variant == "mvcbench_mean_true_logit" and pred.logits is None:
        notes.append("no logits: the official NLL was taken on log-probabilities (a true NLL)")
    out["notes"] = notes
    return out
