"""``build_report``: a run store in, one self-contained report folder out.

The folder opens from disk with no server (``index.html``) and holds everything it shows:

* ``tables/<protocol>@<version>/leaderboard.{csv,json,md,tex}`` and ``comparisons.*``;
* ``plots/<protocol>@<version>/*.{png,svg}``;
* ``thumbs/`` and ``images/`` for the sample browser; ``assets/`` (hand-written JS and CSS).

Every protocol version of the run gets its own tables and plots: versions are shown side by
side, never averaged together. Nothing is recomputed: the numbers are the score records'.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from rich.console import Console

from medibench._progress import progress_bar
from medibench.analysis._store import attach_attention, read_attention
from medibench.io import atomic_write_text
from medibench.protocols import Aggregation, load_protocol
from medibench.report._bins import (
    BinSpec,
    BinTable,
    bin_matrix,
    bin_tables,
    bins_caption,
    bins_panel,
    check_specs,
)
from medibench.report._browser import (
    PAGE_SIZE,
    attach_demonstrations,
    image_jobs,
    read_judgements,
    shown_predictions,
)
from medibench.report._formats import latex_table, leaderboard_ci, markdown_table, write_table
from medibench.report._html import COMPARE_COLUMNS
from medibench.report._images import ImageMode, render_all
from medibench.report._pages import BrowserIndex, LeanSamples, StoredScores
from medibench.report._tables import comparisons, leaderboard, per_model_values
from medibench.runs import RunStore
from medibench.runs._demos import read_demonstrations
from medibench.samples import Sample, Score

__all__ = ["ProtocolSection", "build_report"]

_LEADER_COLS = ("model", "k_mode", "by", "group", "n", "n_missing", "n_unscored", "n_unjudged")


@dataclass
class ProtocolSection:
    """One protocol version's tables and plots (what the page shows under its heading)."""

    name: str
    version: str
    description: str
    aggregation: Aggregation
    metrics: list[str]
    judged: list[str]
    scores: Iterable[Score]  # read from the run store each time (StoredScores)
    known: bool = True
    rows: list[dict[str, Any]] = field(default_factory=list)
    compare: list[dict[str, Any]] = field(default_factory=list)
    shown_metrics: list[str] = field(default_factory=list)
    empty_metrics: list[str] = field(default_factory=list)
    tables: dict[str, dict[str, Path]] = field(default_factory=dict)
    plots: list[dict[str, str]] = field(default_factory=list)
    values: dict[tuple[str, str], Any] = field(default_factory=dict)
    applicable: Any = None  # the protocol's applicable_metrics(sample), when it has one
    bins: list[BinTable] = field(default_factory=list)  # --by-bins breakdowns

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"


def build_report(
    run_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    n_resamples: int | None = None,
    seed: int | None = None,
    level: float | None = None,
    thumb_size: int = 160,
    images: ImageMode = "copy",
    plots: bool = True,
    workers: int | None = None,
    progress: bool = False,
    console: Console | None = None,
    by_bins: Sequence[BinSpec] = (),
) -> Path:
    """Write the HTML report of the run in ``run_dir`` to ``out_dir`` (default
    ``run_dir/report``); return the path of its ``index.html``.

    Args:
        n_resamples, seed, level: the bootstrap CIs and the paired tests; ``None`` keeps each
            protocol's own (``ci_resamples``, ``ci_seed``, ``ci_level``: 1,000, 42, 0.95 unless
            the protocol says otherwise). Seeded, so a rebuilt report is identical.
        thumb_size: longest side of the browser's thumbnails, in pixels.
        images: ``"copy"`` the full images into the folder (self-contained; hard links when
            possible) or ``"link"`` them by relative path.
        plots: draw the figures (PNG and SVG).
        workers: processes for the thumbnails (default: one per CPU).
        progress: show progress bars (rich, on ``console``, default stderr) for the long
            steps: tables, pictures, plots.
        by_bins: breakdowns by bins of sample properties (:mod:`medibench.report._bins`):
            per protocol a table ``tables/<protocol>@<version>/bins_<property>.*``, a figure
            (mean vs bin, CI bars, per model) and the "Diagnostics by factor" section.

    Raises:
        RunStoreError: ``run_dir`` is not a medibench run.
        PropertyError: a ``by_bins`` property that is unknown, given the wrong kind of edges
            or that cannot be computed.
    """
    from medibench.report import _html, _plot_set
    from medibench.report._images import process_pool
    from medibench.report._panels import collect_panels

    t0 = time.perf_counter()
    run_dir = Path(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir / "report"
    with RunStore.open_existing(run_dir) as store:
        # What the tables group by, the rest of each record read when asked (a Sample's API).
        lean = LeanSamples(store)
        samples = cast(Mapping[str, Sample], lean)
        meta = store.meta()
        judgements = read_judgements(store.connection)
        attention = read_attention(store.connection)  # medibench analyze attention
        demos = read_demonstrations(store)  # in-context demonstrations (--icl-k)
        panels = collect_panels(store, run_dir)  # calibration, model editing
        check_specs(by_bins, samples.values())
        out.mkdir(parents=True, exist_ok=True)
        models = store.models()
        overrides = {
            k: v
            for k, v in (("ci_resamples", n_resamples), ("ci_seed", seed), ("ci_level", level))
            if v is not None
        }
        sections = _sections(store, overrides)
        metric_index = [
            (sec.label, m, m in sec.aggregation.lower_is_better)
            for sec in sections
            for m in sec.metrics
        ]
        browser = BrowserIndex(store, lean, models, metric_index)
        workers = workers or os.cpu_count() or 1
        big = workers > 1 and len(samples) >= 64
        with process_pool(workers) if big else contextlib.nullcontext() as pool:
            # The browser's pictures, page by page in its order, start in the pool while this
            # process computes the tables; the figures (which need the tables) queue behind.
            pictures = _page_pictures(
                browser, store, run_dir, out, thumb_size, images, pool, workers
            )
            with progress_bar(progress, console, "report tables", len(sections)) as advance:
                for sec in sections:
                    _tables_for(sec, samples, out)
                    if by_bins:
                        _bins_for(sec, samples, out, by_bins)
                    advance()
            planned = [_plot_set.plan(sec, out) if plots else [] for sec in sections]
            drawing = [
                [pool.submit(_plot_set.draw, t) for t in tasks] if pool else None
                for tasks in planned
            ]
            by_sample = defaultdict(list)
            for row in attention:
                by_sample[str(row["sample_id"])].append(row)

            def decorate(blob: dict[str, Any]) -> None:
                mine = [r for s in blob["samples"] for r in by_sample.get(s["id"], [])]
                attach_attention(blob, mine, run_dir, out)
                attach_demonstrations(blob, demos)

            first = None
            folder = out / _html.PAGES_DIR
            with progress_bar(progress, console, "report pictures", len(samples)) as advance:
                for number in range(1, browser.pages + 1):
                    chunk, shown, drawn = next(pictures)
                    page = browser.page(
                        chunk, shown, drawn, decorate, judgements=judgements, run_dir=run_dir
                    )
                    _html.write_page(folder, number, page)
                    first = first or page
                    advance(len(drawn))
            _html.remove_pages(folder, browser.pages)
            n_plots = sum(len(tasks) for tasks in planned)
            with progress_bar(progress, console, "report plots", n_plots) as advance:
                for sec, tasks, futures in zip(sections, planned, drawing, strict=True):
                    paths = []
                    for i, task in enumerate(tasks):
                        paths.append(
                            futures[i].result() if futures is not None else _plot_set.draw(task)
                        )
                        advance()
                    sec.plots = _plot_set.describe(tasks, paths, out)
        head = {
            "models": list(models),
            "metrics": [list(m) for m in metric_index],
            "judges": browser.judges(judgements),
            "demo_pool": _pool_pictures(demos, meta, out, thumb_size, images),
            "index": browser,
            "page_size": PAGE_SIZE,
            "pages": browser.pages,
            "first": first or {"samples": [], "answers": {}},
        }
        return _html.write_html(
            out,
            run_dir=run_dir,
            meta=meta,
            sections=sections,
            head=head,
            settings={"thumb_size": thumb_size, "images": images},
            counts={
                "samples": len(samples),
                "models": len(models),
                "predictions": store.count("predictions"),
                "scores": store.count("scores"),
            },
            build_seconds=time.perf_counter() - t0,
            panels=[*([bins_panel(sections)] if by_bins else []), *panels],
        )


def _page_pictures(
    browser: BrowserIndex,
    store: RunStore,
    run_dir: Path,
    out: Path,
    thumb_size: int,
    images: ImageMode,
    pool: Any,
    workers: int,
    ahead: int = 64,
) -> Iterator[tuple[list[Sample], dict, list[dict[str, Any]]]]:
    """Each page of the browser in turn: its samples (in page order), their shown predictions
    (:func:`~medibench.report._browser.shown_predictions`) and pictures; with a pool, the next
    ``ahead`` pages' pictures are drawn while a page is built (started at once)."""
    models = browser.models

    def start(number: int) -> tuple[list[Sample], dict, Iterable[dict[str, Any]]]:
        ids = [browser.ids[i] for i in browser.page_rows(number)]
        records = store.samples_of(ids)
        chunk = [records[sid] for sid in ids]
        shown = shown_predictions(store.predictions_of(models, ids), models)
        jobs = image_jobs(chunk, models, shown, run_dir)
        drawn = render_all(
            jobs, out, thumb_size=thumb_size, images=images, pool=pool, workers=workers, lazy=True
        )
        return chunk, shown, drawn

    # Started now, not when the first page is taken: the pool draws while the tables are made.
    waiting = deque(start(n) for n in range(1, min(browser.pages, ahead if pool else 1) + 1))

    def pages() -> Iterator[tuple[list[Sample], dict, list[dict[str, Any]]]]:
        for number in range(1, browser.pages + 1):
            if not waiting:
                waiting.append(start(number))
            chunk, shown, drawn = waiting.popleft()
            pictures = list(drawn)
            if pool is not None and number + ahead <= browser.pages:
                waiting.append(start(number + ahead))
            yield chunk, shown, pictures

    return pages()


def _pool_pictures(
    demos: dict[tuple[str, str, int], dict[str, Any]],
    meta: dict[str, Any],
    out: Path,
    thumb_size: int,
    images: ImageMode,
) -> dict[str, Any] | None:
    """The inputs of the demonstrations a run showed from another dataset (``--icl-pool``) as
    ``{"spec", "pictures": {sample id: picture}, "error"}`` for the sample view; ``None`` when
    the pool is the run's own dataset (its samples' pictures are the page's already). A pool
    that no longer loads is named with its error, and its demonstrations shown by id alone."""
    from medibench.datasets import load_dataset
    from medibench.runs._icl import OWN_POOL

    spec = ((meta.get("config") or {}).get("icl") or {}).get("pool")
    wanted = {i for row in demos.values() for i in row["demo_ids"]}
    if not spec or spec == OWN_POOL or not wanted:
        return None

    try:
        pool = [s for s in load_dataset(spec) if s.sample_id in wanted]
    except Exception as exc:  # noqa: BLE001 - any loader's failure is shown, the rest still builds
        return {"spec": spec, "pictures": {}, "error": f"{type(exc).__name__}: {exc}"}
    jobs = [
        {"sid": f"icl-pool__{s.sample_id}", "input": s.input, "target": None, "mask": None,
         "outputs": []}
        for s in pool
    ]  # fmt: skip
    drawn = render_all(jobs, out, thumb_size=thumb_size, images=images)
    pictures = {s.sample_id: d["input"] for s, d in zip(pool, drawn, strict=True)}
    return {"spec": spec, "pictures": pictures, "error": None}


def _sections(store: RunStore, overrides: dict[str, Any]) -> list[ProtocolSection]:
    versions = store.connection.execute(
        "SELECT DISTINCT protocol, protocol_version FROM scores"
    ).fetchall()
    out = []
    for name, version in sorted(versions):
        mine = StoredScores(store, name, version)
        try:
            proto = load_protocol(f"{name}@{version}")
            known = (proto.name, proto.version) == (name, version)
        except (KeyError, ValueError, ImportError):
            known = False
        if known:
            desc, agg = proto.description, proto.aggregation
            metrics, judged = list(proto.metric_names), list(proto.judged_metrics)
        else:  # a protocol this medibench does not know: its metrics, plain aggregation
            desc, agg = "(protocol not registered in this medibench)", Aggregation()
            metrics, judged = list(dict.fromkeys(m for s in mine for m in s.metrics)), []
        agg = dataclasses.replace(agg, **overrides)
        sec = ProtocolSection(name, version, desc, agg, metrics, judged, mine, known=known)
        sec.applicable = getattr(proto, "applicable_metrics", None) if known else None
        out.append(sec)
    return out


def _tables_for(sec: ProtocolSection, samples: Mapping[str, Sample], out: Path) -> None:
    agg = sec.aggregation
    sec.values = per_model_values(sec.scores, samples, agg, sec.metrics, sec.applicable)
    sec.rows = leaderboard(
        sec.scores,
        samples,
        agg,
        metrics=sec.metrics,
        judged=sec.judged,
        values=sec.values,
        applicable=sec.applicable,
    )
    names = [*sec.metrics, *(n for n, _, _ in agg.pass_rates)]
    sec.shown_metrics = [m for m in names if any(r.get(m) is not None for r in sec.rows)]
    sec.empty_metrics = [m for m in names if m not in sec.shown_metrics]
    tasks = {s.sample_id: s.task for s in samples.values() if s.task}
    sec.compare = comparisons(
        sec.values,
        metrics=sec.shown_metrics,
        n_resamples=agg.ci_resamples or 1000,
        seed=agg.ci_seed,
        level=agg.ci_level,
        groups=tasks,  # per-task paired comparisons after each overall one
    )
    level = round(agg.ci_level * 100)
    missing = "count as 0" if agg.missing == "zero" else "are left out of the means"
    empty = f"; no values: {', '.join(sec.empty_metrics)}" if sec.empty_metrics else ""
    caption = (
        f"{sec.label}: mean [{level}% bootstrap CI, {agg.ci_resamples} resamples, seed "
        f"{agg.ci_seed}; hierarchical for the macro row]; micro = mean over samples, macro = "
        f"mean over groups; samples without an output {missing} (missing); unscored = no score "
        f"record; unjudged = judged metrics not filled{empty}"
    )
    folder = out / "tables" / sec.label
    sec.tables["leaderboard"] = write_table(
        sec.rows,
        folder / "leaderboard",
        columns=[*_LEADER_COLS, *sec.shown_metrics],
        ci=leaderboard_ci(sec.shown_metrics),
        caption=caption,
    )
    sec.tables["comparisons"] = write_table(
        sec.compare,
        folder / "comparisons",
        columns=list(COMPARE_COLUMNS),
        ci={"mean_diff": ("diff_ci_low", "diff_ci_high")},
        caption=(
            f"{sec.label}: paired comparisons on the samples both models have a value for; "
            f"A - B with its {level}% bootstrap CI; r_rb = matched-pairs rank-biserial; "
            "Wilcoxon signed-rank and sign-flip permutation p-values (two-sided, uncorrected)"
        ),
    )


def _bins_for(sec: ProtocolSection, samples: Mapping[str, Sample], out: Path, specs) -> None:
    """``sec.bins`` (:func:`~medibench.report._bins.bin_tables` on the section's values) and
    their tables ``bins_<property>.*``."""
    agg = sec.aggregation
    sec.bins = bin_tables(
        sec.scores, samples, agg, metrics=sec.metrics, specs=specs, applicable=sec.applicable,
        values=sec.values,
    )  # fmt: skip
    several_k = len(agg.k_modes) > 1
    for table in sec.bins:
        caption = f"{sec.label} by {table.spec.prop}: {bins_caption(agg, table.spec)}"
        stem = out / "tables" / sec.label / f"bins_{table.spec.prop}"
        paths = write_table([*table.rows, *table.trend], stem, columns=[], caption=caption)
        # Markdown and LaTeX: the table the page and `score` show (a row per model and metric,
        # a column per bin); CSV and JSON: every value of the bin and trend rows.
        columns, cells = bin_matrix(table, several_k=several_k)
        shown = [dict(zip(columns, row, strict=True)) for row in cells]
        atomic_write_text(paths["md"], f"{caption}\n\n{markdown_table(shown, columns)}\n")
        atomic_write_text(paths["tex"], latex_table(shown, columns, caption=caption) + "\n")
        sec.tables[f"bins_{table.spec.prop}"] = paths
