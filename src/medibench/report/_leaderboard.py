"""Leaderboards: per-group, per-model means of score records.

Means are per-sample means over the values that exist: a metric that is ``None`` (not computable,
or the prediction is missing) is left out and counted in ``n_missing``, never averaged in as 0.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from medibench.io import atomic_write_text
from medibench.samples import Sample, Score

__all__ = ["leaderboard", "write_leaderboard_csv"]


def leaderboard(
    scores: Iterable[Score],
    samples: Mapping[str, Sample],
    *,
    by: str = "perspective",
    metrics: Sequence[str] | None = None,
) -> list[dict]:
    """One row per (group, model): ``{by, model, n, n_missing, <metric>: mean or None}``.

    ``by`` is a Sample field (``perspective``, ``task``, ``region``, ``modality``) or ``"all"``.
    Only metrics with at least one value in a group appear in its row (others are ``None``).
    ``n`` counts score records with status ``ok``; ``n_missing`` the others.
    """
    groups: dict[tuple[str, str], list[Score]] = defaultdict(list)
    for s in scores:
        sample = samples.get(s.sample_id)
        if sample is None:
            continue
        group = "all" if by == "all" else str(_field(sample, by))
        groups[(group, s.model or "")].append(s)
    names = (
        list(metrics)
        if metrics is not None
        else sorted({m for rows in groups.values() for r in rows for m in r.metrics})
    )
    out = []
    for (group, model), rows in sorted(groups.items()):
        row: dict = {
            by: group,
            "model": model,
            "n": sum(r.status == "ok" for r in rows),
            "n_missing": sum(r.status != "ok" for r in rows),
        }
        for m in names:
            values = [r.metrics[m] for r in rows if r.metrics.get(m) is not None]
            row[m] = math.fsum(values) / len(values) if values else None
            if any(math.isinf(v) for v in values):
                row[m] = float("inf") if all(v > 0 for v in values if math.isinf(v)) else None
        out.append(row)
    return out


def write_leaderboard_csv(rows: Sequence[dict], path: str | Path) -> Path:
    """Write leaderboard rows as CSV (atomically); ``None`` is an empty cell."""
    if not rows:
        raise ValueError("no leaderboard rows to write (were any predictions scored?)")
    cols = list(rows[0])
    for r in rows[1:]:
        cols += [c for c in r if c not in cols]
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in cols})
    return atomic_write_text(path, buf.getvalue())


def _field(sample: Sample, name: str):
    value = getattr(sample, name)
    return getattr(value, "value", value)
