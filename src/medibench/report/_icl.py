"""The in-context learning experiment in the report: each ``MODEL@icl-K`` against ``MODEL@icl-0``.

A run with ``--icl-k 0 --icl-k 1 ...`` holds one model entry per K
(:mod:`medibench.runs._icl`). Among the paired comparisons of every pair of models, those of an
entry with K > 0 and the same model's K = 0 entry are oriented ``A = MODEL@icl-K``,
``B = MODEL@icl-0`` (the difference is what the demonstrations changed, with its CI) and listed
first; every other pair stays as :func:`~medibench.stats.compare_models` orders it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from medibench.stats import compare_models

__all__ = ["against_icl_zero", "icl_baselines"]

_ENTRY = re.compile(r"^(?P<base>.+)@icl-(?P<k>\d+)$")


def icl_baselines(models: list[str] | Any) -> dict[str, str]:
    """``{MODEL@icl-K: MODEL@icl-0}`` for every entry with K > 0 whose K = 0 entry is there."""
    names = set(models)
    out = {}
    for name in sorted(names):
        m = _ENTRY.match(name)
        if m and int(m["k"]) > 0 and f"{m['base']}@icl-0" in names:
            out[name] = f"{m['base']}@icl-0"
    return out


def against_icl_zero(
    rows: list[dict[str, Any]],
    by_model: Mapping[str, Mapping[str, float | None]],
    *,
    metric: str,
    n_resamples: int,
    seed: int,
    level: float,
) -> list[dict[str, Any]]:
    """``rows`` (one metric's :func:`~medibench.stats.compare_models` rows over ``by_model``)
    with each ICL pair recomputed as ``A = MODEL@icl-K``, ``B = MODEL@icl-0`` and put first."""
    pairs = icl_baselines(list(by_model))
    if not pairs:
        return rows
    first, rest = [], []
    wanted = {frozenset(p): p for p in pairs.items()}
    for row in rows:
        pair = wanted.get(frozenset((row["model_a"], row["model_b"])))
        if pair is None:
            rest.append(row)
            continue
        with_k, zero = pair
        values = {"a": by_model[with_k], "b": by_model[zero]}  # "a" sorts first: A = K
        (again,) = compare_models(
            values, metric=metric, n_resamples=n_resamples, seed=seed, level=level
        )
        first.append({**again, "model_a": with_k, "model_b": zero})
    return first + rest
