"""Agreement between two raters: two judges, or a judge and clinicians.

Ratings are ``{(model, sample_id, metric): value}``. They come from a CSV
(:func:`load_ratings_csv`: long ``sample_id, model, metric, value`` or wide ``sample_id, model,
<metric>...``), from a run's score rows (:func:`ratings_from_run`) or from the judgements one
judge model made in a run (``judge_model=``). :func:`agreement_table` pairs two raters on the
keys both rated and computes, per metric:

* Pearson r, Spearman rho and Kendall tau-b over the paired values, and ICC(2,1) (two-way
  random effects, absolute agreement, single rater; formulas in :mod:`medibench.stats`).
  Unlike a correlation, ICC it penalises a rater that is systematically higher: use the same scale
  for both raters (``ea`` is 0-1 in a run; give human ratings on 0-1 too, or compare raw
  ``editing_accuracy`` judgements).
* two-sided p-values of the three correlations (:func:`medibench.stats.correlation`, scipy's
  default tests: the t distribution for Pearson and Spearman, Kendall's exact distribution
  without ties and n <= 33, else its normal approximation); the pairs are treated as
  independent, which ratings of the same samples by several models are not quite.
* per-sample rank Spearman: for each sample rated for at least three models by both raters, the
  Spearman rho between the two raters' values across models; the mean over samples (a rater
  who ranks, 1 = best, gives a negative rho against scores, as MieDB's -0.905).

Confidence intervals are percentile bootstraps (:func:`medibench.stats.bootstrap_ci`,
seeded): pairs are resampled for the first four, samples for the rank statistic. A resample on
which a statistic is undefined (constant values) makes its interval undefined (``nan``).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from medibench import stats
from medibench.samples import Score
from medibench.stats import Estimate, icc_2_1, kendall, pearson, spearman  # also agreement's API

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
    "ratings_from_jsonl",
    "ratings_from_run",
    "ratings_from_scores",
    "read_values_csv",
    "spearman",
]

Ratings = dict[tuple[str, str, str], float]


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
            est = stats.paired_estimate(fn, x, y, n_resamples=n_resamples, seed=seed, level=level)
            method = _P_VALUES.get(fn)
            if method is None or len(x) < 3 or math.isnan(est.value):
                return est
            return replace(est, pvalue=stats.correlation(x, y, method=method).pvalue)

        rhos = per_sample_rank_spearman(a, b, metric)
        rank = (
            Estimate(
                float(np.mean(rhos)),
                *stats.bootstrap_ci(rhos, n_resamples=n_resamples, seed=seed, level=level),
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
                icc=paired(stats.icc_or_nan),
                rank_spearman=rank,
                n_rank_samples=len(rhos),
            )
        )
    return rows


#: The coefficients given a p-value (scipy's default test: :func:`medibench.stats.correlation`).
_P_VALUES: dict[Callable, stats.CorrelationMethod] = {
    pearson: "pearson",
    spearman: "spearman",
    kendall: "kendall",
}


# -- loading ratings --------------------------------------------------------------------------
def load_ratings(source: str | Path, *, protocol: str | None = None) -> Ratings:
    """Ratings from ``FILE.csv``, a score-record ``FILE.jsonl``, a run directory, or
    ``RUN#JUDGE_MODEL`` (that judge's judgements in the run)."""
    text = str(source)
    if "#" in text and not Path(text).exists():
        run, _, judge_model = text.rpartition("#")
        return ratings_from_run(run, protocol=protocol, judge_model=judge_model)
    path = Path(text)
    if path.is_dir():
        return ratings_from_run(path, protocol=protocol)
    if path.suffix.lower() == ".jsonl":
        return ratings_from_jsonl(path, protocol=protocol)
    return load_ratings_csv(path)


def load_ratings_csv(path: str | Path) -> Ratings:
    """Read ratings from CSV: long (``sample_id, model, metric, value``) or wide
    (``sample_id, model`` and one column per metric). Empty cells are missing, not 0.

    Raises:
        ValueError: no ``sample_id``/``model`` column, a non-numeric value (row named), a
            duplicate rating.
    """
    values = read_values_csv(path, ("sample_id", "model"))
    return {(model, sid, metric): v for (sid, model, metric), v in values.items()}


def read_values_csv(path: str | Path, keys: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    """``{(*key values, metric): value}`` of a CSV with the ``keys`` columns: long (``metric,
    value`` columns) or wide (one column per metric). Empty cells are missing, not 0.

    Raises:
        ValueError: a ``keys`` column missing, a non-numeric or non-finite value (line named), a
            duplicate value.
    """
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        cols = [c.strip() for c in reader.fieldnames or []]
        if not set(keys) <= set(cols):
            need = " and ".join(keys)
            raise ValueError(f"{path}: ratings CSV needs columns {need}, has {cols}")
        long = {"metric", "value"} <= set(cols)
        out: dict[tuple[str, ...], float] = {}
        for line, row in enumerate(reader, start=2):
            row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
            cells = (
                [(row["metric"], row["value"])]
                if long
                else [(c, row[c]) for c in cols if c not in keys]
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
                if not math.isfinite(value):
                    raise ValueError(
                        f"{path} line {line}: {metric} = {cell!r}: leave a missing value empty"
                    )
                key = (*(row[k] for k in keys), metric)
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
        return ratings_from_scores(store.scores(), protocol=protocol)


def ratings_from_scores(scores: Iterable[Score], *, protocol: str | None = None) -> Ratings:
    """The metric values of score records (of ``protocol`` ``"name"`` or ``"name@version"``
    when given): the lowest ``k`` with a finite value per (model, sample, metric)."""
    name, _, version = (protocol or "").partition("@")
    out: Ratings = {}
    for s in sorted(scores, key=lambda s: s.k):
        if (name and s.protocol != name) or (version and s.protocol_version != version):
            continue
        for metric, v in s.metrics.items():
            if v is not None and math.isfinite(v):
                out.setdefault((s.model or "", s.sample_id, metric), v)
    return out


def ratings_from_jsonl(path: str | Path, *, protocol: str | None = None) -> Ratings:
    """Ratings from a score-record JSONL file (as ``medibench score --out`` and ``medibench
    export`` write it), read as :func:`ratings_from_scores`.

    Raises:
        ValueError: a line that is not a score record (its line number named).
    """
    path = Path(path)
    records = []
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    records.append(Score.from_json(line))
                except ValueError as exc:  # a RecordError, or not JSON
                    raise ValueError(f"{path} line {line_no}: not a score record ({exc})") from None
    return ratings_from_scores(records, protocol=protocol)


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
