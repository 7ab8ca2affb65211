"""Calibration protocols: every setting of every metric declared as data, with a version.

* ``calibration@1``: medibench's one setting. 15 equal-width bins ``(lo, hi]`` for ECE, MCE
  (unweighted) and class-wise ECE (one-vs-rest, macro over all classes); ACE over 15 equal-mass
  bins; Brier; NLL (log-softmax of the logits, or ``-log max(p, 1e-12)``); smooth ECE at its
  fixed-point bandwidth; 95% percentile-bootstrap intervals (1,000 resamples, seed 42) through
  :func:`medibench.stats.bootstrap_ci`.
* ``mvcbench-dassl@paper``: MVC-Bench's patched Dassl evaluator end to end, the one its
  ``train.py`` runs (:mod:`medibench.calibration._mvcbench_paths`): rows clamped, not
  renormalised; ``ECE_Loss`` over 20 ``(lo, hi]`` bins with float32 edges; count-weighted MCE
  and uncut KBinsDiscretizer ACE at 10 bins; Brier, ``/ C`` Brier and the class-wise tables
  at 20 bins.
* ``mvcbench-vl@paper``: its VL evaluator (``vl_evaluator.py`` over ``tools/metrics.py``) end to
  end: logits softmaxed by the trainer, rows renormalised by ``ensure_probability_matrix``, and
  renormalised a second time inside the Brier and class-wise calls; every metric at
  ``ECE_BINS`` = 10 (the default of the ``train.py`` that registers this evaluator; MVC-Bench's
  own defines none); ECE ``[lo, hi)`` with 1.0 weighted but in no bin; ACE bins cut to the
  distinct confidences.
* ``mvcbench@paper``: the protocol of MVC-Bench's headline numbers: an alias of
  ``mvcbench-dassl@paper`` (``train.py`` leaves ``TEST.EVALUATOR`` at Dassl's
  ``Classification``, the patched evaluator, and ``parse_test_res.py`` reads its log lines).

The paper protocols' "NLL" is ``temp_scaling.py``'s logged value (the negated mean true-class
logit; neither evaluator reports an NLL); their smooth ECE is medibench's (the official
``ECE_KDE`` is not reproduced).

:func:`score` returns one JSON-ready dict with the protocol's name, version and settings beside
the values, for the whole file and per group. With ``prob_tolerance`` (half-precision
probabilities, read with a looser row-sum tolerance) a paper protocol is fed each row divided by
its sum, what the softmax of the logits they were saved from gives, never softmaxed a second
time (its evaluator would softmax the whole matrix once one row is off by more than 2e-4);
``calibration@1`` uses them as saved. The stored note says which.
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
from medibench.calibration._mvcbench_paths import EXTRA_METRICS, path_metrics
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
    #: ``"medibench"``: the variants above; ``"vl"`` / ``"dassl"``: one of MVC-Bench's two
    #: evaluators end to end (:mod:`._mvcbench_paths`), reporting :data:`EXTRA_METRICS` too.
    path: Literal["medibench", "vl", "dassl"] = "medibench"

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The values :meth:`metrics` returns, in order."""
        return METRIC_NAMES if self.path == "medibench" else (*METRIC_NAMES, *EXTRA_METRICS)

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
        if self.path != "medibench":
            return self._path_metrics(pred, conf, correct)
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

    def _path_metrics(self, pred: Predictions, conf, correct) -> dict[str, float]:
        """One of MVC-Bench's evaluators, fed what its trainer feeds it: the logits when the
        file has them, else the probabilities as saved."""
        scores = pred.logits if pred.logits is not None else pred.probs
        values = path_metrics(
            "vl" if self.path == "vl" else "dassl",
            scores,
            pred.labels,
            from_logits=pred.logits is not None,
            ece_bins=self.ece_bins,
            mce_bins=self.mce_bins,
            ace_bins=self.ace_bins,
            classwise_bins=self.classwise_bins,
            quantile_method=self.ace_quantile_method,
        )
        logits = pred.logits if pred.logits is not None else np.log(np.maximum(pred.probs, 1e-300))
        values["nll"] = mvcbench_nll(logits, pred.labels)
        values["smooth_ece"] = smooth_ece_fixed_point(conf, correct, tol=1e-5)[0]
        return {name: values[name] for name in self.metric_names}


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

MVCBENCH_DASSL = CalibrationProtocol(
    name="mvcbench-dassl",
    version="paper",
    description="MVC-Bench's patched Dassl evaluator (the one train.py runs): rows clamped, "
    "ECE_Loss@20 with float32 edges (lo, hi], count-weighted MCE@10, uncut KBins ACE@10, "
    "Brier and class-wise tables@20",
    ece_bins=20,
    mce_bins=10,
    ace_bins=10,
    classwise_bins=20,
    edges="right",
    ece_variant="mvcbench_drops_one",
    mce_variant="mvcbench_count_weighted",
    ace_variant="mvcbench",
    nll_variant="mvcbench_mean_true_logit",
    path="dassl",
    quirks=(
        "rows_clamped_not_renormalised",
        "ece_float32_edges",
        "mce_count_weighted",
        "ace_kbins_not_cut",
        "classwise_present_classes",
        "nll_mean_true_logit",
        "bins_ece20_mce10_ace10_classwise20",
    ),
)

#: The other evaluator: Dassl's variants, its own bins, edges and path.
MVCBENCH_VL = dataclasses.replace(
    MVCBENCH_DASSL,
    name="mvcbench-vl",
    description="MVC-Bench's VL evaluator (tools/metrics.py): rows renormalised, every metric "
    "at ECE_BINS=10, ECE [lo, hi) with 1.0 in no bin, count-weighted MCE, ACE cut to distinct "
    "confidences, Brier and class-wise tables",
    ece_bins=10,
    classwise_bins=10,
    edges="left",
    path="vl",
    quirks=(
        "rows_renormalised",
        "ece_drops_one",
        "mce_count_weighted",
        "ace_kbins_cut_to_distinct",
        "classwise_present_classes",
        "nll_mean_true_logit",
        "bins_all_ece_bins",
    ),
)
#: ``mvcbench@paper``: the evaluator of the README's headline numbers (module docstring).
MVCBENCH_PAPER = MVCBENCH_DASSL

#: The calibration protocols, ``name@version``.
CALIBRATION_PROTOCOLS: Registry[CalibrationProtocol] = Registry("calibration protocol")
CALIBRATION_PROTOCOLS.register("calibration@1", lambda: CALIBRATION, help=CALIBRATION.description)
for _proto in (MVCBENCH_DASSL, MVCBENCH_VL):
    CALIBRATION_PROTOCOLS.register(_proto.spec, lambda p=_proto: p, help=_proto.description)
CALIBRATION_PROTOCOLS.register(
    "mvcbench@paper",
    lambda: MVCBENCH_DASSL,
    help="alias of mvcbench-dassl@paper (the evaluator behind MVC-Bench's headline numbers)",
)
_LATEST = {
    "calibration": "calibration@1",
    "mvcbench": "mvcbench@paper",
    "mvcbench-dassl": "mvcbench-dassl@paper",
    "mvcbench-vl": "mvcbench-vl@paper",
}


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
    prob_tolerance: float | None = None,
) -> dict[str, Any]:
    """Every metric of ``protocol`` for the whole of ``pred`` and, with ``by``, per group.

    Returns ``{"protocol", "protocol_name", "protocol_version", "settings", "source", "n",
    "n_classes", <each of METRIC_NAMES>, "ci": {metric: [low, high]}, "notes", "groups"}``;
    ``groups`` (only with ``by``) maps a group's values joined by ``"/"`` to the same fields
    plus ``"by"`` (column -> value). ``n_bins`` overrides every bin count; ``n_resamples``
    the protocol's bootstrap resamples (0: no intervals). ``prob_tolerance``: the row-sum
    tolerance ``pred`` was read with, when it is not the default (half-precision
    probabilities): the largest row-sum error found is stored as a note.
    """
    proto = load_calibration_protocol(protocol)
    if n_bins is not None:
        proto = proto.with_bins(n_bins)
    resamples = proto.bootstrap_resamples if n_resamples is None else n_resamples
    _check_bootstrap_draws(pred.n, resamples, grouped=bool(by))
    out: dict[str, Any] = {
        "protocol": proto.spec,
        "protocol_name": proto.name,
        "protocol_version": proto.version,
        "settings": proto.settings(),
        "source": pred.source,
    }
    notes = []
    if prob_tolerance is not None and pred.logits is None:
        pred, note = _within_tolerance(pred, proto, prob_tolerance)
        notes.append(note)
    out.update(_one(pred, proto, resamples))
    out["notes"] += notes
    if by:
        groups: dict[str, Any] = {}
        for values, rows in pred.group_keys(list(by)):
            key = "/".join(values)
            part = pred.subset(rows, source=f"{pred.source} [{key}]")
            groups[key] = {"by": dict(zip(by, values, strict=True)), **_one(part, proto, resamples)}
        out["groups"] = groups
    return out


def _within_tolerance(
    pred: Predictions, proto: CalibrationProtocol, tolerance: float
) -> tuple[Predictions, str]:
    """``pred`` as ``proto`` reads probabilities whose row sums are off by up to
    ``tolerance`` (the module doc), and the note that says what was done."""
    sums = pred.probs.sum(axis=1)
    error = np.abs(sums - 1.0)
    off = float(error.max())
    if off > tolerance:
        row = int(np.argmax(error))
        raise ValueError(
            f"{pred.source}: row {row}: probabilities sum to {sums[row]:.6g}, off by more than "
            f"--prob-tolerance {tolerance:g}"
        )
    head = (
        f"probabilities read with --prob-tolerance {tolerance:g}: row sums are off by up to "
        f"{off:.3g} (half-precision rows); "
    )
    if proto.path == "medibench":
        return pred, head + "each metric uses them as saved"
    renormalised = dataclasses.replace(pred, probs=pred.probs / sums[:, None])
    return renormalised, head + (
        f"each row was divided by its sum before {proto.spec}'s evaluator (as the softmax of "
        "the logits they were saved from gives), never softmaxed a second time"
    )


#: The most bootstrap indices one :func:`score` draws (resamples x predictions, twice with
#: ``by``: the groups partition the rows). Memory stays bounded at any size (the indices are
#: drawn in chunks); this bounds the time: 10^9 indices take about 70 s on one core of the
#: 2-core test machine, so the limit is about 6 minutes.
MAX_BOOTSTRAP_DRAWS = 5_000_000_000


def _check_bootstrap_draws(n: int, resamples: int, *, grouped: bool) -> None:
    draws = n * resamples * (2 if grouped else 1)
    if draws > MAX_BOOTSTRAP_DRAWS:
        per_group = " (and as many again for the groups of --by)" if grouped else ""
        raise ValueError(
            f"{resamples:,} bootstrap resamples of {n:,} predictions draw {draws:,} indices"
            f"{per_group}, more than the {MAX_BOOTSTRAP_DRAWS:,} one score draws (about 6 "
            "minutes on one core); use fewer resamples (--resamples), or 0 for no intervals"
        )


def bootstrap_intervals(
    pred: Predictions,
    protocol: CalibrationProtocol,
    *,
    n_resamples: int,
    max_entries: int | None = None,
) -> dict[str, list[float]]:
    """Percentile-bootstrap interval of every metric, resampling samples with replacement.

    The resamples are exactly :func:`medibench.stats.bootstrap_ci`'s, drawn at most
    ``max_entries`` indices at a time (:func:`medibench.stats.bootstrap_indices`; default
    :data:`medibench.stats.BOOTSTRAP_MAX_ENTRIES`), so memory stays bounded at any size. A
    resample is never copied: its metrics are weighted sums over quantities computed once
    (:class:`~medibench.calibration._resampling.ResampledMetrics`; equal to
    ``protocol.metrics(pred.subset(rows))`` within 1e-12).
    """
    from medibench.calibration._resampling import ResampledMetrics
    from medibench.stats import BOOTSTRAP_MAX_ENTRIES, bootstrap_indices, percentile_interval

    names = protocol.metric_names
    values: dict[str, list[float]] = {m: [] for m in names}
    chunks = bootstrap_indices(
        pred.n,
        n_resamples,
        protocol.bootstrap_seed,
        max_entries=max_entries or BOOTSTRAP_MAX_ENTRIES,
    )
    resampled = ResampledMetrics(pred, protocol)
    for rows in chunks:
        for r in rows:
            metrics = resampled(r)
            for m in names:
                values[m].append(metrics[m])
    return {m: list(percentile_interval(np.array(values[m]), protocol.level)) for m in names}


def _one(pred: Predictions, proto: CalibrationProtocol, resamples: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n": pred.n, "n_classes": pred.n_classes}
    out.update(proto.metrics(pred))
    out["ci"] = bootstrap_intervals(pred, proto, n_resamples=resamples) if resamples else {}
    notes = []
    if proto.nll_variant == "mvcbench_mean_true_logit" and pred.logits is None:
        notes.append("no logits: the official NLL was taken on log-probabilities (a true NLL)")
    out["notes"] = notes
    return out
