"""Render ``index.html`` (jinja2) and copy the hand-written assets next to it.

The page needs no server: tables are rendered here, the sample browser's index and its first
page are a JSON blob in a ``<script type="application/json">`` element, the other pages' data
are scripts ``samples/page-NNNN.js`` (``window.medibenchPages[N] = {...}``) the page adds when
it shows them (``file://`` pages cannot fetch, see :func:`medibench.report._browser.browser_pages`),
and the assets (``report.js``, ``report.css``) are package data copied into ``assets/``.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections import defaultdict
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2

from medibench.io import atomic_write_bytes, atomic_write_text
from medibench.report._formats import HEADERS, format_number, interval_ends

#: The columns of a paired comparison, in the CSV and the HTML table.
COMPARE_COLUMNS = (
    "k_mode",
    "metric",
    "group",
    "model_a",
    "model_b",
    "n",
    "n_unpaired",
    "mean_a",
    "mean_b",
    "mean_diff",
    "rank_biserial",
    "wilcoxon_p",
    "permutation_p",
)

#: The page's comparison table: one test, the sign-flip permutation test of the mean difference
#: (the statistic the table shows); Wilcoxon's p is behind a toggle (:data:`WILCOXON_COLUMNS`).
PAGE_COMPARE_COLUMNS = tuple(c for c in COMPARE_COLUMNS if c != "wilcoxon_p")
WILCOXON_COLUMNS = ("k_mode", "metric", "group", "model_a", "model_b", "n", "wilcoxon_p")

__all__ = ["ASSETS", "COMPARE_COLUMNS", "PAGES_DIR", "write_html"]

#: The folder of the sample browser's data files, beside ``index.html``.
PAGES_DIR = "samples"

#: Files of ``report/templates`` copied into the report's ``assets/`` folder.
ASSETS = ("report.js", "report.css")

_TEXT_COLS = {"model", "k_mode", "by", "group", "metric", "model_a", "model_b"}


def write_html(
    out: Path,
    *,
    run_dir: Path,
    meta: dict[str, Any],
    sections: list,
    head: dict[str, Any],
    settings: dict[str, Any],
    counts: dict[str, int],
    build_seconds: float,
    panels: list[dict[str, Any]] | None = None,
) -> Path:
    """Write ``out/index.html`` and ``out/assets/``; return the page's path (``head``: the
    browser's data the page holds, :func:`~medibench.report._browser.browser_pages`; its
    ``index`` may be an object whose ``index_chunks()`` give its JSON piece by piece,
    :class:`~medibench.report._pages.BrowserIndex`; ``panels``: the other stages' sections,
    :func:`medibench.report._panels.collect_panels`)."""
    templates = files("medibench.report") / "templates"
    (out / "assets").mkdir(parents=True, exist_ok=True)
    for name in ASSETS:
        with (templates / name).open("rb") as src, open(out / "assets" / name, "wb") as dst:
            shutil.copyfileobj(src, dst)
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda n: (templates / n).read_text(encoding="utf-8")),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    has_samples = counts["samples"] > 0 or counts["predictions"] > 0
    page = env.get_template("report.html.j2").render(
        title=f"medibench report: {run_dir.resolve().name}",
        run_dir=str(run_dir.resolve()),
        meta=meta,
        config_json=json.dumps(meta.get("config", {}), indent=2, sort_keys=True),
        sections=[_section(sec, out) for sec in sections],
        side_by_side=_side_by_side(sections),
        settings=settings,
        counts=counts,
        build_seconds=build_seconds,
        medibench_version=_version(),
        # The editing banner only where there is editing work to score: a calibration-only or
        # model-editing-only run opens on its own panels instead.
        no_scores=counts["scores"] == 0 and has_samples,
        has_samples=has_samples,
        panels=panels or [],
        blob=_BLOB,
    )
    # The data element is the template's last use of it (the run's own text comes before).
    before, _, after = page.rpartition(_BLOB)
    return atomic_write_bytes(
        out / "index.html",
        (piece.encode("utf-8") for piece in (before, *_head_json(head), after)),
    )


def _head_json(head: dict[str, Any]) -> Iterator[str]:
    """``head`` as JSON, piece by piece (its ``index`` through ``index_chunks()`` when it has
    them), with "</" escaped the JSON way: inside a script element it would end it."""
    for n, (key, value) in enumerate(head.items()):
        yield ("{" if n == 0 else ",") + _json(key) + ":"
        chunks = value.index_chunks() if hasattr(value, "index_chunks") else [_json(value)]
        for chunk in chunks:
            yield chunk.replace("</", "<\\/")
    yield "{}" if not head else "}"


#: Where the browser's data goes in the rendered page (no template or JSON text holds it).
_BLOB = "@@medibench-browser-data-7f3c9e@@"


def write_page(folder: Path, number: int, page: dict[str, Any]) -> None:
    """Write ``folder/page-NNNN.js`` (``window.medibenchPages[N] = {...}``)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = f"window.medibenchPages[{number}]={_json(page)};\n"
    atomic_write_text(folder / f"page-{number:04d}.js", text)


def remove_pages(folder: Path, pages: int) -> None:
    """Remove the pages of an earlier build beyond the first ``pages``."""
    for old in folder.glob("page-*.js") if folder.is_dir() else ():
        number = old.stem.removeprefix("page-")
        if not number.isdigit() or int(number) > pages:
            old.unlink()


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _section(sec, out: Path) -> dict[str, Any]:
    agg = sec.aggregation
    lead_cols = ["model", "k_mode", "by", "group", "n", "n_missing", "n_unscored", "n_unjudged"]
    cols = [*lead_cols, *sec.shown_metrics]
    rows = []
    for r in sec.rows:
        cells = [
            _cell(r, c, (f"{c}_ci_low", f"{c}_ci_high") if c in sec.shown_metrics else None)
            for c in cols
        ]
        rows.append({"by": r["by"], "k": r["k_mode"], "cells": cells})
    ccols = PAGE_COMPARE_COLUMNS
    compare = [
        [_cell(r, c, ("diff_ci_low", "diff_ci_high") if c == "mean_diff" else None) for c in ccols]
        for r in sec.compare
    ]
    wilcoxon = [[_cell(r, c, None) for c in WILCOXON_COLUMNS] for r in sec.compare]
    common = next((r["n"] for r in sec.rows if r["by"] == "all" and r["group"] == "common"), None)
    return {
        "label": sec.label,
        "slug": re.sub(r"[^A-Za-z0-9]+", "-", sec.label).strip("-"),
        "description": sec.description,
        "known": sec.known,
        "aggregation": {
            "k_modes": ", ".join(f"{lab} ({how})" for lab, how in agg.k_modes),
            "missing": agg.missing,
            "macro_over": " > ".join(agg.macro_over) or "none",
            "lower_is_better": ", ".join(sorted(agg.lower_is_better)) or "none",
            "ci": f"{agg.ci_level:.0%} percentile bootstrap, {agg.ci_resamples} resamples, "
            f"seed {agg.ci_seed}",
        },
        "columns": [
            {"key": c, "header": HEADERS.get(c, c), "type": "text" if c in _TEXT_COLS else "num"}
            for c in cols
        ],
        "rows": rows,
        "groupings": list(dict.fromkeys(r["by"] for r in sec.rows)),
        "k_modes": [lab for lab, _ in agg.k_modes],
        "compare_columns": [
            {"key": c, "header": HEADERS.get(c, c), "type": "text" if c in _TEXT_COLS else "num"}
            for c in ccols
        ],
        "compare": compare,
        "wilcoxon": wilcoxon,
        "wilcoxon_columns": [
            {"key": c, "header": HEADERS.get(c, c), "type": "text" if c in _TEXT_COLS else "num"}
            for c in WILCOXON_COLUMNS
        ],  # fmt: skip
        "common_n": common,
        "empty_metrics": sec.empty_metrics,
        "judged": sec.judged,
        "plots": sec.plots,
        "exports": {
            name: {fmt: p.relative_to(out).as_posix() for fmt, p in paths.items()}
            for name, paths in sec.tables.items()
        },
    }


def _cell(row: dict[str, Any], col: str, ci: tuple[str, str] | None) -> dict[str, Any]:
    v = row.get(col)
    text = format_number(v, column=col)
    sort = (
        ""
        if v is None
        else ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf else str(v))
    )
    cell = {"text": text, "sort": sort, "ci": None}
    if ci and v is not None:
        low, high = row.get(ci[0]), row.get(ci[1])
        n = row.get(f"{col}_n", row.get("n"))  # a pairing row's n: its pairs
        if isinstance(n, int) and n < 2:
            # One value has no spread to resample: a zero-width interval would claim certainty.
            cell["ci"] = f"n={n}"
        elif low is not None and high is not None and not (math.isinf(low) and low == high):
            cell["ci"] = "[{}, {}]".format(*interval_ends(low, high))
    return cell


def _side_by_side(sections: list) -> list[dict[str, Any]]:
    """For a protocol present in several versions: each model's overall (micro) mean per
    version, in adjacent columns (never averaged across versions)."""
    by_name: dict[str, list] = defaultdict(list)
    for sec in sections:
        by_name[sec.name].append(sec)
    out = []
    for name, secs in sorted(by_name.items()):
        if len(secs) < 2:
            continue
        metrics = list(dict.fromkeys(m for s in secs for m in s.shown_metrics))
        models = sorted({r["model"] for s in secs for r in s.rows})
        rows = []
        for model in models:
            for m in metrics:
                cells = []
                for s in secs:
                    hit = next(
                        (
                            r
                            for r in s.rows
                            if r["model"] == model and r["by"] == "all" and r["group"] == "micro"
                        ),
                        None,
                    )
                    cells.append(
                        _cell(hit, m, (f"{m}_ci_low", f"{m}_ci_high"))
                        if hit and m in s.shown_metrics
                        else {"text": "-", "sort": "", "ci": None}
                    )
                rows.append({"model": model, "metric": m, "cells": cells})
        out.append({"name": name, "versions": [s.version for s in secs], "rows": rows})
    return out


def _version() -> str:
    try:
        return version("medibench")
    except PackageNotFoundError:
        return "unknown"
