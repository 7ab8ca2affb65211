"""MVC-Bench-style analysis of why a model is miscalibrated: the top-two logit margin.

MVC-Bench traces the miscalibration of CLIP-family classifiers to how far the top logit stands
above the others (its MCM regulariser, :class:`medibench.calibration.losses.MultiClassMarginLoss`,
acts on those margins). :func:`margin_analysis` shows it from saved predictions, per group
(method, backbone, domain: any group column) of one or more files:

* the **top-two margin** ``m_i = z_(1) - z_(2)`` of each sample, the largest logit minus the
  second largest. Given logits, of the logits; given probabilities only, of the
  log-probabilities ``log p_(1) - log p_(2)``, which is the same number whenever the
  probabilities are a softmax of logits (``log softmax(z) = z - logsumexp(z)``: the constant
  cancels); a second-largest probability of 0 has no finite margin and is refused, naming the
  row. ``margin_source`` says which was used;
* its distribution: ``n``, mean, standard deviation, min, max, quantiles (5, 25, 50, 75, 95%) and
  a histogram over edges shared by every group (``margin_bins`` equal-width bins from the
  smallest to the largest margin of all groups);
* the mean margin of correct and of incorrect top-label predictions (``None`` when a group has
  none of one kind);
* the group's accuracy, mean confidence and ECE, computed by the calibration protocol exactly as
  ``medibench calibration score`` does (``protocol``, ``n_bins``);
* per margin bin (``margin_bins`` equal-mass bins of the group's margins, cut at its
  quantiles): the margin range, ``n``, mean confidence, accuracy and their gap;
* across groups, the relation of mean margin to ECE (and to accuracy): Spearman's rho with its
  p-value (:func:`medibench.stats.correlation`, scipy's ``spearmanr``), given 3 groups or more
  and neither side constant (else ``None`` with the reason).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medibench.calibration._inputs import Predictions

__all__ = ["QUANTILES", "margin_analysis", "margin_figure", "top_two_margins"]

#: The quantiles of each group's margin distribution.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def top_two_margins(pred: Predictions) -> tuple[np.ndarray, str]:
    """``(margins, source)``: each sample's largest minus second-largest logit, of the logits
    (``source = "logits"``) or, without them, of the log-probabilities
    (``"log-probabilities"``).

    Raises:
        ValueError: a row whose second-largest probability is 0 (no finite log-probability
            margin: give logits), naming the source and the row.
    """
    if pred.logits is not None:
        scores, source = np.asarray(pred.logits, dtype=np.float64), "logits"
    else:
        second = np.partition(pred.probs, -2, axis=1)[:, -2]
        zero = np.flatnonzero(second <= 0)
        if zero.size:
            raise ValueError(
                f"{pred.source}: row {int(zero[0])}: the second-largest probability is 0, so "
                f"the log-probability margin is infinite ({zero.size} such rows); give logits"
            )
        scores, source = np.log(pred.probs), "log-probabilities"
    top = np.partition(scores, -2, axis=1)
    return top[:, -1] - top[:, -2], source


def margin_analysis(
    predictions: Sequence[Predictions],
    *,
    by: Sequence[str] = (),
    protocol: str = "calibration@1",
    n_bins: int | None = None,
    margin_bins: int = 10,
) -> dict[str, Any]:
    """The analysis of the module docstring over the groups of ``predictions``.

    A group is a file and, with ``by``, a combination of its group-column values, named
    ``"<value> / ..."`` (one file) or ``"<file name> / <value> / ..."`` (several files); without
    ``by`` a group is a file, named by its file name.

    Returns ``{"settings", "groups": [{"group", "source", "by", "n", "accuracy", "confidence",
    "ece", "margin": {...}, "margin_correct", "margin_incorrect", "margin_bins": [...]}],
    "histogram_edges", "relation": {"ece": ..., "accuracy": ...}}``.

    Raises:
        ValueError: no predictions, ``margin_bins < 1``, a ``by`` column a file lacks (listing
            the columns it has), a log-probability margin that is infinite, too few samples for
            the protocol's bins.
    """
    from medibench.calibration.metrics import top_label
    from medibench.calibration.protocols import load_calibration_protocol

    if not predictions:
        raise ValueError("margin analysis: no predictions given")
    if margin_bins < 1:
        raise ValueError(f"margin_bins must be >= 1, got {margin_bins}")
    proto = load_calibration_protocol(protocol)
    if n_bins is not None:
        proto = proto.with_bins(n_bins)
    several = len(predictions) > 1
    parts: list[tuple[str, str, dict[str, str], Predictions, np.ndarray, str]] = []
    for pred in predictions:
        margins, source = top_two_margins(pred)
        name = Path(pred.source).name
        keyed = pred.group_keys(list(by)) if by else [((), np.arange(pred.n))]
        for key, rows in keyed:
            label = " / ".join(([name] if several or not by else []) + list(key))
            part = pred.subset(rows, source=f"{pred.source} [{label}]")
            columns = dict(zip(by, key, strict=True))
            parts.append((label, pred.source, columns, part, margins[rows], source))
    everything = np.concatenate([p[4] for p in parts])
    edges = np.histogram_bin_edges(everything, bins=margin_bins)
    groups: list[dict[str, Any]] = []
    for label, source, values, part, margins, kind in parts:
        conf, hits = top_label(part.probs, part.labels)
        correct = np.asarray(hits, dtype=bool)
        metrics = proto.metrics(part)
        groups.append(
            {
                "group": label,
                "source": source,
                "by": values,
                "margin_source": kind,
                "n": part.n,
                "accuracy": metrics["accuracy"],
                "confidence": float(conf.mean()),
                "ece": metrics["ece"],
                "margin": _distribution(margins, edges),
                "margin_correct": _mean_or_none(margins[correct]),
                "margin_incorrect": _mean_or_none(margins[~correct]),
                "margin_bins": _by_margin(margins, conf, correct, margin_bins),
            }
        )
    relation = {
        key: _spearman([g["margin"]["mean"] for g in groups], [g[key] for g in groups])
        for key in ("ece", "accuracy")
    }
    settings = {
        "protocol": proto.spec,
        "ece_bins": proto.ece_bins,
        "margin_bins": margin_bins,
        "by": list(by),
        "quantiles": list(QUANTILES),
        "sources": [p.source for p in predictions],
    }
    return {
        "settings": settings,
        "groups": groups,
        "histogram_edges": edges.tolist(),
        "relation": relation,
    }


def margin_figure(result: dict[str, Any], path: str | Path) -> Path:
    """Draw a :func:`margin_analysis` result into ``path`` (.svg or .png): each group's margin
    histogram (fraction of its samples per shared bin, as steps) beside ECE against mean margin
    (one point per group, labelled), with Spearman's rho in the title. SVGs carry no date."""
    import io

    import matplotlib
    from matplotlib.figure import Figure

    from medibench.io import atomic_write_bytes

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("svg", "png"):
        raise ValueError(f"{path}: a figure is written as .png or .svg, not {path.suffix!r}")
    edges = np.asarray(result["histogram_edges"])
    with matplotlib.rc_context({"svg.hashsalt": "medibench", "font.size": 8}):
        fig = Figure(figsize=(8.4, 3.6))
        left, right = fig.subplots(1, 2)
        for g in result["groups"]:
            counts = np.asarray(g["margin"]["histogram"], dtype=np.float64)
            frac = np.append(counts, counts[-1]) / max(g["n"], 1)
            left.step(edges, frac, where="post", label=g["group"], linewidth=1.2)
        left.set_xlabel("top-two margin")
        left.set_ylabel("fraction of the group")
        left.legend(fontsize=6, frameon=False)
        x = [g["margin"]["mean"] for g in result["groups"]]
        y = [g["ece"] for g in result["groups"]]
        right.scatter(x, y, color="#3b6ea8")
        for g, xi, yi in zip(result["groups"], x, y, strict=True):
            right.annotate(g["group"], (xi, yi), fontsize=6, xytext=(3, 3),
                           textcoords="offset points")  # fmt: skip
        right.margins(x=0.35, y=0.12)  # room for the labels
        right.set_xlabel("mean top-two margin")
        right.set_ylabel(f"ECE ({result['settings']['ece_bins']} bins)")
        rel = result["relation"]["ece"]
        rho = "n/a" if rel.get("rho") is None else f"{rel['rho']:.3f} (p = {rel['pvalue']:.3g})"
        right.set_title(f"Spearman rho = {rho}", fontsize=8)
        fig.tight_layout()
        buf = io.BytesIO()
        meta = {"Date": None} if fmt == "svg" else {"Software": "medibench"}
        fig.savefig(buf, format=fmt, dpi=120, metadata=meta)
    return atomic_write_bytes(path, buf.getvalue())


def _distribution(margins: np.ndarray, edges: np.ndarray) -> dict[str, Any]:
    qs = np.quantile(margins, QUANTILES)
    return {
        "mean": float(margins.mean()),
        "std": float(margins.std(ddof=1)) if margins.size > 1 else math.nan,
        "min": float(margins.min()),
        "max": float(margins.max()),
        "median": float(np.median(margins)),
        "quantiles": {f"{q:g}": float(v) for q, v in zip(QUANTILES, qs, strict=True)},
        "histogram": np.histogram(margins, bins=edges)[0].tolist(),
    }


def _by_margin(
    margins: np.ndarray, conf: np.ndarray, correct: np.ndarray, n_bins: int
) -> list[dict[str, Any]]:
    """Equal-mass bins of ``margins`` (cut at its quantiles; a sample on a cut goes to the
    lower bin, the smallest margin to the first)."""
    cuts = np.quantile(margins, np.linspace(0, 1, n_bins + 1))
    index = np.clip(np.searchsorted(cuts, margins, side="left") - 1, 0, n_bins - 1)
    out = []
    for b in range(n_bins):
        inside = index == b
        if not inside.any():
            continue
        acc, cf = float(correct[inside].mean()), float(conf[inside].mean())
        out.append(
            {
                "low": float(cuts[b]),
                "high": float(cuts[b + 1]),
                "n": int(inside.sum()),
                "confidence": cf,
                "accuracy": acc,
                "gap": cf - acc,
            }
        )
    return out


def _mean_or_none(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def _spearman(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    from medibench.stats import correlation

    n = len(x)
    if n < 3:
        return {"rho": None, "pvalue": None, "n": n, "why": "fewer than 3 groups"}
    if np.ptp(np.asarray(x)) == 0 or np.ptp(np.asarray(y)) == 0:
        return {"rho": None, "pvalue": None, "n": n, "why": "one side is constant"}
    res = correlation(x, y, method="spearman")
    return {"rho": res.statistic, "pvalue": res.pvalue, "n": n, "why": None}
