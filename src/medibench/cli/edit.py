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
from medibench.cli._options import CsvOption

edit_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Model editing of medical VLMs (M3Bench style).")  # fmt: skip


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
    sequential: Annotated[int, typer.Option(help="Edits per sequence, no undo (0: single).")] = 0,
    judge: Annotated[Path | None, typer.Option(help="Judge config for the judge matcher.")] = None,
    matcher: Annotated[
        list[str] | None, typer.Option(help="exact, fuzzy, token_accuracy, judge (repeatable).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="The first N edits of the order.")] = None,
    batch_size: Annotated[int, typer.Option(help="Questions per generate call.")] = 8,
    max_new_tokens: Annotated[int, typer.Option(help="The longest answer, in tokens.")] = 16,
    base_url: Annotated[str | None, typer.Option(help="Endpoint of an openai:MODEL.")] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the scores as JSON.")
    ] = None,
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
    from medibench.knowledge_edit._store import config_conflict, setting_name, store_edit_run
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
            spec = {
                "tasks": str(tasks), "taskset": ts.manifest, "limit": limit,
                "config": settings, "config_file": None if config is None else str(config),
                "editor": _settings(ed), "matchers": names, "model_options": options,
            }  # fmt: skip
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
    max_steps: Annotated[
        int | None, typer.Option(help="Training steps (overrides --config).")
    ] = None,
    checkpoint_every: Annotated[
        int | None, typer.Option(help="Steps between checkpoints (overrides --config).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seeds the hypernetwork and the order (overrides --config).")
    ] = None,
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
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the scores as JSON.")
    ] = None,
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


def _settings(editor: Any) -> dict[str, Any]:
    """An editor's settings as data (its config dataclass, or its plain attributes)."""
    import dataclasses

    config = getattr(editor, "config", None)
    if config is not None and dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {"name": editor.name, **dataclasses.asdict(config)}
    plain = {k: v for k, v in vars(editor).items() if isinstance(v, (str, int, float))}
    return {"name": editor.name, **plain}
