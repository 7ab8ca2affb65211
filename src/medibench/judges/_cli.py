"""``medibench agreement`` (a plain function with Typer annotations, registered by the main app)
and the body of ``medibench judge`` (:func:`judge_run_folder`; the command, with its options for
published outputs, is :mod:`medibench.cli.judge`): they hold no logic beyond reading options and
printing tables.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from medibench._console import labelled, stderr_console, stdout_console

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["agreement", "judge_run_folder"]

console = stdout_console()
err = stderr_console()


def _fail(message: str) -> None:
    err.print(labelled("error", message))
    raise typer.Exit(code=2)


def judge_run_folder(
    run: Path,
    judge_config: Path | None,
    judge_model: str | None,
    base_url: str | None = None,
    protocol: list[str] | None = None,
    only_failed: bool = False,
    passes: int = 1,
    max_cost: float | None = None,
    dry_run: bool = False,
    concurrency: int | None = None,
) -> None:
    """Judge the outputs of run folder ``run`` with a VLM and fill the judged metrics (ea, vq,
    rubric, ...): ``medibench judge``'s work once the folder is locked (and, for published
    outputs, made). A bad option or config is a one-line error (exit 2).

    The API key comes from OPENAI_API_KEY (or the variable the config names), never a file.
    """
    from medibench.judges import (
        DEFAULT_JUDGE,
        CachePolicy,
        JudgeConfigError,
        JudgeSetupError,
        MissingApiKeyError,
        judge_run,
        load_judge,
        load_judge_config,
    )
    from medibench.registry import UnknownNameError
    from medibench.runs import RunStore, RunStoreError

    if judge_config is None and judge_model is None:
        _fail("give a judge config (--judge JUDGE.yaml) or a judge model (--judge-model NAME)")
    try:
        config = load_judge_config(
            judge_config, model=judge_model, base_url=base_url, concurrency=concurrency
        )
        with RunStore.open_existing(run) as store:
            rows = Counter(f"{s.protocol}@{s.protocol_version}" for s in store.scores())
        scored = {spec.split("@", 1)[0] for spec in rows}
        specs = protocol or [DEFAULT_JUDGE[p] for p in sorted(scored) if p in DEFAULT_JUDGE]
        judges = [load_judge(s) for s in specs]
        if not any(set(j.targets) & set(rows) for j in judges):
            _fail(_nothing_to_judge(run, rows, judges))
        policy = CachePolicy.only_failed() if only_failed else CachePolicy()
        if max_cost is not None and not dry_run:
            _print_budget_before(run, max_cost)
        judge_all = partial(
            judge_run, run, judges, config, passes=passes, policy=policy, max_cost=max_cost
        )
        if dry_run:
            _print_plan(judge_all(dry_run=True), config)
            return
        with _Progress(err) as bar:
            reports = judge_all(on_plan=bar.start, on_progress=bar.advance)
    except (
        MissingApiKeyError,
        JudgeConfigError,
        JudgeSetupError,
        RunStoreError,
        UnknownNameError,
        ValueError,
    ) as exc:
        _fail(str(exc))
    _print_reports(reports, passes)
    console.print(f"summary -> {_write_summary(run)}", markup=False)


def agreement(
    a: Annotated[
        str, typer.Argument(help="rater A: ratings CSV, a run folder, or RUN#JUDGE_MODEL")
    ],
    b: Annotated[
        str, typer.Argument(help="rater B: ratings CSV, a run folder, or RUN#JUDGE_MODEL")
    ],
    metric: Annotated[
        list[str] | None, typer.Option(help="metrics to compare (repeatable; default: shared)")
    ] = None,
    protocol: Annotated[
        str | None, typer.Option(help="take a run's values from this protocol (name[@version])")
    ] = None,
    n_resamples: Annotated[
        int, typer.Option("--resamples", min=1, help="bootstrap resamples")
    ] = 1000,
    seed: Annotated[int, typer.Option(help="bootstrap seed")] = 42,
    level: Annotated[float, typer.Option(help="confidence level")] = 0.95,
    out: Annotated[Path | None, typer.Option("--csv", help="also write the table as CSV")] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write the table as JSON")
    ] = None,
) -> None:
    """Agreement between two raters (judges or clinicians): Pearson, Spearman, Kendall (with
    p-values), ICC(2,1) and per-sample rank Spearman across models, with bootstrap CIs."""
    from medibench.judges.agreement import agreement_table, load_ratings
    from medibench.runs import RunStoreError

    try:
        ra = load_ratings(a, protocol=protocol)
        rb = load_ratings(b, protocol=protocol)
        rows = agreement_table(
            ra, rb, metrics=metric, n_resamples=n_resamples, seed=seed, level=level
        )
    except (RunStoreError, ValueError, OSError) as exc:
        _fail(str(exc))
    if not rows or all(r.n == 0 for r in rows):
        _fail(f"no (model, sample, metric) rated by both {a} and {b}")
    table = Table(
        title=f"agreement: {a} vs {b}",
        caption=f"{level:.0%} percentile bootstrap CIs, {n_resamples} resamples, seed {seed}; "
        "n = paired ratings (samples, for the rank statistic); p: two-sided, scipy's default "
        "test (t; Kendall: exact without ties and n <= 33, else normal)",
    )
    for col in ("metric", "statistic", "value", f"{level:.0%} CI", "p", "n"):
        table.add_column(
            col, justify="left" if col in ("metric", "statistic") else "right", no_wrap=True
        )
    for r in rows:
        for label, est, n in (
            ("Pearson r", r.pearson, r.n),
            ("Spearman rho", r.spearman, r.n),
            ("Kendall tau-b", r.kendall, r.n),
            ("ICC(2,1)", r.icc, r.n),
            ("per-sample rank rho", r.rank_spearman, r.n_rank_samples),
        ):
            ci = "-" if math.isnan(est.low) else f"[{est.low:.3f}, {est.high:.3f}]"
            value = "-" if math.isnan(est.value) else f"{est.value:.3f}"
            p = "-" if math.isnan(est.pvalue) else f"{est.pvalue:.3g}"
            table.add_row(r.metric if label == "Pearson r" else "", label, value, ci, p, str(n))
    console.print(table)
    from medibench.report import write_rows_csv, write_rows_json

    for path, write in ((out, write_rows_csv), (json_out, write_rows_json)):
        if path is not None:
            write([_flat(r) for r in rows], path)
            console.print(f"agreement -> {path}", markup=False)


def _write_summary(run: Path) -> Path:
    """``RUN/judge_summary.json``: what is judged in the run folder so far, per judge."""
    from medibench.judges._records import SUMMARY_FILE, JudgementStore
    from medibench.report import write_rows_json
    from medibench.runs import RunStore

    with RunStore.open_existing(run) as store:
        rows = JudgementStore(store).summary()
    return write_rows_json(rows, run / SUMMARY_FILE)


class _Progress:
    """A progress bar over the calls, started once the plan knows how many (terminals only)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> _Progress:
        return self

    def start(self, total: int) -> None:
        if total and self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            bar = Progress(
                TextColumn("judging"), BarColumn(), MofNCompleteColumn(), console=self.console
            )
            bar.start()
            self._bar, self._task = bar, bar.add_task("judging", total=total)

    def advance(self) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _flat(r) -> dict:
    d: dict = {"metric": r.metric, "n": r.n, "n_rank_samples": r.n_rank_samples}
    for name in ("pearson", "spearman", "kendall", "icc", "rank_spearman"):
        e = getattr(r, name)
        d.update({name: _num(e.value), f"{name}_low": _num(e.low), f"{name}_high": _num(e.high)})
        if name in ("pearson", "spearman", "kendall"):
            d[f"{name}_p"] = _num(e.pvalue)
    return d


def _num(v: float) -> float | None:
    return None if math.isnan(v) else v


def _usd(v: float | None) -> str:
    return "-" if v is None else f"${v:.4f}"


def _print_plan(reports, config) -> None:
    table = Table(title=f"judging plan ({config.model} at {config.endpoint})")
    for col in ("judge", "predictions", "cached", "calls", "est. cost", "not judged"):
        table.add_column(col, justify="left" if col in ("judge", "not judged") else "right")
    for r in reports:
        table.add_row(
            r.judge,
            str(r.items),
            str(r.cached),
            str(r.planned),
            _usd(r.estimated_cost_usd),
            "; ".join(f"{n} {why}" for why, n in r.skipped.items()) or "-",
        )
    console.print(table)
    if not config.has_prices:
        console.print("no prices in the judge config: cost not estimated")


def _nothing_to_judge(run: Path, rows: Counter, judges) -> str:
    """Which protocols the run is scored with, and which judge protocols fill each."""
    from medibench.judges import JUDGES

    fills: dict[str, list[str]] = {}
    for name in JUDGES.names():
        for target in JUDGES.create(name).targets:
            fills.setdefault(target, []).append(name)
    scored = "; ".join(
        f"{spec} ({n} rows) <- {', '.join(fills.get(spec, [])) or 'no judge protocol'}"
        for spec, n in sorted(rows.items())
    )
    asked = "; ".join(f"{j.spec} fills {', '.join(j.targets)}" for j in judges)
    return (
        f"{run}: nothing to judge. Scored here, with the judge protocols that fill each: "
        f"{scored or 'no score rows (run medibench score first)'}."
        + (f" Asked for: {asked}." if asked else "")
    )


def _print_budget_before(run: Path, max_cost: float) -> None:
    from medibench.judges import JudgementStore
    from medibench.runs import RunStore

    with RunStore.open_existing(run) as store:
        spent = JudgementStore(store).spent_usd()
    console.print(
        f"budget: {_usd(spent)} of {_usd(max_cost)} already spent on judges in {run} "
        "(--max-cost is for the run folder, across invocations); "
        f"{_usd(max(0.0, max_cost - spent))} left"
    )


def _print_reports(reports, passes: int) -> None:
    table = Table(title="judging")
    cols = (
        "judge",
        "ok",
        "refused",
        "unparsable",
        "error",
        "cached",
        "not started",
        "requests",
        "cost",
        "rows filled",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "judge" else "right")
    for r in reports:
        c = r.counts
        table.add_row(
            r.judge,
            str(c["ok"]),
            str(c["refused"]),
            str(c["unparsable"]),
            str(c["error"]),
            str(r.cached),
            str(r.not_started),
            str(r.requests),
            _usd(r.cost_usd),
            str(r.filled),
        )
    console.print(table)
    for r in reports:
        if r.missing:
            miss = ", ".join(f"{m}: {n}" for m, n in sorted(r.missing.items()))
            console.print(f"{r.judge}: missing judged values (never 0) per metric: {miss}")
        if passes > 1 and r.spread:
            sp = ", ".join(f"{k} {v:.3f}" for k, v in r.spread.items())
            console.print(f"{r.judge}: mean spread (sd) across {passes} passes: {sp}")
        failed = sum(r.failures.values())
        if failed:
            why = ", ".join(f"{n} {kind}" for kind, n in r.failures.most_common())
            console.print(
                f"[yellow]{r.judge}: {failed} call(s) failed ({why}); stored as errors (the "
                "judgements' problems name the endpoint, status and body): run again to ask "
                "only for them[/]"
            )
        if r.max_cost is not None:
            console.print(
                f"{r.judge}: run folder judge spend {_usd(r.spent_before_usd)} before, "
                f"{_usd(r.spent_after_usd)} after, of the {_usd(r.max_cost)} budget"
            )
        if r.stopped_by_budget:
            console.print(
                f"[yellow]{r.judge}: budget reached, {r.not_started} call(s) not started; "
                "what was judged is stored: run again (with a higher --max-cost) to resume[/]"
            )
