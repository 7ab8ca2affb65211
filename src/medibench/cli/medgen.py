"""``medibench medgen``: MedGEN-Bench's own commands (:mod:`medibench.benchmarks.medgen`).

* ``medibench medgen controls --dataset ... --control blank|unrelated|same-modality --seed N
  --out DIR``: the pairing-sensitivity control variant of a sample set, as a folder that
  ``medibench run --dataset medgen:DIR/vqa.jsonl`` (or ``gen.jsonl``) runs like the original.
* ``medibench medgen delta ORIGINAL_RUN --control RUN ...``: Delta per control and model with
  paired bootstrap CIs, printed, kept in the original run's store (table
  ``pairing_sensitivity``: ``medibench report`` shows it as a panel) and written to
  ``ORIGINAL_RUN/report/pairing_sensitivity.md`` (and ``.json``).
* ``medibench medgen summary RUN``: ``medgen@code`` by format, task, subtask and modality.
* ``medibench medgen similarity --dataset ... --features clip:PATH``: the paper's
  image-instruction similarity of the benchmark's own pairs, matched against shuffled
  (:mod:`medibench.benchmarks.medgen.similarity`), by format and task, with bootstrap CIs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from medibench.cli._app import check_not_empty, console, err, fail, load, write_summary
from medibench.cli._options import CsvOption, DatasetOptionsOption, JsonOption

medgen_app = typer.Typer(no_args_is_help=True, add_completion=False)

_BY = ("metadata.format", "task", "metadata.subtask", "modality")


@medgen_app.command("controls")
def controls(
    dataset: Annotated[str, typer.Option(help="MedGEN sample set, e.g. medgen:DIR/vqa.jsonl")],
    control: Annotated[str, typer.Option(help="blank, unrelated or same-modality")],
    out: Annotated[Path, typer.Option(help="new folder for the control set")],
    seed: Annotated[int, typer.Option(help="seed of the donor draws")] = 0,
) -> None:
    """Derive a pairing-sensitivity control set (donors drawn from the set itself, recorded)."""
    from medibench.benchmarks.medgen.controls import CONTROLS, derive_controls
    from medibench.datasets import load_dataset

    if control not in CONTROLS:
        fail(f"unknown control {control!r}; choose one of {', '.join(CONTROLS)}")
    ds = load(load_dataset, dataset)
    check_not_empty(ds, dataset)
    try:
        manifest = derive_controls(list(ds), control, seed, out, source=dataset)
    except ValueError as exc:
        fail(str(exc))
    made, left = len(manifest["samples"]), len(manifest["left_out"])
    files = ", ".join(sorted(p.name for p in out.glob("*.jsonl")))
    console.print(f"{control} control of {made} samples (seed {seed}) -> {out} ({files})")
    if left:
        err.print(f"[yellow]{left} sample(s) left out (no donor): see {out / 'controls.json'}[/]")


@medgen_app.command("delta")
def delta(
    original: Annotated[Path, typer.Argument(metavar="RUN", help="run on the original samples")],
    control: Annotated[list[Path], typer.Option(help="run on a control set (repeatable)")],
    metric: Annotated[str, typer.Option(help="the score compared")] = "overall_nogt",
    protocol: Annotated[str, typer.Option(help="scoring protocol")] = "medgen@code",
) -> None:
    """Delta = mean(original - control) per control and model, paired bootstrap 95% CI."""
    from contextlib import ExitStack

    from medibench.benchmarks.medgen.controls import (
        pairing_sensitivity,
        rows_as_json,
        sensitivity_table,
        store_rows,
    )
    from medibench.io import atomic_write_text
    from medibench.runs import RunStore, RunStoreError

    with ExitStack() as stack:
        try:
            base = stack.enter_context(RunStore.open_existing(original))
            others = [stack.enter_context(RunStore.open_existing(c)) for c in control]
        except RunStoreError as exc:
            fail(str(exc))
        rows = pairing_sensitivity(base, others, metric=metric, protocol=protocol)
        if not rows:
            fail(f"no sample has {metric} under {protocol} in both {original} and a control run")
        store_rows(base, rows)  # the report's "Pairing sensitivity" panel
    from medibench.stats import interval_text

    table = Table("control", "model", "n", "original", "control", "Delta", "95% CI")
    for r in rows:
        ci = interval_text(r.ci_low, r.ci_high, r.n)  # "n=1": one pair has no interval
        table.add_row(r.control, r.model, str(r.n), f"{r.original:.3f}", f"{r.controlled:.3f}",
                      f"{r.delta:.3f}", ci)  # fmt: skip
    console.print(table)
    report = original / "report"
    atomic_write_text(report / "pairing_sensitivity.md", sensitivity_table(rows))
    atomic_write_text(report / "pairing_sensitivity.json", rows_as_json(rows))
    console.print(f"-> {report / 'pairing_sensitivity.md'}")


@medgen_app.command("summary")
def summary(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="run folder")],
    by: Annotated[list[str] | None, typer.Option(help="sample fields (default: all four)")] = None,
    csv_out: CsvOption = None,
    json_out: JsonOption = None,
) -> None:
    """``medgen@code`` by format, task, subtask and modality, with the code's pass rates."""
    from medibench.cli._app import print_summary
    from medibench.protocols import load_protocol
    from medibench.runs import RunStore, RunStoreError

    try:
        with RunStore.open_existing(run) as store:
            samples = {s.sample_id: s for s in store.samples()}
            records = [s for s in store.scores("medgen") if s.protocol_version == "code"]
    except RunStoreError as exc:
        fail(str(exc))
    rows = print_summary(records, samples, load_protocol("medgen@code"), by=list(by or _BY))
    write_summary(rows, csv_out, json_out)


SimilarityBy = Annotated[
    list[str] | None, typer.Option(help="sample fields (default: metadata.format and task)")
]
Within = Annotated[
    str | None, typer.Option(help="shuffle instructions only within groups of this sample field")
]
Shuffles = Annotated[int, typer.Option(min=1, help="derangements whose similarities are averaged")]


@medgen_app.command("similarity")
def similarity(
    dataset: Annotated[str, typer.Option(help="MedGEN sample set, e.g. medgen:DIR/gen.jsonl")],
    features: Annotated[
        str, typer.Option(help="CLIP-family extractor clip:PATH (images and texts in one space)")
    ],
    by: SimilarityBy = None,
    within: Within = None,
    shuffles: Shuffles = 10,
    seed: Annotated[int, typer.Option(help="seed of the derangements")] = 0,
    resamples: Annotated[int, typer.Option(min=0, help="bootstrap resamples (0: no CI)")] = 1000,
    level: Annotated[float, typer.Option(min=0.5, max=0.999, help="CI level")] = 0.95,
    dataset_option: DatasetOptionsOption = None,
    csv_out: CsvOption = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="also write the rows, settings and per-sample values"),
    ] = None,
) -> None:
    """Image-instruction similarity of matched against shuffled pairs (MedGEN-Bench's
    contextual-entanglement statistic): means with bootstrap CIs, their paired difference and
    its Wilcoxon p-value, overall and per group."""
    from medibench.analysis.features import load_extractor
    from medibench.benchmarks.medgen.similarity import image_instruction_similarity
    from medibench.cli._options import dataset_options
    from medibench.datasets import load_dataset

    try:
        options = dataset_options(dataset_option)
    except ValueError as exc:
        fail(str(exc))
    ds = load(load_dataset, dataset, **options)
    check_not_empty(ds, dataset)
    extractor = load(load_extractor, features)
    try:
        result = image_instruction_similarity(
            list(ds), extractor, by=list(by or _BY[:2]), within=within, shuffles=shuffles,
            seed=seed, n_resamples=resamples, level=level,
        )  # fmt: skip
    except (ValueError, AttributeError) as exc:
        fail(str(exc))
    rows = [_flat(r) for r in result["rows"]]
    title = f"image-instruction similarity ({shuffles} shuffles, seed {seed})"
    table = Table("field", "group", "n", *_STATS, "p (Wilcoxon)", title=title)
    for r in rows:
        p = "n/a" if r["pvalue"] is None else f"{r['pvalue']:.3g}"
        table.add_row(r["field"], r["group"], str(r["n"]), *(_with_ci(r, k) for k in _STATS), p)
    console.print(table)
    write_summary(rows, csv_out, None)
    if json_out is not None:
        from medibench.report import write_json

        write_json({**result, "rows": rows}, json_out)
        console.print(f"results -> {json_out}", markup=False)


_STATS = ("matched", "shuffled", "difference")


def _flat(row: dict) -> dict:
    """A :class:`SimilarityRow` dict with each CI as ``<stat>_ci_low`` / ``<stat>_ci_high``."""
    out = {k: row[k] for k in ("field", "group", "n")}
    for k in _STATS:
        out.update({k: row[k], f"{k}_ci_low": row[f"{k}_ci"][0], f"{k}_ci_high": row[f"{k}_ci"][1]})
    out["pvalue"] = row["pvalue"]
    return out


def _with_ci(row: dict, key: str) -> str:
    from medibench.stats import interval_text

    low, high = row[f"{key}_ci_low"], row[f"{key}_ci_high"]
    ci = "" if low != low else f" {interval_text(low, high, row['n'])}"  # NaN: no bootstrap
    return f"{row[key]:.3f}{ci}"
