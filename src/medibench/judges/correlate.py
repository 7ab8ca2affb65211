"""Agreement across models (of evaluators, benchmarks, humans): per-model values of two or more
sources side by side, their correlations with p-values and bootstrap intervals, and a linear fit
(``medibench analyze correlate``; docs/analysis.md).

A source is written ``[LABEL=]PATH[:METRIC]``. ``PATH`` is

* a run folder, ``RUN#JUDGE_MODEL`` (that judge's judgements), a score-record JSONL file
  (``medibench score --out``, ``medibench export``) or a ratings CSV with a ``sample_id`` column:
  per-sample values (:func:`medibench.judges.agreement.load_ratings`: the first draw of each
  sample), whose mean per model is the model's value;
* a CSV without ``sample_id``: model-level values, ``model, metric, value`` (long) or ``model``
  and one column per metric (``model, score``; ``model, rank`` for a human ranking);
* a summary CSV of ``medibench score --csv`` (columns ``model, by, group``, ...): each model's
  benchmark number, its overall row (``by = all``) of the first k mode, macro-averaged where the
  protocol averages over groups (PaintBench's mIoU over categories), else over samples.

``METRIC`` picks the metric (else ``--metric`` when the source has it, else its only one). A
ranking (1 = best) against scores correlates negatively: MieDB-100k's rho = -0.905 is such a
pair. The statistics are :mod:`medibench.stats`'s; the fit regresses each pair's second source on
its first.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medibench import stats

__all__ = [
    "CorrelateResult",
    "PairStatistics",
    "Source",
    "correlate",
    "load_source",
    "parse_source",
]


@dataclass(frozen=True)
class Source:
    """One column of model values: ``values[model]``, the mean of ``samples[model]`` (sample id
    -> value) when the source has per-sample values (``samples`` is ``None`` otherwise)."""

    label: str
    path: str
    metric: str
    values: dict[str, float]
    samples: dict[str, dict[str, float]] | None = None

    def n(self, model: str) -> int:
        """Samples behind a model's value (1 for a model-level value)."""
        return 1 if self.samples is None else len(self.samples[model])


@dataclass(frozen=True)
class PairStatistics:
    """Statistics of two sources over the models both hold: one :class:`~medibench.stats.
    Correlation` per method (its CI over resampled models), the interval resampling samples
    within models (``samples_ci[method] = (low, high, n_undefined)``; absent when neither source
    has per-sample values), and the fit of ``y`` (source ``b``) on ``x`` (source ``a``)."""

    a: str
    b: str
    models: tuple[str, ...]
    correlations: dict[str, stats.Correlation]
    samples_ci: dict[str, tuple[float, float, int]]
    fit: stats.LinearFit | None


@dataclass(frozen=True)
class CorrelateResult:
    sources: tuple[Source, ...]
    models: tuple[str, ...]
    pairs: tuple[PairStatistics, ...]
    settings: dict[str, Any] = field(default_factory=dict)

    def model_rows(self) -> list[dict[str, Any]]:
        """One row per model: its value and sample count in each source."""
        rows = []
        for m in self.models:
            row: dict[str, Any] = {"model": m}
            for s in self.sources:
                row[s.label] = s.values[m]
                row[f"{s.label}_n"] = s.n(m)
            rows.append(row)
        return rows

    def statistic_rows(self) -> list[dict[str, Any]]:
        """One row per (pair, method): every number, ``None`` for an undefined one."""
        rows = []
        for p in self.pairs:
            for method, c in p.correlations.items():
                low, high, undef = p.samples_ci.get(method, (math.nan, math.nan, 0))
                row = {
                    "a": p.a,
                    "b": p.b,
                    "method": method,
                    "n_models": c.n,
                    "statistic": c.statistic,
                    "pvalue": c.pvalue,
                    "pvalue_method": c.pvalue_method,
                    "n_permutations": c.n_permutations,
                    "ci_level": c.ci_level,
                    "ci_models_low": c.ci_low,
                    "ci_models_high": c.ci_high,
                    "ci_models_undefined": c.n_undefined,
                    "ci_samples_low": low,
                    "ci_samples_high": high,
                    "ci_samples_undefined": undef if method in p.samples_ci else None,
                    "n_resamples": c.n_resamples,
                }
                if p.fit is not None:
                    row |= {
                        f"fit_{k}": getattr(p.fit, k)
                        for k in ("slope", "intercept", "r_squared", "pvalue", "stderr")
                    }
                rows.append({k: _none(v) for k, v in row.items()})
        return rows


def parse_source(text: str) -> tuple[str | None, str, str | None]:
    """``[LABEL=]PATH[:METRIC]`` as ``(label, path, metric)``; an existing path is taken whole
    (a label has no ``/`` or ``:``, a metric no ``/`` or ``#``)."""
    label = None
    if "=" in text and not Path(text).exists():
        head, _, rest = text.partition("=")
        if head and not set(head) & set("/:\\"):
            label, text = head, rest
    metric = None
    if ":" in text and not Path(text).exists():
        path, _, tail = text.rpartition(":")
        if path and tail and not set(tail) & set("/\\#"):
            text, metric = path, tail
    return label, text, metric


def load_source(
    text: str, *, metric: str | None = None, protocol: str | None = None, label: str | None = None
) -> Source:
    """The :class:`Source` written ``text`` (module docstring); ``metric`` and ``label`` are
    the defaults when ``text`` names none.

    Raises:
        ValueError: an unreadable source, a metric it lacks (its metrics listed), a model with
            no value.
    """
    own_label, path, own_metric = parse_source(text)
    label = own_label or label or _default_label(path)
    p = Path(path)
    header = _header(p) if p.suffix.lower() == ".csv" and p.is_file() else ["sample_id"]
    if {"model", "by", "group"} <= set(header):
        table = _summary_csv(p, protocol)
        name = _choose_metric(own_metric, metric, set(table), text)
        return Source(label, path, name, table[name])
    if "sample_id" not in header:
        table = _model_level_csv(p)
        name = _choose_metric(own_metric, metric, set(table), text)
        return Source(label, path, name, table[name])
    from medibench.judges.agreement import load_ratings

    try:
        ratings = load_ratings(path, protocol=protocol)
    except (OSError, FileNotFoundError) as exc:
        raise ValueError(f"source {text!r}: {exc}") from None
    if not ratings:
        raise ValueError(f"source {text!r}: no metric values")
    name = _choose_metric(own_metric, metric, {m for _, _, m in ratings}, text)
    samples: dict[str, dict[str, float]] = defaultdict(dict)
    for (model, sid, m), v in ratings.items():
        if m == name:
            samples[model][sid] = v
    values = {model: float(np.mean(list(vs.values()))) for model, vs in samples.items()}
    return Source(label, path, name, values, dict(samples))


def human_source(path: str | Path) -> Source:
    """``--human FILE``: a model-level CSV with a ``rank`` or a ``score`` column (or one value
    column), labelled ``human``."""
    table = _model_level_csv(Path(path))
    names: list[str] = [n for n in ("rank", "score") if n in table] or sorted(table)
    if len(names) != 1:
        have = sorted(table)
        raise ValueError(f"{path}: a human file needs one rank or score column, has {have}")
    return Source("human", str(path), names[0], table[names[0]])


def correlate(
    sources: list[Source],
    *,
    methods: tuple[str, ...] = ("spearman", "kendall", "pearson"),
    pvalue: stats.PValueMethod = "auto",
    n_permutations: int = 9999,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    models: list[str] | None = None,
) -> CorrelateResult:
    """Every pair of ``sources`` over the models (``models``, else all of the first source's):
    the correlations of ``methods`` with p-values, their bootstrap intervals over models and over
    samples within models, and the linear fit.

    Raises:
        ValueError: fewer than two sources, a label twice, a model missing from a source (both
            named), fewer than 3 models, a constant or missing value.
    """
    if len(sources) < 2:
        raise ValueError("correlate needs at least two sources (or one and --human)")
    labels = [s.label for s in sources]
    if len(set(labels)) < len(labels):
        raise ValueError(f"sources share a label ({labels}): name them LABEL=PATH")
    chosen = list(models) if models else sorted(sources[0].values)
    for s in sources:
        missing = [m for m in chosen if m not in s.values]
        if missing:
            raise ValueError(
                f"source {s.label!r} ({s.path}) has no {s.metric} value for model(s) "
                f"{', '.join(missing)}; choose the models with --model"
            )
    if len(chosen) < 3:
        raise ValueError(f"a correlation across models needs at least 3 models, got {chosen}")
    pairs = []
    for i, a in enumerate(sources):
        for b in sources[i + 1 :]:
            pairs.append(
                _pair(a, b, chosen, methods, pvalue, n_permutations, n_resamples, seed, level)
            )
    settings = {
        "pvalue": pvalue,
        "n_permutations": n_permutations,
        "n_resamples": n_resamples,
        "seed": seed,
        "level": level,
    }
    return CorrelateResult(tuple(sources), tuple(chosen), tuple(pairs), settings)


# --- helpers ---------------------------------------------------------------------------------


def _pair(a, b, models, methods, pvalue, n_permutations, n_resamples, seed, level):
    x = np.array([a.values[m] for m in models])
    y = np.array([b.values[m] for m in models])
    within = None
    if a.samples is not None or b.samples is not None:
        within = [_rows(a, b, m) for m in models]
    correlations, samples_ci = {}, {}
    for method in methods:
        where = f"{a.label} vs {b.label}"
        try:
            c = stats.correlation(
                x, y, method=method, pvalue=pvalue, n_permutations=n_permutations, seed=seed
            )
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        low, high, undef = stats.correlation_ci(
            x, y, method=method, n_resamples=n_resamples, seed=seed, level=level
        )
        correlations[method] = _with_ci(c, low, high, undef, level, n_resamples)
        if within is not None:
            samples_ci[method] = stats.correlation_ci(
                x, y, method=method, within=within, n_resamples=n_resamples, seed=seed, level=level
            )
    return PairStatistics(a.label, b.label, tuple(models), correlations, samples_ci, _fit(x, y))


def _with_ci(c, low, high, undefined, level, n_resamples):
    from dataclasses import replace

    return replace(
        c,
        ci_low=low,
        ci_high=high,
        ci_level=level,
        ci_resampling="models",
        n_resamples=n_resamples,
        n_undefined=undefined,
    )


def _fit(x: np.ndarray, y: np.ndarray) -> stats.LinearFit | None:
    try:
        return stats.linear_fit(x, y)
    except ValueError:
        return None


def _rows(a: Source, b: Source, model: str):
    """Model ``model``'s per-sample rows of two sources, aligned by sample id (``None`` for a
    model-level source)."""
    ids = sorted(set((a.samples or {}).get(model, {})) | set((b.samples or {}).get(model, {})))

    def side(s: Source):
        if s.samples is None:
            return None
        return np.array([s.samples[model].get(sid, math.nan) for sid in ids])

    return side(a), side(b)


def _choose_metric(own: str | None, default: str | None, have: set[str], text: str) -> str:
    if own is not None:
        if own not in have:
            raise ValueError(f"source {text!r} has no metric {own!r}; it has {sorted(have)}")
        return own
    if default is not None and default in have:
        return default
    if len(have) == 1:
        return next(iter(have))
    asked = f"no metric {default!r}" if default else "several metrics"
    raise ValueError(
        f"source {text!r} has {asked}: name one as {text}:METRIC or --metric "
        f"(it has {', '.join(sorted(have))})"
    )


def _header(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [c.strip() for c in next(csv.reader(fh), [])]


def _model_level_csv(path: Path) -> dict[str, dict[str, float]]:
    """``{metric: {model: value}}`` of a model-level CSV (long or wide; empty cells left out)."""
    from medibench.judges.agreement import read_values_csv

    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (model, metric), value in read_values_csv(path, ("model",)).items():
        out[metric][model] = value
    if not out:
        raise ValueError(f"{path}: no values")
    return dict(out)


_SUMMARY_KEYS = {"protocol", "protocol_version", "model", "k_mode", "by", "group", "n", "n_missing"}


def _summary_csv(path: Path, protocol: str | None) -> dict[str, dict[str, float]]:
    """``{metric: {model: value}}`` of a score summary CSV: per model, the overall row
    (``by == "all"``) of the first k mode, the macro one when there is one (module docstring);
    an empty, text or non-finite cell is no value.

    Raises:
        ValueError: no overall row, several protocols and no ``protocol`` to choose (named).
    """
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [
            {(k or "").strip(): (v or "").strip() for k, v in r.items()} for r in csv.DictReader(fh)
        ]
    named = sorted({f"{r.get('protocol', '')}@{r.get('protocol_version', '')}" for r in rows})
    if protocol is not None:
        rows = [
            r
            for r in rows
            if protocol in (r.get("protocol"), f"{r.get('protocol')}@{r.get('protocol_version')}")
        ]
        if not rows:
            raise ValueError(
                f"{path}: no rows of protocol {protocol!r} (it has {', '.join(named)})"
            )
    elif len(named) > 1:
        raise ValueError(f"{path}: a summary of {', '.join(named)}: choose one with --protocol")
    chosen: dict[str, dict[str, str]] = {}
    first_k: dict[str, str] = {}
    for row in rows:
        if row["by"] != "all" or row.get("k_mode", "") != first_k.setdefault(
            row["model"], row.get("k_mode", "")
        ):
            continue
        if row["model"] not in chosen or row["group"].startswith("macro"):
            chosen[row["model"]] = row
    if not chosen:
        raise ValueError(f"{path}: no overall row (by = all) in this summary")
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for model, row in chosen.items():
        for col, cell in row.items():
            if col in _SUMMARY_KEYS or col.endswith(("_n", "_ci_low", "_ci_high")):
                continue
            value = _number(cell)  # text columns (notes, extractors) are no metric
            if value is not None and math.isfinite(value):
                out[col][model] = value
    return dict(out)


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _default_label(path: str) -> str:
    run, _, judge = path.rpartition("#") if "#" in path else (path, "", "")
    name = Path(run).stem or run
    return f"{name}#{judge}" if judge else name


def _none(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v
