"""Agreement between two raters: two judges, or a judge and clinicians.

Ratings are ``{(model, sample_id, metric): value}``. They come from a CSV
(:func:`load_ratings_csv`: long ``sample_id, model, metric, value`` or wide ``sample_id, model,
<metric>...``), from a run's score rows (:func:`ratings_from_run`) or from the judgements one
judge model made in a run (``judge_model=``). :func:`agreement_table` pairs two raters on the
keys both rated and computes, per metric:

* Pearson r, Spearman rho and Kendall tau-b over the paired values (``scipy.stats``);
* ICC(2,1): two-way random effects, absolute agreement, single rater (Shrout & Fleiss 1979;
  McGraw & Wong's ICC(A,1)). For ``n`` items rated by ``k`` raters (here ``k = 2``), with row
  (item) means, column (rater) means and grand mean ``m``::

      MSR = k * sum_i (row_i - m)^2 / (n - 1)                 between items
      MSC = n * sum_j (col_j - m)^2 / (k - 1)                 between raters
      MSE = (SST - SSR - SSC) / ((n - 1)(k - 1))             residual
      ICC(2,1) = (MSR - MSE) / (MSR + (k - 1) MSE + k (MSC - MSE) / n)

  Unlike a correlation it penalises a rater that is systematically higher: use the same scale
  for both raters (``ea`` is 0-1 in a run; give human ratings on 0-1 too, or compare raw
  ``editing_accuracy`` judgements).
* per-sample rank Spearman: for each sample rated for at least three models by both raters, the
  Spearman rho between the two raters' values across models; the mean over samples (a rater
  who ranks, 1 = best, gives a negative rho against scores, as MieDB's -0.905).

Confidence intervals are percentile bootstraps (:func:`medibench.report._stats.bootstrap_ci`,
seeded): pairs are resampled for the first four, samples for the rank statistic. A resample on
which a statistic is undefined (constant values) makes its interval undefined (``nan``).

Example:
    >>> icc_2_1([[1, 2], [2, 3], [3, 4]])  # rater 2 is always 1 higher
    0.6666666666666666
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from medibench.report._stats import bootstrap_ci

__all__ = [
    "AgreementRow",
    "Estimate",
    "Ratings",
    "agreement_table",
    "icc_2_1",
    "kendall",
    "load_ratings",
    "load_ratings_csv",
    "pearson",
    "per_sample_rank_spearman",
    "ratings_from_run",
    "spearman",
]

Ratings = dict[tuple[str, str, str], float]


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson r (``nan`` when either side is constant or n < 2)."""
    return _safe(lambda: stats.pearsonr(x, y)[0], x, y)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rho with average ranks for ties (``nan`` when undefined)."""
    return _safe(lambda: stats.spearmanr(x, y)[0], x, y)


def kendall(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall tau-b (``nan`` when undefined)."""
    return _safe(lambda: stats.kendalltau(x, y)[0], x, y)


def icc_2_1(ratings: Sequence[Sequence[float]]) -> float:
    """ICC(2,1) of an ``(n items, k raters)`` table (formula in the module docstring).

    Raises:
        ValueError: fewer than 2 items or 2 raters, or a missing value.
    """
    y = np.asarray(ratings, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2:
        raise ValueError(f"icc_2_1 needs an (n >= 2, k >= 2) table, got shape {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError("icc_2_1: the table has missing or infinite values")
    n, k = y.shape
    m = y.mean()
    ssr = k * ((y.mean(axis=1) - m) ** 2).sum()
    ssc = n * ((y.mean(axis=0) - m) ** 2).sum()
    sse = ((y - m) ** 2).sum() - ssr - ssc
    msr, msc, mse = ssr / (n - 1), ssc / (k - 1), sse / ((n - 1) * (k - 1))
    denom = msr + (k - 1) * mse + k * (msc - mse) / n
    return float((msr - mse) / denom) if denom != 0 else math.nan


def per_sample_rank_spearman(
    a: Ratings, b: Ratings, metric: str, *, min_models: int = 3
) -> list[float]:
    """Per sample, Spearman rho across models between the raters (samples with fewer than
    ``min_models`` models rated by both, or constant values, are left out)."""
    by_sample: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (model, sid, m), va in a.items():
        if m == metric and (model, sid, m) in b:
            by_sample[sid].append((va, b[(model, sid, m)]))
    out = []
    for sid in sorted(by_sample):
        pairs = by_sample[sid]
        if len(pairs) >= min_models:
            rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
            if not math.isnan(rho):
                out.append(rho)
    return out


@dataclass(frozen=True)
class Estimate:
    """A statistic and its bootstrap interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "-"
        ci = "" if math.isnan(self.low) else f" [{self.low:.3f}, {self.high:.3f}]"
        return f"{self.value:.3f}{ci}"


@dataclass(frozen=True)
class AgreementRow:
    """Agreement of two raters on one metric over ``n`` paired (model, sample) ratings."""

    metric: str
    n: int
    pearson: Estimate
    spearman: Estimate
    kendall: Estimate
    icc: Estimate
    rank_spearman: Estimate
    n_rank_samples: int


def agreement_table(
    a: Ratings,
    b: Ratings,
    *,
    metrics: Iterable[str] | None = None,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
) -> list[AgreementRow]:
    """One :class:`AgreementRow` per metric both raters rated (or per ``metrics``)."""
    common = sorted(set(a) & set(b))
    names = list(metrics) if metrics is not None else sorted({m for _, _, m in common})
    rows = []
    for metric in names:
        keys = [key for key in common if key[2] == metric]
        x = np.array([a[key] for key in keys], dtype=np.float64)
        y = np.array([b[key] for key in keys], dtype=np.float64)

        def paired(fn: Callable[[np.ndarray, np.ndarray], float], x=x, y=y) -> Estimate:
            return _paired_estimate(fn, x, y, n_resamples, seed, level)

        rhos = per_sample_rank_spearman(a, b, metric)
        rank = (
            Estimate(
                float(np.mean(rhos)),
                *bootstrap_ci(rhos, n_resamples=n_resamples, seed=seed, level=level),
            )
            if rhos
            else Estimate(math.nan, math.nan, math.nan)
        )
        rows.append(
            AgreementRow(
                metric=metric,
                n=len(keys),
                pearson=paired(pearson),
                spearman=paired(spearman),
                kendall=paired(kendall),
                icc=paired(_icc_or_nan),
                rank_spearman=rank,
                n_rank_samples=len(rhos),
            )
        )
    return rows


def _paired_estimate(fn, x, y, n_resamples, seed, level) -> Estimate:
    value = fn(x, y) if len(x) >= 2 else math.nan
    if len(x) < 3 or math.isnan(value):
        return Estimate(value, math.nan, math.nan)
    batched = _BATCHED.get(fn)

    # bootstrap_ci resamples its values; resampling the indices resamples the pairs.
    def statistic(idx: np.ndarray, axis: int) -> np.ndarray:
        rows = idx.astype(np.intp)
        if batched is not None:
            return batched(x[rows], y[rows])
        return np.array([fn(x[row], y[row]) for row in rows])

    low, high = bootstrap_ci(
        np.arange(len(x)), n_resamples=n_resamples, seed=seed, level=level, statistic=statistic
    )
    return Estimate(value, low, high)


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of each row pair of two (r, n) arrays (nan for a constant row)."""
    xc, yc = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * yc).sum(axis=1) / den, np.nan)


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _pearson_rows(stats.rankdata(x, axis=1), stats.rankdata(y, axis=1))


def _icc_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ICC(2,1) of each row pair (k = 2 raters, n = row length), as :func:`icc_2_1`."""
    n = x.shape[1]
    m = (x.mean(axis=1) + y.mean(axis=1)) / 2
    row = (x + y) / 2
    ssr = 2 * ((row - m[:, None]) ** 2).sum(axis=1)
    ssc = n * ((x.mean(axis=1) - m) ** 2 + (y.mean(axis=1) - m) ** 2)
    sst = ((x - m[:, None]) ** 2).sum(axis=1) + ((y - m[:, None]) ** 2).sum(axis=1)
    msr, msc, mse = ssr / (n - 1), ssc, (sst - ssr - ssc) / (n - 1)
    den = msr + mse + 2 * (msc - mse) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den != 0, (msr - mse) / den, np.nan)


def _icc_or_nan(x: np.ndarray, y: np.ndarray) -> float:
    return icc_2_1(np.column_stack([x, y])) if len(x) >= 2 else math.nan


def _safe(fn, x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) != len(y):
        raise ValueError(f"paired values differ in length: {len(x)} and {len(y)}")
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(fn())


_BATCHED = {pearson: _pearson_rows, spearman: _spearman_rows, _icc_or_nan: _icc_rows}


# -- loading ratings --------------------------------------------------------------------------
def load_ratings(source: str | Path, *, protocol: str | None = None) -> Ratings:
    """Ratings from ``FILE.csv``, a run directory, or ``RUN#JUDGE_MODEL`` (that judge's
    judgements in the run)."""
    text = str(source)
    if "#" in text and not Path(text).exists():
        run, _, judge_model = text.rpartition("#")
        return ratings_from_run(run, protocol=protocol, judge_model=judge_model)
    path = Path(text)
    if path.is_dir():
        return ratings_from_run(path, protocol=protocol)
    return load_ratings_csv(path)


def load_ratings_csv(path: str | Path) -> Ratings:
    """Read ratings from CSV: long (``sample_id, model, metric, value``) or wide
    (``sample_id, model`` and one column per metric). Empty cells are missing, not 0.

    Raises:
        ValueError: no ``sample_id``/``model`` column, a non-numeric value (row named), a
            duplicate rating.
    """
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        cols = [c.strip() for c in reader.fieldnames or []]
        if not {"sample_id", "model"} <= set(cols):
            raise ValueError(f"{path}: ratings CSV needs columns sample_id and model, has {cols}")
        long = {"metric", "value"} <= set(cols)
        out: Ratings = {}
        for line, row in enumerate(reader, start=2):
            row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
            cells = (
                [(row["metric"], row["value"])]
                if long
                else [(c, row[c]) for c in cols if c not in ("sample_id", "model")]
            )
            for metric, cell in cells:
                if cell == "":
                    continue
                try:
                    value = float(cell)
                except ValueError:
                    raise ValueError(
                        f"{path} line {line}: {metric} = {cell!r} is not a number"
                    ) from None
                key = (row["model"], row["sample_id"], metric)
                if key in out:
                    raise ValueError(f"{path} line {line}: a second rating for {key}")
                out[key] = value
    return out


def ratings_from_run(
    run: str | Path, *, protocol: str | None = None, judge_model: str | None = None
) -> Ratings:
    """Ratings held by a run.

    Without ``judge_model``: the score rows' metric values (of ``protocol`` ``"name"`` or
    ``"name@version"`` when given), the lowest ``k`` with a value per (model, sample, metric).
    With ``judge_model``: the ``ok`` scores of that judge model's judgements (mean over passes,
    mapped to the metric names its protocol fills, scaled the same way).
    """
    from medibench.runs import RunStore

    with RunStore.open_existing(run) as store:
        if judge_model is not None:
            return _from_judgements(store, judge_model, protocol)
        name, _, version = (protocol or "").partition("@")
        out: Ratings = {}
        for s in sorted(store.scores(name or None), key=lambda s: s.k):
            if version and s.protocol_version != version:
                continue
            for metric, v in s.metrics.items():
                if v is not None and math.isfinite(v):
                    out.setdefault((s.model or "", s.sample_id, metric), v)
    return out


def _from_judgements(store, judge_model: str, protocol: str | None) -> Ratings:
    from medibench.judges._protocols import load_judge
    from medibench.judges._records import JudgementStore

    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    lowest_k: dict[tuple[str, str, str], int] = {}
    for model, sid, k, j in JudgementStore(store).linked(judge_model=judge_model):
        judge = load_judge(j.judge)
        fills = [f for f in judge.fills if protocol is None or f.protocol.startswith(protocol)]
        for f in {(f.metric, f.field, f.divide_by) for f in fills}:
            metric, fld, div = f
            if fld in j.scores:
                key = (model, sid, metric)
                if lowest_k.setdefault(key, k) == k:
                    values[key].append(j.scores[fld] / div)
    if not values:
        raise ValueError(f"{store.run_dir}: no judgements by judge model '{judge_model}'")
    return {key: float(np.mean(v)) for key, v in values.items()}
