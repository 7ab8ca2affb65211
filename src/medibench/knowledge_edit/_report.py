"""The report's model-editing section: one table per (model, editor, setting) stored in the
run, from the stored results lines (:func:`summarize`: macro values with their CIs, undefined
counts, per task type and per stage)."""

from __future__ import annotations

from typing import Any

from medibench.knowledge_edit._metrics import METRICS, summarize
from medibench.knowledge_edit._store import edit_groups, edit_records, edit_results
from medibench.knowledge_edit._tasks import TASK_TYPE_NAMES

__all__ = ["editing_panel", "editing_tables"]


def editing_panel(store: Any, run_dir: Any = None) -> dict[str, Any] | None:
    """The report panel (:mod:`medibench.report._panels`): the tables below, or ``None``."""
    tables = editing_tables(store)
    if not tables:
        return None
    summary = f"{len(tables)} model x editor x setting table(s)"
    return {"id": "model-editing", "title": "Model editing", "summary": summary, "tables": tables}


def editing_tables(store: Any) -> list[dict[str, Any]]:
    """``[{"title", "columns", "rows", "notes"}]`` for the HTML report (empty without edits)."""
    records = edit_records(store)
    out = []
    for model, editor, setting in edit_groups(store):
        lines = edit_results(store, model=model, editor=editor, setting=setting)
        if not lines:
            continue
        s = summarize(lines)
        rows = [_row("all edits (immediate)", s)]
        rows += [_row(f"{t}: {TASK_TYPE_NAMES[t]}", g) for t, g in s["by_task_type"].items()]
        rows += [_row(f"stage {st}", g) for st, g in s["by_stage"].items()]
        mine = [r for r in records if r[:3] == (model, editor, setting)]
        unconverged = sum(1 for r in mine if r[6] == 0)
        failed = sum(1 for r in mine if r[10])
        by_matcher = ", ".join(
            f"{m}: " + " / ".join(_num(v[k]) for k in METRICS) for m, v in s["by_matcher"].items()
        )
        out.append({
            "title": f"{model} · {editor} · {setting}",
            "columns": ["group", "edits", *METRICS, "undefined (R/G/L)"],
            "rows": rows,
            "notes": [f"matcher {s['matcher']}; 95% bootstrap CIs over edits",
                      f"{len(mine)} edits: {unconverged} did not converge, {failed} failed",
                      f"reliability / generality / locality by matcher: {by_matcher}"],
        })  # fmt: skip
    return out


def _row(name: str, g: dict[str, Any]) -> list[str]:
    u = g["n_undefined"]
    cells = []
    for m in METRICS:
        ci = g["ci95"][m]
        cells.append(_num(g[m]) + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""))
    return [
        name,
        str(g["n_edits"]),
        *cells,
        f"{u['reliability']}/{u['generality']}/{u['locality']}",
    ]


def _num(v: float | None) -> str:
    return "undefined" if v is None else f"{v:.3f}"
