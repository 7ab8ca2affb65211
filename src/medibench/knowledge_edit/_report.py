"""The report's model-editing sections: one table per (model, editor, setting) stored in the
run, from the stored results lines (:func:`summarize`: macro values with their CIs, undefined
counts, per task type and per stage); and the latent-space geometry that ``edit analyze`` wrote
(:func:`geometry_panel`, its tables :func:`geometry_tables`, which the command prints too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from medibench.knowledge_edit._metrics import METRICS, summarize
from medibench.knowledge_edit._store import edit_groups, edit_records, edit_results
from medibench.knowledge_edit._tasks import TASK_TYPE_NAMES

__all__ = ["editing_panel", "editing_tables", "geometry_panel", "geometry_tables"]


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


def geometry_panel(store: Any, run_dir: Any = None) -> dict[str, Any] | None:
    """The report panel of ``edit analyze``'s folder recorded in the run (``None`` without
    one): :func:`geometry_tables` and the figures (the shift per layer, a PCA per editor)."""
    from medibench.knowledge_edit._analyze import ANALYSIS_META, label_stem

    meta = store.get_meta(ANALYSIS_META)
    path = Path(meta["out"]) / "analysis.json" if meta else None
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text("utf-8"))
    figures = [("representation shift per layer", path.parent / "shift.svg")]
    for e in data["editors"]:
        stem = label_stem(e["label"])
        figures.append((f"{e['label']}: PCA at decoder layer {e['key_layer']}",
                        path.parent / f"pca_{stem}.svg"))  # fmt: skip
    return {
        "id": "model-editing-geometry",
        "title": "Model editing: latent-space geometry",
        "summary": f"{len(data['editors'])} editor(s), each edit made again alone",
        "tables": geometry_tables(data),
        "figures": [{"title": t, "svg": _svg(p)} for t, p in figures if p.is_file()],
    }


def geometry_tables(data: dict[str, Any]) -> list[dict[str, Any]]:
    """``analysis.json``'s data as ``[{"title", "columns", "rows", "notes"}]``: shift and
    separability per editor and layer; memory fires per memory editor; per task type."""
    from medibench.stats import interval_text

    def ci(value: float | None, interval: list[float] | None, n: int | None = None) -> str:
        if value is None:
            return "undefined"
        low, high = interval if interval is not None else (None, None)
        return f"{value:.3f} " + interval_text(low, high, n, ".2f")

    def rate(f: dict[str, Any], *, misses: bool = False) -> str:
        """A fire rate (or, ``misses``, the rate of not firing) with its count and interval."""
        if f["rate"] is None:
            return "no probe"
        k, (low, high) = f["fired"], f["ci"] or (None, None)
        if misses:
            k = f["n"] - k
            low, high = (None, None) if low is None or high is None else (1 - high, 1 - low)
        return f"{k / f['n']:.3f} ({k}/{f['n']}) " + interval_text(low, high, f["n"], ".2f")

    note = (f"95% percentile bootstrap intervals ({data['resamples']} resamples, seed "
            f"{data['seed']}); n=1: one value, no interval")  # fmt: skip
    layers = [[e["label"], str(r["layer"]), ci(r["cosine"], r["cosine_ci"], r["cosine_n"]),
               ci(r["cka"], r["cka_ci"]),
               ci(r["auroc_pre"], r["auroc_pre_ci"], min(r["auroc_pre_n"])),
               ci(r["auroc_post"], r["auroc_post_ci"], min(r["auroc_post_n"])),
               f"{_num(r['distance_generality'])} / {_num(r['distance_locality'])}"]
              for e in data["editors"] for r in e["by_layer"]]  # fmt: skip
    out = [_table("Representation shift and separability per layer",
                  ["editor", "layer", "cosine before/after", "linear CKA",
                   "AUROC G vs L (before)", "AUROC G vs L (after)", "median distance G / L"],
                  layers, note, "AUROC: P(a generality probe is nearer the edit's key than a "
                  "locality probe), ties half")]  # fmt: skip
    memory = [[e["label"], e["memory"]["site"], rate(e["memory"]["fires"]["locality"]),
               rate(e["memory"]["fires"]["generality"], misses=True),
               rate(e["memory"]["fires"]["reliability"]),
               ci(e["memory"]["auroc"], e["memory"]["auroc_ci"], min(e["memory"]["auroc_n"]))]
              for e in data["editors"] if e["memory"] is not None]  # fmt: skip
    if memory:
        out.append(_table("Memory fires", ["editor", "site", "locality (false fires)",
                          "generality (misses)", "reliability (fires)",
                          "AUROC (memory distance)"], memory, "after each edit, at the prompt's "
                          "last token: fires on locality probes are false fires, generality "
                          "probes it does not fire on are misses", note))  # fmt: skip
    types = [[e["label"], r["task_type"], f"{r['n_generality']}/{r['n_locality']}",
              ci(r["auroc"], r["auroc_ci"], min(r["auroc_n"])),
              ci(r["cosine"], r["cosine_ci"], r["cosine_n"]),
              "-" if e["memory"] is None else _num(r["locality_fire_rate"])]
             for e in data["editors"] for r in e["by_task_type"]]  # fmt: skip
    out.append(_table("Per task type", ["editor", "task type", "G/L probes", "AUROC G vs L",
                      "cosine before/after", "locality false fires"], types,
                      "at each editor's key layer (its edited layer); a memory editor's AUROC "
                      "by its memory's distance"))  # fmt: skip
    return out


def _table(title: str, columns: list[str], rows: list[list[str]], *notes: str) -> dict[str, Any]:
    return {"title": title, "columns": columns, "rows": rows, "notes": list(notes)}


def _svg(path: Path) -> str:
    text = path.read_text("utf-8")
    return text[text.find("<svg") :]
