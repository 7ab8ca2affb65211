"""A calibration protocol's metrics on bootstrap resamples, without copying the predictions.

A resample ``rows`` (N indices drawn with replacement) is a vector of counts ``w =
bincount(rows)``. Everything per sample is computed once, in the order of the samples sorted by
top-label confidence (stable, ties in input order): confidences, outcomes, every bin index,
per-sample Brier and NLL terms, the smooth-ECE deposits and the one-vs-rest bin of each class
probability. Each resample is then weighted sums over them:

* equal-width bins are runs of the sorted order: per-bin sums are ``add.reduceat`` of
  ``w * conf`` and ``w * correct``; class-wise bins are one sparse matrix product;
* equal-mass bins and KBinsDiscretizer's percentile edges are read off the cumulative counts
  (the resample sorted is the sorted samples, each repeated ``w_i`` times). Where today's
  definition orders tied confidences across a bin boundary by their place in the resample
  (:func:`medibench.calibration._binning.equal_mass_sums`), the tied draws are read from
  ``rows`` in draw order, so the boundary splits them as it did.

The values equal ``protocol.metrics(pred.subset(rows))`` up to the order of floating-point
additions (a sum of ``w_i x_i`` instead of the resample's values one by one): within 1e-12,
relative (tested). Every bin assignment, edge and boundary is the same. One case is not
weighted: an MVC-Bench path whose saved scores mix probability-like and other rows, where
whether a resample is read as probabilities depends on which rows it drew; such a resample is
computed from its copy, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from medibench.calibration import metrics as M
from medibench.calibration._binning import BinSums, bin_index
from medibench.calibration._mvcbench import mvcbench_ece_from_sums, mvcbench_ece_index
from medibench.calibration._mvcbench_paths import (
    _looks_like_probabilities,
    dassl_probabilities,
    float32_linspace_edges,
    vl_probabilities_twice,
)
from medibench.calibration._smooth import GRID_CELLS, smooth_ece_of_grid

if TYPE_CHECKING:
    from medibench.calibration._inputs import Predictions
    from medibench.calibration.protocols import CalibrationProtocol

__all__ = ["ResampledMetrics", "percentile_of_counts"]


class ResampledMetrics:
    """``protocol.metrics(pred.subset(rows))`` for many resamples ``rows`` of ``pred``, each
    computed from its counts (module doc). Build once (a few passes over the predictions and
    one sort), then call with each resample's N indices."""

    def __init__(self, pred: Predictions, protocol: CalibrationProtocol) -> None:
        self.pred, self.protocol, self.n = pred, protocol, pred.n
        p = protocol
        base_conf, base_correct = M.top_label(pred.probs, pred.labels)
        probs, self._mixed_rows = pred.probs, None
        if p.path != "medibench":
            probs, again, self._mixed_rows = _path_probabilities(p.path, pred)
        conf, correct = M.top_label(probs, pred.labels)
        order = np.argsort(conf, kind="stable")
        self.rank = np.empty(self.n, dtype=np.intp)
        self.rank[order] = np.arange(self.n)
        self.top = _SortedTopLabel(conf[order], correct[order])
        labels = pred.labels[order]
        self.labels, self.n_classes = labels, pred.n_classes
        self.smooth = _Deposits(base_conf[order], base_correct[order])
        logits = pred.logits if pred.logits is not None else None
        true_logit = (logits if logits is not None else np.log(np.maximum(pred.probs, 1e-300)))[
            np.arange(self.n), pred.labels
        ][order]
        self.mean_true_logit_terms = true_logit
        self.bins: dict[str, _Bins] = {}
        if p.path == "medibench":
            self._init_medibench(pred, order)
        else:
            self._init_path(again[order])

    # -- per resample ---------------------------------------------------------------------
    def __call__(self, rows: np.ndarray) -> dict[str, float]:
        """The protocol's metrics on the resample ``pred.subset(rows)``."""
        if self._mixed_rows is not None and self._mixed_rows[rows].all():
            # the whole file reads as logits, but this resample drew only probability rows
            return self.protocol.metrics(self.pred.subset(rows))
        ranked = self.rank[rows]
        counts = np.bincount(ranked, minlength=self.n)
        w = counts.astype(np.float64)
        draw = _Draw(ranked, counts, w, np.cumsum(counts), self.top)
        if self.protocol.path == "medibench":
            return self._medibench(draw)
        return self._path(draw)

    # -- medibench's own path -------------------------------------------------------------
    def _init_medibench(self, pred: Predictions, order: np.ndarray) -> None:
        p, conf = self.protocol, self.top.conf
        if p.ece_variant == "mvcbench_drops_one":
            self.bins["ece"] = _Bins(mvcbench_ece_index(conf, p.ece_bins), p.ece_bins + 1)
        else:
            self.bins["ece"] = _Bins(*bin_index(conf, p.ece_bins, p.edges))
        self.bins["mce"] = _Bins(*bin_index(conf, p.mce_bins, p.edges))
        if p.ace_variant == "netcal":
            self.bins["ace"] = _Bins(*bin_index(conf, p.ace_bins, p.edges))
        probs = pred.probs[order]
        # MVC-Bench's class-wise ECE bins (lo, hi] whatever the protocol's edges
        edges = "right" if p.classwise_variant == "mvcbench_present_classes" else p.edges
        index, slots = bin_index(probs.ravel(), p.classwise_bins, edges)
        self.ovr = _OneVsRest(probs, self.labels, index.reshape(probs.shape), slots)
        self.brier_terms = M.brier_per_sample(probs, self.labels)
        logits = None if pred.logits is None else pred.logits[order]
        if p.nll_variant == "log_likelihood":
            self.nll_terms = M.nll_per_sample(probs, self.labels, logits=logits, eps=p.nll_eps)

    def _medibench(self, d: _Draw) -> dict[str, float]:
        p, n = self.protocol, self.n
        out = {"accuracy": float(d.hits.sum() / n)}
        ece = self.bins["ece"].sums(d)
        if p.ece_variant == "mvcbench_drops_one":
            out["ece"] = mvcbench_ece_from_sums(ece.counts, ece.conf, ece.hits, n)
        else:
            out["ece"] = M.ece_from_sums(ece)
        out["mce"] = M.mce_from_sums(self.bins["mce"].sums(d), p.mce_variant)
        if p.ace_variant == "equal_mass":
            out["ace"] = M.ece_from_sums(self.top.equal_mass_sums(d, p.ace_bins))
        elif p.ace_variant == "netcal":
            out["ace"] = M.netcal_ace_from_sums(self.bins["ace"].sums(d))
        else:
            out["ace"] = self.top.kbins_ace(
                d, p.ace_bins, cut_to_distinct=True, clip=True, method=p.ace_quantile_method
            )
        per_class = self.ovr.gaps(d) / n
        if p.classwise_variant == "mvcbench_present_classes":
            per_class = per_class[self._label_counts(d) > 0]
        out["classwise_ece"] = float(np.mean(per_class))
        out["brier"] = float(d.w @ self.brier_terms / n)
        if p.nll_variant == "mvcbench_mean_true_logit":
            out["nll"] = float(-(d.w @ self.mean_true_logit_terms) / n)
        else:
            out["nll"] = float(d.w @ self.nll_terms / n)
        out["smooth_ece"] = self.smooth.smooth_ece(d)
        return out

    # -- MVC-Bench's evaluators -----------------------------------------------------------
    def _init_path(self, again: np.ndarray) -> None:
        """``again``: the rows (in sorted order) of the Brier and class-wise calls."""
        p, conf, vl = self.protocol, self.top.conf, self.protocol.path == "vl"
        if vl:
            self.bins["ece"] = _Bins(mvcbench_ece_index(conf, p.ece_bins), p.ece_bins + 1)
        else:
            edges = float32_linspace_edges(p.ece_bins)
            self.bins["ece"] = _Bins(np.searchsorted(edges, conf, side="left") - 1, p.ece_bins)
        inner = np.linspace(0, 1, p.mce_bins + 1)[1:-1]
        self.bins["mce"] = _Bins(np.digitize(conf, inner), p.mce_bins)
        c_bins = p.classwise_bins
        inner = np.linspace(0.0, 1.0, c_bins + 1)[1:-1]
        scores = np.clip(again, 0.0, 1.0) if vl else again
        self.ovr = _OneVsRest(scores, self.labels, np.digitize(scores, inner, right=True), c_bins)
        top_conf, self.top_correct = M.top_label(again, self.labels)
        top_conf = np.clip(top_conf, 0.0, 1.0) if vl else top_conf
        self.top_conf_terms = top_conf
        self.top_key = self.labels * c_bins + np.digitize(top_conf, inner, right=True)
        self.brier_terms = np.sum((again - np.eye(again.shape[1])[self.labels]) ** 2, axis=1)

    def _path(self, d: _Draw) -> dict[str, float]:
        p, n, vl = self.protocol, self.n, self.protocol.path == "vl"
        out = {"accuracy": float(d.hits.sum() / n)}
        ece = self.bins["ece"].sums(d)
        if vl:
            out["ece"] = mvcbench_ece_from_sums(ece.counts, ece.conf, ece.hits, n)
        else:
            out["ece"] = M.ece_from_sums(ece)
        out["mce"] = M.mce_from_sums(self.bins["mce"].sums(d), "mvcbench_count_weighted")
        out["ace"] = self.top.kbins_ace(
            d, p.ace_bins, cut_to_distinct=vl, clip=vl, method=p.ace_quantile_method
        )
        out["brier"] = float(d.w @ self.brier_terms / n)
        out["brier_norm"] = out["brier"] / self.n_classes
        counts = self._label_counts(d)
        present = np.flatnonzero(counts > 0)
        slots = p.classwise_bins * self.n_classes
        top_conf = np.bincount(self.top_key, weights=d.w * self.top_conf_terms, minlength=slots)
        top_hits = np.bincount(self.top_key, weights=d.w * self.top_correct, minlength=slots)
        top = np.abs(top_hits - top_conf).reshape(self.n_classes, -1).sum(axis=1)
        tables = {
            "toplabel_ece": top[present] / counts[present],
            "ovr_ece": self.ovr.gaps(d)[present] / n,
        }
        weights = counts[present]
        for name, values in tables.items():
            out[f"{name}_macro"] = float(values.mean())
            out[f"{name}_weighted"] = float(np.average(values, weights=weights))
            out[f"{name}_max"] = float(values.max())
        brier = np.bincount(self.labels, weights=d.w * self.brier_terms, minlength=self.n_classes)
        out["classwise_brier_macro"] = float((brier[present] / counts[present]).mean())
        out["classwise_ece"] = out["ovr_ece_macro"]
        out["nll"] = float(-(d.w @ self.mean_true_logit_terms) / n)
        out["smooth_ece"] = self.smooth.smooth_ece(d)
        return {name: out[name] for name in p.metric_names}

    def _label_counts(self, d: _Draw) -> np.ndarray:
        return np.bincount(self.labels, weights=d.w, minlength=self.n_classes)


class _Draw:
    """One resample as counts over the sorted samples: ``ranked`` (its indices into the sorted
    order, in draw order), ``counts``, ``w`` (as floats), ``cum`` (their running sum) and the
    weighted top-label terms ``conf = w * conf`` and ``hits = w * correct``."""

    def __init__(self, ranked, counts, w, cum, top: _SortedTopLabel) -> None:
        self.ranked, self.counts, self.w, self.cum = ranked, counts, w, cum
        self.conf = w * top.conf
        self.hits = w * top.correct


class _Bins:
    """Bins that are runs of the sorted samples (an index that never decreases along them):
    the per-bin sums of a resample are sums over runs. An index outside ``[0, slots)`` is in
    no bin."""

    def __init__(self, index: np.ndarray, slots: int) -> None:
        if index.size > 1 and np.any(np.diff(index) < 0):  # not monotone: cannot happen
            raise AssertionError("bin index is not monotone in the confidence")
        self.bounds = np.searchsorted(index, np.arange(slots + 1), side="left")

    def sums(self, d: _Draw) -> BinSums:
        b = self.bounds
        return BinSums(
            _run_sums(d.w, b), _run_sums(d.conf, b), _run_sums(d.hits, b), float(d.w.shape[0])
        )


def _run_sums(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``[values[bounds[j]:bounds[j + 1]].sum() for j]`` (``bounds`` non-decreasing), in one
    ``add.reduceat`` over the non-empty runs."""
    out = np.zeros(bounds.shape[0] - 1)
    full = np.flatnonzero(bounds[1:] > bounds[:-1])
    if full.size:
        out[full] = np.add.reduceat(values[: bounds[full[-1] + 1]], bounds[full])
    return out


class _SortedTopLabel:
    """Top-label confidences and outcomes in ascending confidence, with their runs of ties."""

    def __init__(self, conf: np.ndarray, correct: np.ndarray) -> None:
        self.conf, self.correct = conf, correct
        new = np.empty(conf.shape[0], dtype=bool)
        new[:1] = True
        np.not_equal(conf[1:], conf[:-1], out=new[1:])
        self.tie_starts = np.flatnonzero(new)
        self.tie_of = np.cumsum(new) - 1
        lo = np.minimum.reduceat(correct, self.tie_starts)
        hi = np.maximum.reduceat(correct, self.tie_starts)
        self.mixed = lo != hi  # a run of ties with right and wrong predictions
        self._clipped_conf: np.ndarray | None = None
        self._clipped_starts: np.ndarray | None = None

    def equal_mass_sums(self, d: _Draw, n_bins: int) -> BinSums:
        """:func:`medibench.calibration._binning.equal_mass_sums` of the resample."""
        n = self.conf.shape[0]
        q, r = divmod(n, n_bins)
        sizes = np.full(n_bins, q, dtype=np.int64)
        sizes[:r] += 1
        cuts = np.cumsum(sizes)[:-1]  # resample positions where a bin starts
        # the sample covering each cut, the start of its run of ties, and how many draws of
        # that run fall before the cut
        k = np.searchsorted(d.cum, cuts, side="right")
        first = self.tie_starts[self.tie_of[k]]
        before = np.where(first > 0, d.cum[first - 1], 0)
        m = cuts - before
        conf_part = m * self.conf[first]
        runs = zip(first, self.tie_of[k], m, strict=True)
        hits_part = np.array([self._first_hits(d, int(a), int(t), int(c)) for a, t, c in runs])
        bounds = np.concatenate([[0], first, [n]])
        conf = _run_sums(d.conf, bounds)
        hits = _run_sums(d.hits, bounds)
        conf[:-1] += conf_part
        conf[1:] -= conf_part
        hits[:-1] += hits_part
        hits[1:] -= hits_part
        return BinSums(sizes.astype(np.float64), conf, hits, float(n))

    def _first_hits(self, d: _Draw, start: int, tie: int, m: int) -> float:
        """Correct predictions among the first ``m`` draws (in draw order) of the run of ties
        ``tie`` starting at sorted position ``start``."""
        if m == 0:
            return 0.0
        if not self.mixed[tie]:
            return m * float(self.correct[start])
        ends = self.tie_starts[tie + 1 : tie + 2]
        stop = int(ends[0]) if ends.size else self.conf.shape[0]
        drawn = d.ranked[(d.ranked >= start) & (d.ranked < stop)][:m]
        return float(self.correct[drawn].sum())

    def kbins_ace(
        self, d: _Draw, n_bins: int, *, cut_to_distinct: bool, clip: bool, method: str
    ) -> float:
        """:func:`medibench.calibration._mvcbench_paths.kbins_ace` of the resample."""
        conf = self._clipped() if clip else self.conf
        n = conf.shape[0]
        bins = n_bins
        if cut_to_distinct:
            distinct = min(n, int(np.count_nonzero(np.add.reduceat(d.counts, self._starts(conf)))))
            if distinct <= 1:
                return float(abs(d.hits.sum() / n - (d.w @ conf) / n))
            bins = int(max(2, min(n_bins, distinct)))
        levels = np.linspace(0, 100, bins + 1)
        edges = percentile_of_counts(conf, d.counts, d.cum, levels, method)
        edges = edges[np.ediff1d(edges, to_begin=np.inf) > 1e-8]
        # index = searchsorted(edges[1:-1], conf, "right"): bin j starts at conf >= edges[j]
        bounds = np.concatenate([[0], np.searchsorted(conf, edges[1:-1], side="left"), [n]])
        wconf = d.conf if conf is self.conf else d.w * conf
        gap = np.abs(_run_sums(d.hits, bounds) - _run_sums(wconf, bounds))
        return float(gap.sum() / n)

    def _clipped(self) -> np.ndarray:
        if self._clipped_conf is None:
            self._clipped_conf = np.clip(self.conf, 0.0, 1.0)
        return self._clipped_conf

    def _starts(self, conf: np.ndarray) -> np.ndarray:
        """The starts of the runs of ties of ``conf`` (the confidences, or them clipped)."""
        if conf is self.conf:
            return self.tie_starts
        if self._clipped_starts is None:
            self._clipped_starts = np.flatnonzero(np.r_[True, conf[1:] != conf[:-1]])
        return self._clipped_starts


def percentile_of_counts(
    sorted_values: np.ndarray,
    counts: np.ndarray,
    cum: np.ndarray,
    levels: np.ndarray,
    method: str,
) -> np.ndarray:
    """``numpy.percentile(numpy.repeat(sorted_values, counts), levels, method=method)``:
    the order statistics read off the running counts ``cum`` for ``"linear"`` (numpy's
    arithmetic, step by step); other methods through numpy on the repeated values."""
    if method != "linear":
        return np.asarray(
            np.percentile(np.repeat(sorted_values, counts), levels, method=cast(Any, method)),
            dtype=np.float64,
        )
    total = int(cum[-1])
    virtual = (total - 1) * np.true_divide(levels, 100)
    previous = np.floor(virtual)
    nxt = previous + 1
    above = virtual >= total - 1
    previous[above] = total - 1
    nxt[above] = total - 1
    below = virtual < 0
    previous[below] = 0
    nxt[below] = 0
    gamma = virtual - np.floor(virtual)
    a = sorted_values[np.searchsorted(cum, previous.astype(np.int64), side="right")]
    b = sorted_values[np.searchsorted(cum, nxt.astype(np.int64), side="right")]
    diff = b - a
    out = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out


class _Deposits:
    """The smooth-ECE residual grid of a resample: each sample's two cell shares, weighted."""

    def __init__(self, conf: np.ndarray, hits: np.ndarray) -> None:
        u = conf * GRID_CELLS - 0.5
        k0 = np.floor(u)
        frac = u - k0
        self.k0 = np.maximum(k0.astype(np.int64), 0)
        self.k1 = np.minimum(k0.astype(np.int64) + 1, GRID_CELLS - 1)
        r = hits - conf
        self.low, self.high = r * (1.0 - frac), r * frac

    def smooth_ece(self, d: _Draw) -> float:
        g = np.bincount(self.k0, weights=d.w * self.low, minlength=GRID_CELLS)
        g += np.bincount(self.k1, weights=d.w * self.high, minlength=GRID_CELLS)
        return smooth_ece_of_grid(g / d.w.shape[0], tol=1e-5)[0]


class _OneVsRest:
    """Per class, the one-vs-rest binned gap ``sum_b |hits_cb - conf_cb|`` of a resample:
    the probability sums of every (class, bin) in one sparse product with the counts."""

    def __init__(self, scores: np.ndarray, labels: np.ndarray, index: np.ndarray, slots: int):
        from scipy.sparse import csr_matrix

        n, c = scores.shape
        self.classes, self.slots = c, slots
        key = index + np.arange(c) * slots  # (n, c): row of the sparse matrix
        rows = key.T.ravel()
        cols = np.tile(np.arange(n, dtype=np.int32 if n < 2**31 else np.int64), c)
        self.matrix = csr_matrix((scores.T.ravel(), (rows, cols)), shape=(c * slots, n))
        self.hit_key = key[np.arange(n), labels]  # only the label's own entry is a positive

    def gaps(self, d: _Draw) -> np.ndarray:
        conf = self.matrix @ d.w
        hits = np.bincount(self.hit_key, weights=d.w, minlength=self.classes * self.slots)
        return np.abs(hits - conf).reshape(self.classes, self.slots).sum(axis=1)


def _path_probabilities(
    path: str, pred: Predictions
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The path's two readings of every row (what it bins, what its Brier and class-wise calls
    bin: :func:`~medibench.calibration._mvcbench_paths.vl_probabilities_twice`; one reading
    twice for Dassl), and (when saved probabilities disagree about looking like probabilities,
    so that a resample's reading depends on its rows) which rows do."""
    if pred.logits is not None and path == "vl":  # the trainer's softmax: always probabilities
        return (*vl_probabilities_twice(pred.logits, from_logits=True), None)
    s = pred.logits if pred.logits is not None else pred.probs
    floor = -1e-8 if path == "vl" else -1e-7
    if path == "vl":
        probs, again = vl_probabilities_twice(s, from_logits=False)
    else:
        probs = again = dassl_probabilities(s)
    rows_ok = np.all(s >= floor, axis=1) & (np.abs(s.sum(axis=1) - 1.0) <= 1e-4 + 1e-4 * 1.0)
    if rows_ok.all() or not rows_ok.any():
        return probs, again, None
    assert not _looks_like_probabilities(s, floor=floor)
    return probs, again, rows_ok
