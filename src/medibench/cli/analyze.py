"""``medibench analyze``: look inside models (:mod:`medibench.analysis`).

``medibench analyze attention`` captures the cross-attention of a diffusers editing model for a
word of each instruction, writes the grounding IoU per sample into the run store (table
``attention``) and the heat maps and overlays as PNG (``RUN/analysis/attention/<model>/``), which
``medibench report`` shows in the sample browser; with judged editing accuracy in the run it
prints MedEBench's diagnosis (conservative edit / mislocalised). ``medibench analyze correlate``
puts per-model values of runs, score files and CSVs side by side with their correlations,
p-values, bootstrap intervals and linear fits (:mod:`medibench.judges.correlate`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from medibench._console import labelled
from medibench.cli._app import check_not_empty, console, err, fail, write_summary
from medibench.cli._options import (
    CsvOption,
    DatasetOption,
    JsonOption,
    ModelOptionsOption,
    OutputsPerSampleOption,
    PredictionsOption,
    ProgressOption,
    RunSeedOption,
    SampleLimitOption,
)

analyze_app = typer.Typer(no_args_is_help=True, add_completion=False)


@analyze_app.command("attention")
def attention(
    dataset: DatasetOption,
    model: Annotated[str, typer.Option(help="a diffusers model spec, e.g. ip2p:WEIGHTS")],
    out: Annotated[Path, typer.Option("--out", help="run folder (created if missing)")],
    word: Annotated[
        str | None,
        typer.Option(
            help="the word whose attention is read (default: the sample's region when the "
            "instruction names it, else its longest word)"
        ),
    ] = None,
    k: OutputsPerSampleOption = 1,
    limit: SampleLimitOption = None,
    seed: RunSeedOption = 0,
    alpha: Annotated[float, typer.Option(help="binarise at alpha x Otsu")] = 1.3,
    preset: Annotated[
        str, typer.Option(help="aggregation: medebench (default), daam or p2p")
    ] = "medebench",
    model_option: ModelOptionsOption = None,
    redo: Annotated[bool, typer.Option(help="recompute rows already done")] = False,
    progress: ProgressOption = True,
) -> None:
    """Attention-grounding IoU per sample (MedEBench), heat maps into the run."""
    from medibench._progress import progress_bar
    from medibench.analysis._recorder import NoCrossAttentionError
    from medibench.analysis._run import (
        SUMMARY_FILE,
        analyze_attention,
        attention_summary,
        diagnosis_rows,
        summary_rows,
    )
    from medibench.analysis._store import read_attention
    from medibench.analysis.attention import AttentionOptions
    from medibench.datasets import load_dataset
    from medibench.models._spec import parse_model_spec
    from medibench.report import write_rows_json
    from medibench.runs import RunStore, RunStoreError
    from medibench.runs._cli import run_folder_session
    from medibench.runs._runner import check_same_run

    try:
        options = AttentionOptions.preset(preset)
        ds = load_dataset(dataset)
        spec = parse_model_spec(model, options=list(model_option or ()))
    except (KeyError, ValueError, FileNotFoundError, ImportError) as exc:
        fail(str(exc))
    check_not_empty(ds, dataset)
    samples = list(ds)[:limit]
    with run_folder_session(out):
        with RunStore(out) as store:  # a run of another dataset or seed is refused, as by `run`
            try:
                check_same_run(store, {"dataset": dataset, "seed": seed})
            except RunStoreError as exc:
                fail(str(exc))
        try:
            loaded = spec.load()
        except (KeyError, ValueError, FileNotFoundError, ImportError, TypeError) as exc:
            fail(f"model {model!r}: {exc}")
        if getattr(loaded, "pipeline", None) is None:
            fail(f"model {model!r} is not a diffusers pipeline model: no attention to capture")
        with RunStore(out) as store:
            with progress_bar(progress, err, "attention", len(samples) * k) as advance:
                try:
                    stage = analyze_attention(
                        samples,
                        loaded,
                        store,
                        word=word,
                        k=k,
                        seed=seed,
                        alpha=alpha,
                        options=options,
                        redo=redo,
                        on_item=advance,
                        model_spec=spec.to_dict(),
                    )
                except NoCrossAttentionError as exc:
                    fail(f"model {model!r}: {exc}")
            rows = read_attention(store.connection)
            scores = store.scores()
        summary = write_rows_json(attention_summary(rows, scores), out / SUMMARY_FILE)
    console.print(
        f"attention of {stage.model}: {stage.written} written, {stage.skipped} already done, "
        f"{len(stage.failed)} failed -> {out / 'run.sqlite'} (table attention), "
        f"{out / 'analysis' / 'attention'}"
    )
    for why in stage.failed[:10]:
        err.print(f"  failed: {why}", markup=False)
    table = Table(title=f"attention-grounding IoU (alpha {alpha}, {preset})")
    for col in ("region", "n", "IoU", "IoU = 0", "NaN"):
        table.add_column(col)
    for r in summary_rows(rows, stage.model):
        iou = "-" if r["iou"] is None else f"{r['iou']:.3f}"
        table.add_row(r["region"], str(r["n"]), iou, str(r["zero"]), str(r["nan"]))
    console.print(table)
    diagnosed = diagnosis_rows([r for r in rows if r["model"] == stage.model], scores)
    if diagnosed:
        counts: dict[tuple[str, str], int] = {}
        for d in diagnosed:
            key = (d.get("region") or "(none)", d["diagnosis"])
            counts[key] = counts.get(key, 0) + 1
        diag = Table(title="diagnosis (IoU >= 0.5 and judged EA < 0.5: conservative edit)")
        for col in ("region", "diagnosis", "samples"):
            diag.add_column(col)
        for (region, verdict), n in sorted(counts.items()):
            diag.add_row(region, verdict, str(n))
        console.print(diag)
    else:
        console.print("no judged editing accuracy (ea) in the run: no diagnosis table")
    console.print(f"summary -> {summary}", markup=False)


@analyze_app.command("features")
def features(
    dataset: DatasetOption,
    predictions: PredictionsOption,
    feature: Annotated[
        list[str],
        typer.Option(
            "--features",
            help="extractor NAME:PATH (repeatable): inception:PT_FILE (FID, KID), "
            "rad-dino:DIR / dinov2:DIR / hf:DIR / clip:DIR (embedding similarity), "
            "lpips-alex:DIR / lpips-vgg:DIR (LPIPS), module:callable",
        ),
    ],
    model: Annotated[list[str] | None, typer.Option(help="only these models")] = None,
    by: Annotated[str, typer.Option(help="group by this sample field")] = "region",
    resamples: Annotated[int, typer.Option(min=0, help="bootstrap resamples (0: none)")] = 1000,
    fid_ci: Annotated[
        bool, typer.Option(help="also bootstrap FID, --resamples times (one FID each: slow)")
    ] = False,
    fid_ci_resamples: Annotated[
        int | None, typer.Option(min=0, hidden=True, help="deprecated: --fid-ci --resamples N")
    ] = None,
    csv_out: CsvOption = None,
    json_out: JsonOption = None,
    protocol: Annotated[
        str | None,
        typer.Option(
            help="also score by this protocol (medebench@paper, medgen@code, ...) and print its "
            "summary with the feature columns filled"
        ),
    ] = None,
) -> None:
    """FID and KID (set-level, per group) and LPIPS and embedding similarity (per pair) of
    model outputs against the ground truths, each extractor recorded; with --protocol, in that
    protocol's score summary."""
    from medibench.analysis.feature_scores import (
        feature_roles,
        feature_summary,
        skipped_outputs,
    )
    from medibench.analysis.features import ExtractorWeightsError
    from medibench.datasets import load_dataset

    try:
        roles = feature_roles(feature)
        ds = load_dataset(dataset)
        index = ds.find_predictions(predictions, models=model)
    except (KeyError, ValueError, FileNotFoundError, ImportError) as exc:
        fail(str(exc))
    check_not_empty(ds, dataset)
    if not index.models:
        fail(f"no model outputs found in {predictions}")
    first = {
        m: {sid: ks[min(ks)] for sid, ks in files.items() if ks} for m, files in index.files.items()
    }
    try:
        rows = feature_summary(
            list(ds),
            first,
            roles,
            by=by,
            ci_resamples=resamples,
            fid_ci_resamples=_fid_resamples(fid_ci, resamples, fid_ci_resamples),
        )
    except (ExtractorWeightsError, ImportError) as exc:
        fail(str(exc))
    for note in skipped_outputs(rows):
        err.print(labelled("note", note, "yellow"))
    cols = [c for c in ("fid", "kid", "lpips", "embedding_similarity") if any(c in r for r in rows)]
    for m in index.models:
        table = Table(title=f"feature metrics: {m} (first output per sample)")
        for col in ("group", "n", *cols):
            table.add_column(col)
        for r in (r for r in rows if r["model"] == m):
            cells = []
            for c in cols:
                v = r.get(c)
                ci = (r.get(f"{c}_ci_low"), r.get(f"{c}_ci_high"))
                text = "-" if v is None else f"{v:.4g}"
                if c == "kid" and v is not None:
                    text += f" ± {r['kid_std']:.2g}"
                if v is not None and ci[0] is not None:
                    text += f" [{ci[0]:.4g}, {ci[1]:.4g}]"
                cells.append(text)
            table.add_row(str(r["group"]), str(r["n"]), *cells)
        console.print(table)
        shown = next((r for r in rows if r["model"] == m and r["group"] == "all"), None)
        if shown:
            console.print(f"extractors: {shown['extractors']}", markup=False)
            if shown.get("set_notes"):
                console.print(f"notes: {shown['set_notes']}", markup=False)
    if protocol is not None:
        rows = _protocol_summary(ds, index, protocol, feature, rows, by)
    write_summary(rows, csv_out, json_out)


def _fid_resamples(fid_ci: bool, resamples: int, deprecated: int | None) -> int:
    """FID's bootstrap resamples: --resamples with --fid-ci, else 0; the old
    --fid-ci-resamples N still gives N (with a note)."""
    if deprecated is None:
        return resamples if fid_ci else 0
    note = "--fid-ci-resamples N is deprecated: use --fid-ci --resamples N"
    err.print(labelled("note", note, "yellow"))
    return deprecated


def _protocol_summary(ds, index, spec: str, specs: list[str], rows: list[dict], by: str):
    """Score by the protocol (with the extractors when it takes them), print its summary with
    the set-level FID/KID merged in; return its rows."""
    import dataclasses

    from medibench.analysis.feature_scores import merge_set_rows
    from medibench.protocols import load_protocol
    from medibench.report import summarize, summary_tables
    from medibench.runs import score_predictions

    try:
        proto = load_protocol(spec)
    except (KeyError, ValueError) as exc:
        fail(str(exc))
    if dataclasses.is_dataclass(proto) and any(
        f.name == "features" for f in dataclasses.fields(proto)
    ):
        proto = dataclasses.replace(proto, features=tuple(specs))
    records = score_predictions(ds, index, [proto], k=ds.expected_k, progress=False)
    agg = dataclasses.replace(proto.aggregation, group_by=(by,))
    metrics = list(proto.metric_names)
    metrics += [m for m in ("fid", "kid") if m not in metrics and any(m in r for r in rows)]
    summary_rows = summarize(
        records,
        {s.sample_id: s for s in ds},
        agg,
        metrics=metrics,
        applicable=getattr(proto, "applicable_metrics", None),
    )
    merge_set_rows(summary_rows, rows, by)
    label = f"{proto.name}@{proto.version}"
    for table in summary_tables(
        summary_rows,
        label=label,
        aggregation=agg,
        metrics=metrics,
        judged=getattr(proto, "judged_metrics", ()),
    ):
        console.print(table)
    notes = sorted({n for r in records for n in r.notes if " by " in n and "sha256" in n})
    for n in notes:
        console.print(f"{label}: {n}", markup=False)
    return [{"protocol": proto.name, "protocol_version": proto.version, **r} for r in summary_rows]


@analyze_app.command("correlate")
def correlate(
    sources: Annotated[
        list[str],
        typer.Argument(
            metavar="SOURCE...",
            help="[LABEL=]PATH[:METRIC]: a run folder, RUN#JUDGE_MODEL, a score JSONL file, a "
            "ratings CSV (sample_id, model, ...), a model-level CSV (model, metric, value or "
            "model, score) or a score summary CSV (score --csv: each model's overall row)",
        ),
    ],
    metric: Annotated[
        str | None, typer.Option(help="the metric of a source that names none")
    ] = None,
    human: Annotated[
        Path | None,
        typer.Option(help="a CSV of model, rank (1 = best) or model, score: the human column"),
    ] = None,
    protocol: Annotated[
        str | None,
        typer.Option(
            help="take a run's or a summary CSV's values from this protocol (name[@version])"
        ),
    ] = None,
    method: Annotated[
        list[str] | None,
        typer.Option(help="spearman, kendall or pearson (repeatable; default: all three)"),
    ] = None,
    pvalue: Annotated[
        str,
        typer.Option(
            help="auto (scipy's default test), exact (every pairing; n <= 9, Kendall without "
            "ties any n) or permutation (seeded)"
        ),
    ] = "auto",
    permutations: Annotated[
        int, typer.Option(min=1, help="random pairings of a permutation p-value")
    ] = 9999,
    model: Annotated[
        list[str] | None, typer.Option(help="only these models (repeatable; default: all)")
    ] = None,
    resamples: Annotated[int, typer.Option(min=1, help="bootstrap resamples")] = 1000,
    seed: Annotated[int, typer.Option(help="bootstrap and permutation seed")] = 42,
    level: Annotated[float, typer.Option(help="confidence level")] = 0.95,
    csv_out: CsvOption = None,
    json_out: JsonOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="a folder for the figure of each pair (PNG, SVG: the per-model values, the "
            "least-squares line and its confidence band, R^2, p and the correlations) and "
            "correlate.md (the tables and figures)",
        ),
    ] = None,
) -> None:
    """Statistics across models: per-model means of two or more sources side by side, Spearman,
    Kendall and Pearson with p-values and bootstrap CIs (resampling models, and samples within
    models), and the linear fit of each pair's second source on its first."""
    from medibench.judges.correlate import correlate as run_correlate
    from medibench.judges.correlate import human_source, load_source
    from medibench.runs import RunStoreError

    methods = tuple(method or ("spearman", "kendall", "pearson"))
    try:
        loaded = [load_source(s, metric=metric, protocol=protocol) for s in sources]
        if human is not None:
            loaded.append(human_source(human))
        result = run_correlate(
            loaded,
            methods=methods,
            pvalue=pvalue,  # type: ignore[arg-type]
            n_permutations=permutations,
            n_resamples=resamples,
            seed=seed,
            level=level,
            models=model,
        )
    except (RunStoreError, ValueError, OSError) as exc:
        fail(str(exc))
    _print_correlate(result, level)
    if csv_out is not None:
        from medibench.report import write_rows_csv

        write_rows_csv(result.statistic_rows(), csv_out)
        console.print(f"statistics -> {csv_out}", markup=False)
    if json_out is not None:
        import json

        from medibench.io import atomic_write_text

        atomic_write_text(json_out, json.dumps(_correlate_json(result), indent=1) + "\n")
        console.print(f"statistics -> {json_out}", markup=False)
    if out is not None:
        from medibench.judges._correlate_out import write_correlate_folder

        for path in write_correlate_folder(result, out):
            label = "figure" if path.suffix == ".png" else "tables"
            console.print(f"{label} -> {path}", markup=False)


def _print_correlate(result, level: float) -> None:
    from medibench.judges._correlate_out import correlation_cells, fit_cells, value_cells

    s = result.settings
    tables = [
        (Table(title="values per model (n: samples behind each mean)"), value_cells(result)),
        (
            Table(
                title=f"correlations across {len(result.models)} models",
                caption=f"{level:.0%} percentile bootstrap CIs over {s['n_resamples']} "
                f"resamples (seed {s['seed']}): models resampled, and samples resampled "
                "within each model; p: two-sided",
            ),
            correlation_cells(result),
        ),
        (Table(title="linear fit: second source = intercept + slope x first"), fit_cells(result)),
    ]
    for table, (columns, rows) in tables:
        for col in columns:
            table.add_column(col, justify="left" if col in ("model", "pair", "p by") else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)


def _correlate_json(result) -> dict:
    """Every number of ``analyze correlate``: sources, per-model values, statistics, fits."""
    return {
        "settings": result.settings,
        "sources": [
            {
                "label": s.label,
                "path": s.path,
                "metric": s.metric,
                "per_sample": s.samples is not None,
            }
            for s in result.sources
        ],
        "models": result.model_rows(),
        "statistics": result.statistic_rows(),
    }
