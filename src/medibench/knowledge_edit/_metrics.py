"""Reliability, generality and locality per edit request, then over edits.

Per edit request (on the lines of one stage and one matcher):

* reliability = the fraction of its reliability probes right after the edit;
* generality = the fraction of its generality probes *wrong before* the edit that are right
  after it; undefined when none was wrong before;
* locality = the fraction of its locality probes *right before* the edit that are still right
  after it; undefined when none was right before.

An undefined value is ``None`` with its reason, never 0 or 1. A probe whose matcher could not
decide (``pre_correct`` or ``post_correct`` null) is left out and counted as missing. The macro
value is the mean over the edits where the value is defined (the undefined ones counted), with a
percentile bootstrap CI over those edits (:func:`medibench.stats.bootstrap_ci`); the micro value
pools the counted probes of every edit (a diagnostic: edits with many probes weigh more).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medibench.knowledge_edit._results import STAGES, ResultLine
from medibench.knowledge_edit._tasks import TASK_TYPES
from medibench.stats import bootstrap_ci

__all__ = ["METRICS", "EditValue", "edit_values", "summarize", "summarize_group"]

METRICS = ("reliability", "generality", "locality")


@dataclass(frozen=True)
class EditValue:
    """One edit's value of one metric: ``value`` (``None`` when undefined, ``reason`` says why)
    over ``n`` counted probes (``hits`` of them right after), ``n_missing`` left out."""

    value: float | None
    reason: str | None
    n: int
    hits: int
    n_missing: int = 0


def edit_values(lines: Iterable[ResultLine]) -> dict[str, dict[str, EditValue]]:
    """``{edit_id: {metric: EditValue}}`` for lines of one stage and one matcher."""
    by_edit: dict[str, list[ResultLine]] = defaultdict(list)
    for line in lines:
        by_edit[line.edit_id].append(line)
    return {e: {m: _value(m, ls) for m in METRICS} for e, ls in by_edit.items()}


def _value(metric: str, lines: Sequence[ResultLine]) -> EditValue:
    mine = [x for x in lines if x.kind == metric]
    if not mine:
        return EditValue(None, f"no {metric} probe", 0, 0)
    decided = [x for x in mine if x.pre_correct is not None and x.post_correct is not None]
    missing = len(mine) - len(decided)
    if metric == "reliability":
        counted = decided
    elif metric == "generality":
        counted = [x for x in decided if not x.pre_correct]
    else:
        counted = [x for x in decided if x.pre_correct]
    if not counted:
        if not decided:
            reason = f"every {metric} probe is missing (the matcher could not decide)"
        elif metric == "generality":
            reason = "no generality probe was wrong before the edit"
        elif metric == "locality":
            reason = "no locality probe was right before the edit"
        else:
            reason = "no reliability probe"
        return EditValue(None, reason, 0, 0, missing)
    hits = sum(1 for x in counted if x.post_correct)
    return EditValue(hits / len(counted), None, len(counted), hits, missing)


def summarize_group(
    lines: Sequence[ResultLine], *, n_resamples: int = 1000, seed: int = 42
) -> dict[str, Any]:
    """Macro values (with CIs), micro values, ``n_edits``, undefined counts and reasons."""
    values = edit_values(lines)
    out: dict[str, Any] = {}
    micro: dict[str, float | None] = {}
    undefined: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {}
    ci: dict[str, list[float] | None] = {}
    n_missing: dict[str, int] = {}
    for m in METRICS:
        per = [v[m] for v in values.values()]
        defined = [v.value for v in per if v.value is not None]
        out[m] = float(np.mean(defined)) if defined else None
        undefined[m] = len(per) - len(defined)
        reasons[m] = dict(Counter(v.reason for v in per if v.reason is not None))
        n = sum(v.n for v in per)
        micro[m] = sum(v.hits for v in per) / n if n else None
        n_missing[m] = sum(v.n_missing for v in per)
        if len(defined) > 1:  # one value: no spread to resample (None, never [v, v])
            lo, hi = bootstrap_ci(defined, n_resamples=n_resamples, seed=seed)
            ci[m] = [float(lo), float(hi)]
        else:
            ci[m] = None
    return {**out, "n_edits": len(values), "n_undefined": undefined, "micro": micro,
            "ci95": ci, "undefined_reasons": reasons, "n_missing": n_missing}  # fmt: skip


def summarize(
    lines: Sequence[ResultLine],
    *,
    matcher: str | None = None,
    n_resamples: int = 1000,
    seed: int = 42,
) -> dict[str, Any]:
    """The ``edit score`` JSON: the immediate stage's macro ``reliability``, ``generality``,
    ``locality`` at the top level with ``n_edits`` and ``n_undefined``; the same per task type
    (``by_task_type``, immediate stage) and per stage (``by_stage``); the top-level values of
    every matcher in the file (``by_matcher``).

    ``matcher``: the one to report (default: ``exact`` when present, else the file's only one).

    Raises:
        ValueError: no lines, or ``matcher`` not in the file (naming the ones that are).
    """
    if not lines:
        raise ValueError("no results lines to score")
    matchers = sorted({x.matcher for x in lines})
    if matcher is None:
        matcher = "exact" if "exact" in matchers else matchers[0]
    if matcher not in matchers:
        raise ValueError(
            f"matcher {matcher!r} is not in the results (found: {', '.join(matchers)})"
        )
    kw = {"n_resamples": n_resamples, "seed": seed}
    mine = [x for x in lines if x.matcher == matcher]
    stages = {s: [x for x in mine if x.stage == s] for s in STAGES}
    top = summarize_group(stages["immediate"], **kw) if stages["immediate"] else _empty()
    by_type = {
        t: summarize_group(group, **kw)
        for t in TASK_TYPES
        if (group := [x for x in stages["immediate"] if x.task_type == t])
    }
    by_stage = {s: summarize_group(group, **kw) for s, group in stages.items() if group}
    by_matcher = {}
    for m in matchers:
        imm = [x for x in lines if x.matcher == m and x.stage == "immediate"]
        if imm:
            g = summarize_group(imm, **kw)
            by_matcher[m] = {k: g[k] for k in (*METRICS, "n_edits", "n_undefined")}
    return {"matcher": matcher, **top, "by_task_type": by_type, "by_stage": by_stage,
            "by_matcher": by_matcher}  # fmt: skip


def _empty() -> dict[str, Any]:
    none = dict.fromkeys(METRICS)
    return {**none, "n_edits": 0, "n_undefined": dict.fromkeys(METRICS, 0), "micro": none,
            "ci95": none, "undefined_reasons": {m: {} for m in METRICS},
            "n_missing": dict.fromkeys(METRICS, 0)}  # fmt: skip
