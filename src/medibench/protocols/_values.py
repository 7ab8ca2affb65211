"""Per-sample metric values of one model under a protocol's aggregation: the k reduction, the
caps, the metrics each sample declares, the missing policy and the pass rates (the first two
steps of :mod:`medibench.report._aggregate`; :mod:`medibench.runs` compares runs with them).
"""

from __future__ import annotations

import math
import sys
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from medibench._packed import MadeWhenLookedUp
from medibench.protocols._base import Aggregation
from medibench.samples import Sample, Score, sample_field

__all__ = ["Applicable", "ValueColumns", "Values", "mean_value", "per_sample_values"]

Values = dict[str, float | None]
#: A protocol's ``applicable_metrics``: the metrics that describe a sample, ``None``: all.
Applicable = Callable[[Sample], Iterable[str] | None]


def per_sample_values(
    records: Mapping[str, list[Score]],
    samples: Mapping[str, Sample],
    aggregation: Aggregation,
    how: str,
    metrics: Sequence[str],
    *,
    applicable: Applicable | None = None,
) -> ValueColumns:
    """``{sample_id: (has_output, {metric: value})}`` after the k reduction, the caps, the
    metrics each sample declares, the missing policy and the pass rates (``records`` in their
    order), held as :class:`ValueColumns`: a run of 100,000 samples keeps 8 bytes a value, not
    a dict per sample."""
    caps = dict(aggregation.caps)
    cols = ValueColumns([*metrics, *(name for name, _, _ in aggregation.pass_rates)])
    for sid, recs in records.items():
        has, vals = _reduced(recs, aggregation, how, metrics)
        for m, cap in caps.items():
            v = vals.get(m)
            if v is not None and v > cap:
                vals[m] = cap
        keep = _declared(applicable, samples[sid])
        if keep is not None:
            vals = {m: v if m in keep else None for m, v in vals.items()}
        cols.append(sid, has, vals)
    if aggregation.missing == "zero":
        observed = _applicable(cols, samples)
        for sid, (has, _vals) in cols.items():
            if not has:
                keep = _declared(applicable, samples[sid])
                if keep is None:
                    keep = observed[sample_field(samples[sid], "perspective")]
                for m in metrics:
                    cols.set(sid, m, 0.0 if m in keep else None)
    for name, metric, threshold in aggregation.pass_rates:
        lower = metric in aggregation.lower_is_better
        for sid, (_has, vals) in cols.items():
            cols.set(sid, name, _passed(vals.get(metric), threshold, lower))
    return cols


def _reduced(
    recs: Sequence[Any], aggregation: Aggregation, how: str, metrics: Sequence[str]
) -> tuple[bool, Values]:
    """One sample's records (``k``, ``status``, ``metrics``) after the k reduction: whether it
    has an output, and its value per metric."""
    ok = sorted((r for r in recs if r.status == "ok"), key=lambda r: r.k)
    if not ok:
        return False, {m: None for m in metrics}
    if how == "first":
        return True, {m: ok[0].metrics.get(m) for m in metrics}
    vals: Values = {}
    for m in metrics:
        got = [v for r in ok if (v := r.metrics.get(m)) is not None]
        if not got:
            vals[m] = None
        elif how == "best":
            vals[m] = min(got) if m in aggregation.lower_is_better else max(got)
        elif how == "mean":
            vals[m] = mean_value(got)
        else:
            raise ValueError(f"unknown k reduction {how!r}: use first, best or mean")
    return True, vals


class ValueColumns(MadeWhenLookedUp[tuple[bool, Values]]):
    """``{sample_id: (has_output, {name: value})}`` held as columns: per sample a row of
    ``names`` float64 values (and whether each is set), the row read as a mapping when looked
    up (what :func:`per_sample_values` returns)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(dict.fromkeys(names))
        self._col = {n: j for j, n in enumerate(self.names)}
        self._stored: dict[str, int] = {}  # sample id -> its row
        self._has = bytearray()
        self._set = bytearray()
        self._values = array("d")

    def append(self, sample_id: str, has: bool, values: Mapping[str, float | None]) -> None:
        """Add a sample's row (``values`` may name only some of ``names``; the rest unset)."""
        if sample_id in self._stored:
            raise ValueError(f"sample {sample_id!r} is already in the columns")
        self._stored[sys.intern(sample_id)] = len(self._has)
        self._has.append(bool(has))
        for n in self.names:
            v = values.get(n)
            self._set.append(v is not None)
            self._values.append(0.0 if v is None else float(v))

    def set(self, sample_id: str, name: str, value: float | None) -> None:
        at = self._stored[sample_id] * len(self.names) + self._col[name]
        self._set[at] = value is not None
        self._values[at] = 0.0 if value is None else float(value)

    def _make(self, key: str, stored: int) -> tuple[bool, Values]:
        return self._has[stored] == 1, _Row(self, stored)  # type: ignore[return-value]


class _Row(Mapping[str, float | None]):
    """One sample's values in :class:`ValueColumns`, read in place."""

    __slots__ = ("_cols", "_row")

    def __init__(self, cols: ValueColumns, row: int) -> None:
        self._cols, self._row = cols, row

    def __getitem__(self, name: str) -> float | None:
        if name not in self._cols._col:
            raise KeyError(name)
        return self.get(name)

    def get(self, name: str, default: Any = None) -> Any:
        cols = self._cols
        j = cols._col.get(name)
        if j is None:
            return default
        at = self._row * len(cols.names) + j
        return cols._values[at] if cols._set[at] else None

    def __iter__(self) -> Iterator[str]:
        return iter(self._cols.names)

    def __len__(self) -> int:
        return len(self._cols.names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def _passed(value: float | None, threshold: float, lower: bool) -> float | None:
    # A pass rate's per-sample value: 1.0 when the value passes the threshold, None without one.
    if value is None:
        return None
    return float(value <= threshold if lower else value >= threshold)


def _declared(applicable: Applicable | None, sample: Sample) -> set[str] | None:
    # The metrics a protocol declares for ``sample``; None: it declares none (hook or answer).
    names = None if applicable is None else applicable(sample)
    return None if names is None else set(names)


def _applicable(values: Mapping[str, tuple[bool, Values]], samples: Mapping[str, Sample]):
    # A metric applies to a perspective when some scored sample of it has a value.
    seen: dict[Any, set[str]] = defaultdict(set)
    for sid, (has, vals) in values.items():
        if has:
            key = sample_field(samples[sid], "perspective")
            seen[key].update(m for m, v in vals.items() if v is not None)
    return seen


def mean_value(values: Sequence[float]) -> float | None:
    """The mean (``math.fsum``), an infinity when one is there, ``None`` for none or both."""
    if not values:
        return None
    if any(math.isinf(v) for v in values):
        pos = any(v == math.inf for v in values)
        neg = any(v == -math.inf for v in values)
        return None if pos and neg else (math.inf if pos else -math.inf)
    return math.fsum(values) / len(values)
