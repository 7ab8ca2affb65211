"""``medibench edit``: build edit tasks, run an editor on a VLM, score results files
(docs/knowledge_edit.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from medibench._console import labelled
from medibench.cli._app import console, err, fail, load
from medibench.cli._options import CsvOption, ExecutorOption, RayAddressOption

edit_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Model editing of medical VLMs (M3Bench style).")  # fmt: skip

# Options that `edit run` and `edit sweep` (and `edit score`, --json) share.
SequentialOption = Annotated[int, typer.Option(help="Edits per sequence, no undo (0: single).")]
LimitOption = Annotated[int | None, typer.Option(help="The first N edits of the order.")]
BatchSizeOption = Annotated[int, typer.Option(help="Questions per generate call.")]
MaxNewTokensOption = Annotated[int, typer.Option(help="The longest answer, in tokens.")]
ScoresJsonOption = Annotated[Path | None, typer.Option("--json", help="Write the scores as JSON.")]


def _matchers(names: str) -> Any:
    """``--matcher``, repeatable, of the command's matcher ``names``."""
    return typer.Option(help=f"{names} (repeatable).")


def _over_config(what: str) -> Any:
    """A ``train-mend`` option that, given, replaces the ``--config`` file's setting."""
    return typer.Option(help=f"{what} (overrides --config).")


@edit_app.command("tasks")
def tasks(
    out: Annotated[Path, typer.Option("--out", help="The task set folder to write.")],
    slake: Annotated[
        Path | None, typer.Option(help="SLAKE: Slake1.0/ folder, archive or Parquet copy.")
    ] = None,
    split: Annotated[str, typer.Option(help="Split of SLAKE / VQA-RAD to read.")] = "test",
    vqarad: Annotated[
        Path | None, typer.Option(help="VQA-RAD: the OSF folder or a Parquet copy.")
    ] = None,
    language: Annotated[str, typer.Option(help="SLAKE questions: en, zh or all.")] = "en",
    synthetic: Annotated[
        int, typer.Option(help="N synthetic edits from the suite's scenes (offline).")
    ] = 0,
    per_type: Annotated[int, typer.Option(help="Probes per task type and kind.")] = 2,
    limit: Annotated[
        int | None, typer.Option(help="At most this many edits (the rest stay probes).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seeds the edit order and the probe choice.")] = 0,
    overwrite: Annotated[bool, typer.Option(help="Replace the task set already in --out.")] = False,
) -> None:
    """Build an edit task set (requests, T0-T5 probes, the sequential order) in a new or empty
    --out folder (--overwrite replaces a task set there)."""
    from medibench.knowledge_edit import (
        TaskError,
        build_requests,
        new_taskset_folder,
        read_slake,
        read_vqarad,
        synthetic_taskset,
        write_taskset,
    )
    from medibench.sources import SourceError

    if not (slake or vqarad or synthetic):
        fail("give --slake DIR, --vqarad DIR or --synthetic N")
    _at_least(limit, 1, "--limit")
    _at_least(synthetic, 0, "--synthetic")
    _at_least(per_type, 1, "--per-type")
    if language not in ("en", "zh", "all"):
        fail(f"--language must be en, zh or all, got {language!r}")
    if synthetic and (slake or vqarad):
        fail("--synthetic builds a task set of its own: give it without --slake / --vqarad")
    try:
        with new_taskset_folder(out, overwrite=overwrite) as folder:
            if synthetic:
                ts = synthetic_taskset(folder, synthetic, seed=seed)
            else:
                images = folder / "images"
                images.mkdir(parents=True, exist_ok=True)
                rows, sources = [], []
                if slake:
                    rows += read_slake(slake, images, split=split, language=language)  # type: ignore[arg-type]
                    sources.append("slake")
                if vqarad:
                    rows += read_vqarad(vqarad, images, split=split)
                    sources.append("vqa-rad")
                requests = build_requests(rows, seed=seed, limit=limit, per_type=per_type)
                extra = {"split": split, "language": language, "n_questions": len(rows)}
                ts = write_taskset(folder, requests, sources=sources, seed=seed, extra=extra)
    except (TaskError, SourceError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    console.print(f"{len(ts)} edit requests -> {out}")
    table = Table("task type / kind", "probes")
    for key, n in ts.manifest["probes"].items():
        table.add_row(key, str(n))
    console.print(table)


@edit_app.command("run")
def run(
    tasks: Annotated[Path, typer.Option("--tasks", help="A task set folder (edit tasks).")],
    model: Annotated[
        str, typer.Option(help="A local model folder, openai:MODEL or module:callable.")
    ],
    run: Annotated[Path, typer.Option("--out", help="The run folder (run store).")],
    config: Annotated[Path | None, typer.Option(help="Editor settings (YAML/JSON).")] = None,
    editor: Annotated[
        str,
        typer.Option(
            help="ft, lora, grace@paper, grace-tokens (old name: grace), balancedit, wise, "
            "mend:DIR (a hypernetwork edit train-mend trained), in-context or easyedit."
        ),
    ] = "lora",
    sequential: SequentialOption = 0,
    judge: Annotated[Path | None, typer.Option(help="Judge config for the judge matcher.")] = None,
    matcher: Annotated[list[str] | None, _matchers("exact, fuzzy, token_accuracy, judge")] = None,
    limit: LimitOption = None,
    batch_size: BatchSizeOption = 8,
    max_new_tokens: MaxNewTokensOption = 16,
    base_url: Annotated[str | None, typer.Option(help="Endpoint of an openai:MODEL.")] = None,
    json_out: ScoresJsonOption = None,
    csv_out: CsvOption = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            help="Replace the folder's results of this model, editor and setting even when "
            "they were made with another --config."
        ),
    ] = False,
) -> None:
    """Edit, answer the probes before and after, undo; store results (with the editor's
    config) and print the scores. Results of the same model, editor and setting made with
    another --config are not replaced unless --overwrite."""
    from medibench.knowledge_edit import (
        EDITOR_ALIASES,
        AnswererError,
        TaskError,
        load_answerer,
        load_editor,
        make_matchers,
        read_taskset,
        run_edits,
        summarize,
    )
    from medibench.knowledge_edit._store import (
        config_conflict,
        edit_spec,
        setting_name,
        store_edit_run,
    )
    from medibench.runs import RunFolderInUse, RunStore, RunStoreError, run_folder_lock
    from medibench.runs._runner import check_same_run

    _at_least(limit, 1, "--limit")
    _at_least(sequential, 0, "--sequential")
    _at_least(batch_size, 1, "--batch-size")
    _at_least(max_new_tokens, 1, "--max-new-tokens")
    if judge is not None and not judge.is_file():
        fail(f"judge config {judge} does not exist")
    try:
        ts = read_taskset(tasks)
    except TaskError as exc:
        fail(str(exc))
    options: dict[str, Any] = {}
    if model.startswith("openai:"):
        options = {"base_url": base_url} if base_url else {}
    elif Path(model).is_dir():
        options = {"batch_size": batch_size, "max_new_tokens": max_new_tokens}
    answerer = load(load_answerer, model, **options)
    settings = _read_config(config)
    if editor in EDITOR_ALIASES:
        note = (f"--editor {editor} is the old name of {EDITOR_ALIASES[editor]} (per-token values, "
                "keyed at the MLP input); GRACE as published is grace@paper")  # fmt: skip
        err.print(labelled("note", note, "yellow"))
    try:
        ed = load_editor(editor, settings)
    except (ImportError, ValueError, KeyError, TypeError) as exc:
        where = f"editor config {config}: " if config is not None else ""
        fail(where + " ".join(str(exc).split()))
    names = list(matcher or []) or (
        ["exact", "fuzzy", "token_accuracy"] if Path(model).is_dir() else ["exact", "fuzzy"]
    )
    if judge is not None and "judge" not in names:
        names.append("judge")
    try:
        with run_folder_lock(run), RunStore(run) as store:
            try:  # a run of a dataset, or of another task set, is refused (its rows would mix)
                check_same_run(store, {"dataset": f"edit-tasks:{tasks}"})
            except RunStoreError as exc:
                fail(str(exc))
            spec = edit_spec(tasks=tasks, taskset=ts, limit=limit, config=settings,
                             config_file=config, editor=ed, matchers=names,
                             model_options=options)  # fmt: skip
            conflict = config_conflict(store, model=model, editor=ed.name,
                                       sequential=sequential, spec=spec)  # fmt: skip
            if conflict and not overwrite:
                fail(f"{conflict}: they would be replaced; use another --out, or --overwrite to "
                     "start them afresh")  # fmt: skip
            if conflict:
                err.print(labelled("note", f"--overwrite: {conflict}: replaced", "yellow"))
            judge_matcher = None
            if judge is not None or "judge" in names:
                from medibench.judges import load_judge_config
                from medibench.knowledge_edit._judge import JudgeMatcher

                judge_matcher = JudgeMatcher(load(load_judge_config, judge), store)
            try:
                matchers = make_matchers(names, answerer, judge_matcher)
                report = run_edits(ts, answerer, ed, sequential=sequential, matchers=matchers,
                                   limit=limit, model_name=model)  # fmt: skip
            except (TaskError, AnswererError, ValueError) as exc:
                fail(" ".join(str(exc).split()))
            path = store_edit_run(store, report, model=model, editor=ed.name,
                                  sequential=sequential, spec=spec)  # fmt: skip
    except RunFolderInUse as exc:
        err.print(labelled("error", exc))
        raise typer.Exit(code=3) from None
    failed = [e for e in report.edits if e.error]
    unconverged = [e for e in report.edits if e.converged is False]
    console.print(
        f"{len(report.edits)} edits ({setting_name(sequential)}, {ed.name}): "
        f"{len(unconverged)} did not converge, {len(failed)} failed; results -> {path}"
    )
    for e in failed[:5]:
        console.print(f"  {e.edit_id}: {e.error}", markup=False)
    if report.lines:
        summary = summarize(report.lines)
        print_scores(summary)
        _write_scores(summary, json_out, csv_out)


@edit_app.command("train-mend")
def train_mend(
    tasks: Annotated[Path, typer.Option("--tasks", help="A task set folder: its edit requests.")],
    model: Annotated[Path, typer.Option(help="The local model folder MEND will edit.")],
    out: Annotated[Path, typer.Option("--out", help="The training folder (mend:DIR).")],
    config: Annotated[
        Path | None, typer.Option(help="Training settings (YAML; default: mend@1's).")
    ] = None,
    max_steps: Annotated[int | None, _over_config("Training steps")] = None,
    checkpoint_every: Annotated[int | None, _over_config("Steps between checkpoints")] = None,
    seed: Annotated[int | None, _over_config("Seeds the hypernetwork and the order")] = None,
    overwrite: Annotated[
        bool, typer.Option(help="Start afresh, removing a training already in --out.")
    ] = False,
) -> None:
    """Train MEND's hypernetwork on a task set's edit requests (edit loss on each request, KL
    locality loss on its locality probes), seeded and checkpointed: the same command resumes a
    stopped training; --editor mend:DIR then edits with it."""
    from medibench.knowledge_edit._mend_train import MendTrainError, read_mend_config
    from medibench.knowledge_edit._mend_train import train_mend as run_training
    from medibench.runs import RunFolderInUse

    _at_least(max_steps, 1, "--max-steps")
    _at_least(checkpoint_every, 1, "--checkpoint-every")
    if config is not None and not config.is_file():
        fail(f"--config {config} does not exist")
    try:
        settings = read_mend_config(
            config, max_steps=max_steps, checkpoint_every=checkpoint_every, seed=seed
        )
        result = run_training(tasks, model, out, settings, overwrite=overwrite)
    except MendTrainError as exc:
        fail(" ".join(str(exc).split()))
    except RunFolderInUse as exc:
        err.print(labelled("error", exc))
        raise typer.Exit(code=3) from None
    done = (f"resumed at step {result.resumed_at}, trained to step {result.steps}"
            if result.resumed_at else f"trained {result.steps} steps")  # fmt: skip
    if result.resumed_at == result.steps:
        done = f"already trained ({result.steps} steps)"
    last = result.last
    losses = f"edit loss {last.get('edit_loss', 0):.4f}, locality loss " + (
        f"{last.get('locality_loss', 0):.4f}"
    )
    console.print(f"MEND: {done}; last step: {losses} -> {out}", markup=False)


@edit_app.command("score")
def score(
    results: Annotated[Path, typer.Argument(help="A results JSONL file (edit run writes one).")],
    json_out: ScoresJsonOption = None,
    csv_out: CsvOption = None,
    matcher: Annotated[
        str | None, typer.Option(help="The matcher to report (default exact).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Only this model's lines.")] = None,
    editor: Annotated[str | None, typer.Option(help="Only this editor's lines.")] = None,
    setting: Annotated[str | None, typer.Option(help="single or sequential-N.")] = None,
) -> None:
    """Reliability, generality and locality of a results file (macro over edits)."""
    from medibench.knowledge_edit import ResultsFormatError, read_results, summarize

    try:
        lines = read_results(results)
    except (ResultsFormatError, FileNotFoundError) as exc:
        fail(str(exc))
    wanted = {"model": model, "editor": editor, "setting": setting}
    lines = [x for x in lines if all(v is None or x.extra.get(k) == v for k, v in wanted.items())]
    groups = sorted({(str(x.extra.get("model", "")), str(x.extra.get("editor", "")),
                      str(x.extra.get("setting", ""))) for x in lines})  # fmt: skip
    if len(groups) > 1:
        listed = "; ".join(f"--model {m!r} --editor {e} --setting {s}" for m, e, s in groups)
        fail(f"{results} holds {len(groups)} runs: pick one with {listed}")
    try:
        summary = summarize(lines, matcher=matcher)
    except ValueError as exc:
        fail(f"{results}: {exc}")
    print_scores(summary)
    _write_scores(summary, json_out, csv_out)


@edit_app.command("analyze")
def analyze(
    run: Annotated[Path, typer.Argument(help="A run folder that edit run wrote.")],
    layers: Annotated[
        str | None,
        typer.Option(
            help="Decoder layers to record, comma-separated, negative from the end (default: "
            "the first, middle and last, and the edited ones)."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="The analysis folder (default RUN/edit_analysis).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="The first N edits of each run.")] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples of every interval.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 42,
) -> None:
    """Latent-space geometry of the run's editors: each edit made again alone, the hidden
    states of its request and probes recorded before and after at chosen layers; distances to
    the edit's key, memory fires, representation shift (cosine, linear CKA) and the AUROC of
    generality against locality probes, per editor, layer and task type; tables and figures
    in --out, and a section of `medibench report RUN`."""
    from medibench.knowledge_edit._analyze import AnalysisError, analyze_run
    from medibench.runs import RunFolderInUse, RunStore, run_folder_lock

    _at_least(limit, 1, "--limit")
    _at_least(resamples, 1, "--resamples")
    chosen = _int_list(layers, "--layers") if layers is not None else None
    if not (run / "run.sqlite").is_file():
        fail(f"{run} is not a run folder (no run.sqlite): give the --out of `medibench edit run`")
    out = out if out is not None else run / "edit_analysis"
    try:
        with run_folder_lock(run), RunStore(run) as store:
            try:
                data = analyze_run(store, out, layers=chosen, limit=limit, n_resamples=resamples,
                                   seed=seed, log=lambda m: err.print(m, markup=False))  # fmt: skip
            except (AnalysisError, ValueError) as exc:
                fail(" ".join(str(exc).split()))
    except RunFolderInUse as exc:
        err.print(labelled("error", exc))
        raise typer.Exit(code=3) from None
    _print_analysis(data)
    console.print(f"analysis -> {out}", markup=False)


@edit_app.command("sweep")
def sweep(
    tasks: Annotated[Path, typer.Option("--tasks", help="A task set folder (edit tasks).")],
    model: Annotated[
        str, typer.Option(help="A local model folder, openai:MODEL or module:callable.")
    ],
    editor: Annotated[str, typer.Option(help="ft, lora, grace@paper or grace-tokens.")],
    grid: Annotated[
        list[str],
        typer.Option(
            help="KEY=V1,V2,...: an editor option and its values (repeatable; steps: the "
            "editor's step count)."
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="The sweep folder (a run folder per cell and seed).")
    ],
    seeds: Annotated[str, typer.Option(help="Seeds of every cell, comma-separated.")] = "0",
    config: Annotated[
        Path | None, typer.Option(help="Editor settings every cell starts from (YAML/JSON).")
    ] = None,
    sequential: SequentialOption = 0,
    matcher: Annotated[list[str] | None, _matchers("exact, fuzzy, token_accuracy")] = None,
    limit: LimitOption = None,
    batch_size: BatchSizeOption = 8,
    max_new_tokens: MaxNewTokensOption = 16,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Run an editor over a grid of its options, each cell with every seed (one edit run per
    cell and seed in OUT/cells/); a run finished before is skipped, so a killed sweep resumes.
    Prints and writes (OUT/sweep.csv, OUT/sweep.json) reliability, generality and locality per
    cell, mean over seeds with a bootstrap interval, and a heat map per metric."""
    from medibench.knowledge_edit import TaskError, read_taskset
    from medibench.knowledge_edit._sweep import parse_grid, run_sweep, sweep_cells

    _at_least(limit, 1, "--limit")
    _at_least(sequential, 0, "--sequential")
    _at_least(batch_size, 1, "--batch-size")
    _at_least(max_new_tokens, 1, "--max-new-tokens")
    seed_list = _int_list(seeds, "--seeds")
    if len(set(seed_list)) != len(seed_list):
        fail(f"--seeds {seeds}: a seed is given twice")
    if "judge" in (matcher or []):
        fail("--matcher judge: a sweep scores with exact, fuzzy or token_accuracy")
    try:
        cells_grid = parse_grid(grid, editor)
        ts = read_taskset(tasks)
    except (TaskError, ValueError) as exc:
        fail(" ".join(str(exc).split()))
    local = Path(model).is_dir()
    settings = {
        "tasks": str(ts.root.resolve()), "model": model, "editor": editor,
        "config": _read_config(config), "sequential": sequential, "limit": limit,
        "matchers": list(matcher or []) or (["exact", "fuzzy", "token_accuracy"] if local
                                            else ["exact", "fuzzy"]),
        "model_options": {"batch_size": batch_size, "max_new_tokens": max_new_tokens}
        if local else {},
    }  # fmt: skip
    cells = sweep_cells(cells_grid, seed_list, out)
    try:
        result = run_sweep(cells, out, settings, executor=executor, ray_address=ray_address,
                           log=lambda m: err.print(m, markup=False))  # fmt: skip
    except (ValueError, ImportError) as exc:
        fail(" ".join(str(exc).split()))
    table = Table(title=f"edit sweep: {editor}, mean over seeds [95% CI]")
    keys = [k for k, _ in cells_grid]
    for col in (*keys, "seeds", *_METRICS):
        table.add_column(col)
    for r in result["rows"]:
        cells_text = [_fmt(r[m], r[f"{m}_ci_low"], r[f"{m}_ci_high"]) if r[f"{m}_n"] > 1
                      else ("undefined" if r[m] is None else f"{r[m]:.3f} n=1")
                      for m in _METRICS]  # fmt: skip
        table.add_row(*(str(r[k]) for k in keys), str(r["seeds"]), *cells_text)
    console.print(table)
    console.print(f"{result['ran']} run(s) now, {result['skipped']} done before; table and heat "
                  f"maps -> {out}", markup=False)  # fmt: skip


_METRICS = ("reliability", "generality", "locality")


def print_scores(summary: dict[str, Any]) -> None:
    """One table: all edits, then each task type and stage (macro values, undefined counts)."""
    table = Table(title=f"model editing ({summary['matcher']})")
    for col in ("group", "edits", *_METRICS, "undefined R/G/L"):
        table.add_column(col)
    for r in score_rows(summary):
        cells = [_fmt(r[m], r[f"{m}_ci_low"], r[f"{m}_ci_high"]) for m in _METRICS]
        undefined = "/".join(str(r[f"{m}_undefined"]) for m in _METRICS)
        table.add_row(r["group"], str(r["edits"]), *cells, undefined)
    console.print(table)


def score_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The printed table as rows: ``matcher``, ``group`` (``all (immediate)``, each task type,
    ``stage S``), ``edits``, each metric (macro over edits; ``None``: undefined), its 95% interval
    (``<metric>_ci_low``, ``<metric>_ci_high``) and ``<metric>_undefined`` (edits without it)."""
    groups = [("all (immediate)", summary)]
    groups += list(summary["by_task_type"].items())
    groups += [(f"stage {s}", g) for s, g in summary["by_stage"].items()]
    rows = []
    for name, g in groups:
        row: dict[str, Any] = {"matcher": summary["matcher"], "group": name, "edits": g["n_edits"]}
        for m in _METRICS:
            low, high = g["ci95"][m] or (None, None)
            row.update({m: g[m], f"{m}_ci_low": low, f"{m}_ci_high": high})
            row[f"{m}_undefined"] = g["n_undefined"][m]
        rows.append(row)
    return rows


def _write_scores(summary: dict[str, Any], json_out: Path | None, csv_out: Path | None) -> None:
    """``--json``: the scores as they are summarised; ``--csv``: the printed table's rows."""
    if json_out is not None:
        json_out.write_text(json.dumps(summary, indent=2))
        console.print(f"scores -> {json_out}", markup=False)
    if csv_out is not None:
        from medibench.report import write_rows_csv

        write_rows_csv(score_rows(summary), csv_out)
        console.print(f"summary -> {csv_out}", markup=False)


def _fmt(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "undefined"
    return f"{value:.3f}" + ("" if low is None else f" [{low:.2f}, {high:.2f}]")


def _read_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    if not path.is_file():
        fail(f"editor config {path} does not exist")
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        fail(f"editor config {path}: not readable {'JSON' if path.suffix == '.json' else 'YAML'} "
             f"({' '.join(str(exc).split())})")  # fmt: skip
    if not isinstance(data, dict):
        fail(f"editor config {path}: expected a mapping of options")
    return data


def _at_least(value: int | None, lowest: int, option: str) -> None:
    if value is not None and value < lowest:
        fail(f"{option} must be at least {lowest}, got {value}")


def _int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        fail(f"{option} {text!r}: expected whole numbers separated by commas (e.g. 0,-1)")
    if not values:
        fail(f"{option}: give at least one value")
    return values


def _print_analysis(data: dict[str, Any]) -> None:
    """The tables of the report's geometry section (:func:`geometry_tables`)."""
    from medibench.knowledge_edit._report import geometry_tables

    for t in geometry_tables(data):
        table = Table(title=t["title"])
        for col in t["columns"]:
            table.add_column(col)
        for row in t["rows"]:
            table.add_row(*row)
        console.print(table)
