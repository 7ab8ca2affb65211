"""``medibench edit sweep``: an editor's hyper-parameter grid, each cell run with several seeds.

Every (cell, seed) is one ``edit run`` (the same :func:`run_edits` and run store) into the run
folder ``OUT/cells/<key=value,...>/seed<k>``, with the editor's config made of ``--config``
(if any), the cell's values and ``seed``; a folder with ``done.json`` (written after its run is
stored) is finished and skipped, so a killed sweep run again picks up where it stopped and
gives the same table. ``--executor ray`` runs the cells to do as Ray tasks (one CPU each; on
the cluster ``--ray-address`` names, else on this machine).

``OUT/sweep_settings.json`` keeps what every cell shares (task set, model, editor, base config,
setting, limit, matchers): a sweep of other settings into the same ``OUT`` is refused. The
table (``OUT/sweep.json``, ``OUT/sweep.csv``) has one row per cell: each metric's mean over the
seeds of the run's macro value (reliability, generality, locality), its 95% percentile bootstrap
interval over those seeds (:func:`medibench.stats.bootstrap_ci`, seed 42; ``None`` with one
seed, printed ``n=1``) and ``n``, the seeds where it is defined; ``OUT/heatmap_<metric>.png``
(and ``.svg``) draws it, the first grid key down, the others across.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

from medibench.io import atomic_write_text
from medibench.knowledge_edit._editors import EDITOR_ALIASES, config_fields, load_editor
from medibench.knowledge_edit._metrics import METRICS
from medibench.stats import bootstrap_ci

__all__ = ["SweepCell", "parse_grid", "run_cell", "run_sweep", "sweep_cells", "sweep_rows"]

#: the grid key ``steps`` means each editor's own step count
STEP_OPTION = {"ft": "max_steps", "lora": "max_steps", "grace@paper": "n_iter",
               "grace-tokens": "max_steps"}  # fmt: skip
SETTINGS_FILE = "sweep_settings.json"


@dataclass(frozen=True)
class SweepCell:
    """One (grid cell, seed): its values (grid key -> value, in grid order) and run folder."""

    values: tuple[tuple[str, Any], ...]
    seed: int
    folder: Path

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values)


def parse_grid(texts: Sequence[str], editor: str) -> list[tuple[str, list[Any]]]:
    """``--grid KEY=V1,V2,...`` values as ``[(option, [values])]``: each key an option of the
    editor's config (``steps``: its step count, :data:`STEP_OPTION`), each value a number where
    it reads as one (``1e-4`` included), ``true``/``false``, else text.

    Raises:
        ValueError: naming the ``--grid`` value: no ``=``, no value, a value twice, a key twice,
            ``seed`` (give ``--seeds``), an option the editor does not have, or an editor
            without options.
    """
    name = EDITOR_ALIASES.get(editor, editor)
    fields = config_fields(name)
    if fields is None:
        raise ValueError(f"--editor {editor}: a sweep needs an editor with options "
                         f"({', '.join(STEP_OPTION)})")  # fmt: skip
    if not texts:
        raise ValueError("give at least one --grid KEY=V1,V2 (e.g. --grid lr=1e-4,1e-3)")
    grid: list[tuple[str, list[Any]]] = []
    for text in texts:
        key, sep, rest = text.partition("=")
        key = key.strip()
        values = [_value(v.strip()) for v in rest.split(",") if v.strip()]
        if not sep or not key or not values:
            raise ValueError(f"--grid {text!r}: expected KEY=V1,V2,... (e.g. lr=1e-4,1e-3)")
        option = STEP_OPTION[name] if key == "steps" else key
        if option == "seed":
            raise ValueError(f"--grid {text!r}: give seeds with --seeds, not in the grid")
        options = sorted(fields - {"seed"})
        if option not in options:
            raise ValueError(f"--grid {text!r}: editor {name} has no option {key!r}; its "
                             f"options: {', '.join(options)} (or steps)")  # fmt: skip
        if option in (k for k, _ in grid):
            raise ValueError(f"--grid {text!r}: {option} is already a grid key")
        if len(set(map(repr, values))) != len(values):
            raise ValueError(f"--grid {text!r}: a value is given twice")
        grid.append((option, values))
    return grid


def sweep_cells(grid: Sequence[tuple[str, list[Any]]], seeds: Sequence[int], out: Path,
                ) -> list[SweepCell]:  # fmt: skip
    """Every (cell, seed), cells in grid order (the last key fastest), seeds in given order."""
    keys = [k for k, _ in grid]
    cells = []
    for combo in product(*(values for _, values in grid)):
        values = tuple(zip(keys, combo, strict=True))
        folder = out / "cells" / _safe(",".join(f"{k}={v}" for k, v in values))
        cells += [SweepCell(values, s, folder / f"seed{s}") for s in seeds]
    return cells


def run_sweep(
    cells: Sequence[SweepCell],
    out: Path,
    settings: dict[str, Any],
    *,
    executor: str = "local",
    ray_address: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every cell without ``done.json``, then write the table and heat maps; returns
    ``{"cells", "ran", "skipped", "rows"}``. ``settings``: what every cell shares (module doc).

    Raises:
        ValueError: ``out`` holds a sweep of other settings; a cell failed (after the others
            ran; the first failure named).
    """
    say = log or (lambda _m: None)
    if executor not in ("local", "ray"):
        raise ValueError(f"--executor must be local or ray, got {executor!r}")
    _check_settings(out, settings)
    todo = [c for c in cells if not (c.folder / "done.json").is_file()]
    say(f"{len(cells)} runs ({len(cells) - len(todo)} done before, {len(todo)} to run)")
    jobs = [_job(settings, c) for c in todo]
    if executor == "local":
        errors = []
        for cell, job in zip(todo, jobs, strict=True):
            errors.append(run_cell(job))
            say(f"{'FAILED' if errors[-1] else 'done'} {cell.label} seed {cell.seed}")
    else:
        errors = _run_ray(jobs, ray_address)
    failed = [(c, e) for c, e in zip(todo, errors, strict=True) if e]
    if failed:
        cell, error = failed[0]
        raise ValueError(f"{len(failed)} run(s) failed, first: {cell.folder}: {error}")
    rows = sweep_rows(cells)
    _write_table(out, [k for k, _ in cells[0].values], settings, rows)
    return {"cells": len(cells), "ran": len(todo), "skipped": len(cells) - len(todo),
            "rows": rows}  # fmt: skip


def sweep_rows(cells: Sequence[SweepCell]) -> list[dict[str, Any]]:
    """One row per grid cell: its values, ``seeds``, and per metric the mean over seeds, its
    interval (``<metric>_ci_low``/``_ci_high``, ``None`` under two values) and ``<metric>_n``."""
    by_cell: dict[tuple, list[dict[str, Any]]] = {}
    for c in cells:
        done = json.loads((c.folder / "done.json").read_text("utf-8"))
        by_cell.setdefault(c.values, []).append(done)
    rows = []
    for values, runs in by_cell.items():
        row: dict[str, Any] = {**dict(values), "seeds": len(runs)}
        for m in METRICS:
            defined = [r["scores"][m] for r in runs if r["scores"][m] is not None]
            low = high = None
            if len(defined) > 1:
                low, high = bootstrap_ci(defined, n_resamples=1000, seed=42)
            mean = sum(defined) / len(defined) if defined else None
            row.update({m: mean, f"{m}_ci_low": low, f"{m}_ci_high": high,
                        f"{m}_n": len(defined)})  # fmt: skip
        rows.append(row)
    return rows


def run_cell(job: dict[str, Any]) -> str | None:
    """One (cell, seed): an edit run into ``job["folder"]``, then its ``done.json``; the error
    as text, or ``None`` (a plain dict in and text out, so a Ray task can run it)."""
    try:
        _run_cell(job)
    except Exception as exc:  # a failed run is reported with the others; the sweep goes on
        return " ".join(f"{type(exc).__name__}: {exc}".split())
    return None


# -- helpers ----------------------------------------------------------------------------------


def _run_cell(job: dict[str, Any]) -> None:
    from medibench.knowledge_edit._answerers import load_answerer
    from medibench.knowledge_edit._experiment import make_matchers, run_edits
    from medibench.knowledge_edit._metrics import summarize
    from medibench.knowledge_edit._store import edit_spec, store_edit_run
    from medibench.knowledge_edit._tasks import read_taskset
    from medibench.runs import RunStore, run_folder_lock
    from medibench.runs._runner import check_same_run

    ts = read_taskset(job["tasks"])
    answerer = load_answerer(job["model"], **job["model_options"])
    editor = load_editor(job["editor"], job["config"])
    matchers = make_matchers(job["matchers"], answerer)
    folder = Path(job["folder"])
    with run_folder_lock(folder), RunStore(folder) as store:
        check_same_run(store, {"dataset": f"edit-tasks:{job['tasks']}"})
        report = run_edits(ts, answerer, editor, sequential=job["sequential"], matchers=matchers,
                           limit=job["limit"], model_name=job["model"])  # fmt: skip
        spec = edit_spec(tasks=job["tasks"], taskset=ts, limit=job["limit"], config=job["config"],
                         config_file=None, editor=editor, matchers=job["matchers"],
                         model_options=job["model_options"])  # fmt: skip
        store_edit_run(store, report, model=job["model"], editor=editor.name,
                       sequential=job["sequential"], spec=spec)  # fmt: skip
    summary = summarize(report.lines) if report.lines else None
    done = {
        "cell": job["values"], "seed": job["seed"], "config": job["config"],
        "edits": len(report.edits), "failed": sum(1 for e in report.edits if e.error),
        "unconverged": sum(1 for e in report.edits if e.converged is False),
        "matcher": None if summary is None else summary["matcher"],
        "scores": {m: None if summary is None else summary[m] for m in METRICS},
    }  # fmt: skip
    atomic_write_text(folder / "done.json", json.dumps(done, indent=2, sort_keys=True) + "\n")


def _job(settings: dict[str, Any], cell: SweepCell) -> dict[str, Any]:
    config = {**settings["config"], **dict(cell.values), "seed": cell.seed}
    return {**settings, "config": config, "values": dict(cell.values), "seed": cell.seed,
            "folder": str(cell.folder)}  # fmt: skip


def _run_ray(jobs: list[dict[str, Any]], address: str | None) -> list[str | None]:
    """One Ray task per run (one CPU); a run lost with its node is run again elsewhere (a
    bounded number of times, then :class:`~medibench._ray.LostWorkError`: re-run resumes)."""
    from medibench._ray import join_cluster, run_tasks

    join_cluster(address)  # imports ray, or says how to get it
    named = ((str(i), (job,)) for i, job in enumerate(jobs))
    results = dict(run_tasks(run_cell, named, kind="sweep run"))
    return [results[str(i)] for i in range(len(jobs))]


def _check_settings(out: Path, settings: dict[str, Any]) -> None:
    path = out / SETTINGS_FILE
    now = json.loads(json.dumps(settings, sort_keys=True))
    if path.is_file():
        before = json.loads(path.read_text("utf-8"))
        if before != now:
            changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
            raise ValueError(f"--out {out} holds a sweep of other settings ({', '.join(changed)} "
                             f"differ: {path}); give another --out")  # fmt: skip
        return
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(now, indent=2, sort_keys=True) + "\n")


def _write_table(out: Path, keys: list[str], settings: dict[str, Any],
                 rows: list[dict[str, Any]]) -> None:  # fmt: skip
    from medibench.knowledge_edit._figures import sweep_heatmap

    interval = "95% percentile bootstrap over seeds (1,000 resamples, seed 42)"
    data = {"settings": settings, "grid_keys": keys, "rows": rows, "interval": interval}
    atomic_write_text(out / "sweep.json", json.dumps(data, indent=2) + "\n")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / "sweep.csv", buffer.getvalue())
    first, rest = keys[0], keys[1:]
    cells = [{**r, "row": f"{first}={r[first]}",
              "col": ",".join(f"{k}={r[k]}" for k in rest) or "all"} for r in rows]  # fmt: skip
    for m in METRICS:
        sweep_heatmap(cells, m, out / f"heatmap_{m}")


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.,=_-]+", "_", text)
