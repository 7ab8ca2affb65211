"""``medibench calibration score|analyze|fit|apply|diagram``: calibration of saved predictions.

Thin commands over :mod:`medibench.calibration`; mounted on the main app as ``calibration``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from medibench.cli._app import console, fail
from medibench.cli._options import CsvOption

__all__ = ["calibration_app"]

calibration_app = typer.Typer(
    help="Calibration of classifiers and VLMs from saved predictions (MVC-Bench style).",
    no_args_is_help=True,
    add_completion=False,
)

Pred = Annotated[Path, typer.Argument(help="predictions: .npz, .csv or .parquet")]
Kind = Annotated[str, typer.Option(help="scores to read: auto (both if present), probs or logits")]


def _json_option(what: str) -> Any:
    """``--json FILE``: ``what`` a command computed, as JSON."""
    return typer.Option("--json", help=f"write {what} as JSON")


@calibration_app.command()
def score(
    pred: Pred,
    bins: Annotated[
        int | None, typer.Option(help="bins of every binned metric (default: the protocol's; 15)")
    ] = None,
    protocol: Annotated[
        str,
        typer.Option(
            help="calibration@1, mvcbench-dassl@paper, mvcbench-vl@paper or mvcbench@paper "
            "(= mvcbench-dassl@paper)"
        ),
    ] = ("calibration@1"),
    by: Annotated[
        list[str] | None, typer.Option(help="group column (repeatable): results per group")
    ] = None,
    json_out: Annotated[Path | None, _json_option("the results")] = None,
    csv_out: CsvOption = None,
    resamples: Annotated[
        int | None,
        typer.Option(min=0, help="bootstrap resamples (default: the protocol's; 0: none)"),
    ] = None,
    run: Annotated[
        Path | None,
        typer.Option("--out", help="run folder to store the results in (its run.sqlite)"),
    ] = None,
    kind: Kind = "auto",
    prob_tolerance: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="tolerance on probability row sums (default 1e-4); e.g. 1e-3 for half-precision "
            "probabilities (CoOp's fp16): the paper protocols divide each row by its sum (never "
            "a second softmax), noted",
        ),
    ] = None,
) -> None:
    """Accuracy, ECE, MCE, ACE, class-wise ECE, Brier, NLL and smooth ECE of PRED."""
    from medibench.calibration import load_predictions
    from medibench.calibration import score as score_predictions

    _writable_outputs(json_out, csv_out, run)
    try:
        tolerance = {} if prob_tolerance is None else {"atol": prob_tolerance}
        predictions = load_predictions(pred, kind=kind, **tolerance)  # type: ignore[arg-type]
        result = score_predictions(
            predictions,
            protocol,
            by=by or (),
            n_bins=bins,
            n_resamples=resamples,
            prob_tolerance=prob_tolerance,
        )
    except (ValueError, KeyError, FileNotFoundError, ImportError) as exc:
        fail(str(exc))
    _print_scores(result)
    if json_out is not None:
        from medibench.io import atomic_write_text

        atomic_write_text(json_out, json.dumps(result, indent=2) + "\n")
        console.print(f"results -> {json_out}")
    if csv_out is not None:
        from medibench.report import write_rows_csv

        write_rows_csv(_score_rows(result), csv_out)
        console.print(f"summary -> {csv_out}", markup=False)
    if run is not None:
        from medibench.calibration._report import diagram_folder
        from medibench.calibration.diagrams import write_diagrams
        from medibench.calibration.store import store_results
        from medibench.runs._cli import run_folder_session

        with run_folder_session(run, create=True):  # one writer; a killed one's temps go
            n = store_results(run, result)
            folder = diagram_folder(run, result["source"])
            drawn = write_diagrams(predictions, folder, n_bins=bins or 15, by=by or (),
                                   formats=["svg"])  # fmt: skip
        console.print(
            f"{n} rows -> {run / 'run.sqlite'} (table calibration_results); {len(drawn)} "
            f"reliability diagrams -> {folder} (shown by `medibench report {run}`)"
        )


@calibration_app.command()
def analyze(
    pred: Annotated[
        list[Path], typer.Argument(help="predictions (.npz, .csv or .parquet), one or more")
    ],
    by: Annotated[
        list[str] | None,
        typer.Option(help="group column (repeatable: method, backbone, domain, ...)"),
    ] = None,
    bins: Annotated[
        int | None, typer.Option(help="ECE bins (default: the protocol's, as `score`)")
    ] = None,
    margin_bins: Annotated[
        int, typer.Option(min=1, help="histogram bins and equal-mass margin bins")
    ] = 10,
    protocol: Annotated[str, typer.Option(help="calibration protocol of the ECE")] = (
        "calibration@1"
    ),
    json_out: Annotated[Path | None, _json_option("the whole analysis")] = None,
    csv_out: CsvOption = None,
    run: Annotated[
        Path | None,
        typer.Option("--out", help="run folder to keep the analysis and its figure in"),
    ] = None,
    kind: Kind = "auto",
) -> None:
    """Why miscalibrated: each group's top-two logit margins (distribution, correct against
    incorrect, confidence and accuracy per margin bin), its ECE, and Spearman's rho of mean
    margin against ECE across groups (MVC-Bench style)."""
    from medibench.calibration import load_predictions
    from medibench.calibration.margins import margin_analysis

    _writable_outputs(json_out, csv_out, run)
    try:
        files = [load_predictions(p, kind=kind) for p in pred]  # type: ignore[arg-type]
        result = margin_analysis(
            files, by=by or (), protocol=protocol, n_bins=bins, margin_bins=margin_bins
        )
    except (ValueError, KeyError, FileNotFoundError) as exc:
        fail(str(exc))
    rows = _margin_rows(result)
    table = Table(title=f"top-two margins ({result['settings']['protocol']})")
    for name in ("group", "n", "margin of", "accuracy", "ECE", "mean", "median", "correct",
                 "incorrect"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("group", "margin of") else "right")
    for r in rows:
        table.add_row(r["group"], str(r["n"]), r["margin_source"], *(_num(r[k]) for k in _SHOWN))
    console.print(table)
    for key, rel in result["relation"].items():
        text = (f"rho = {rel['rho']:.3f}, p = {rel['pvalue']:.3g}" if rel["rho"] is not None
                else f"not defined ({rel['why']})")  # fmt: skip
        console.print(f"Spearman, mean margin vs {key} over {rel['n']} groups: {text}")
    if json_out is not None:
        from medibench.report import write_json

        write_json(result, json_out)
        console.print(f"results -> {json_out}", markup=False)
    if csv_out is not None:
        from medibench.report import write_rows_csv

        write_rows_csv(rows, csv_out)
        console.print(f"summary -> {csv_out}", markup=False)
    if run is not None:
        from medibench.calibration._report import margin_figure_path
        from medibench.calibration.margins import margin_figure
        from medibench.calibration.store import store_margin_analysis
        from medibench.runs._cli import run_folder_session

        with run_folder_session(run, create=True):
            key = store_margin_analysis(run, result)
            figure = margin_figure(result, margin_figure_path(run, key))
        console.print(
            f"analysis {key} -> {run / 'run.sqlite'} (table calibration_margins); figure -> "
            f"{figure} (shown by `medibench report {run}`)"
        )


_SHOWN = ("accuracy", "ece", "margin_mean", "margin_median", "margin_correct", "margin_incorrect")


def _margin_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per group: its keys, ``n``, accuracy, confidence, ECE and its margin summary
    (``margin_<stat>``, ``margin_q<quantile>``)."""
    rows = []
    for g in result["groups"]:
        m = g["margin"]
        row = {"group": g["group"], "source": g["source"], **g["by"], "n": g["n"]}
        row.update(margin_source=g["margin_source"], accuracy=g["accuracy"],
                   confidence=g["confidence"], ece=g["ece"])  # fmt: skip
        row.update({f"margin_{k}": m[k] for k in ("mean", "std", "min", "median", "max")})
        row.update({f"margin_q{q}": v for q, v in m["quantiles"].items()})
        row.update(margin_correct=g["margin_correct"], margin_incorrect=g["margin_incorrect"])
        rows.append(row)
    return rows


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


@calibration_app.command()
def fit(
    val: Annotated[
        Path | None,
        typer.Option(help="validation predictions (rows with split=val if a split column)"),
    ] = None,
    method: Annotated[
        str, typer.Option(help="temperature, vector, matrix, histogram or isotonic")
    ] = "temperature",
    out: Annotated[Path | None, typer.Option(help="where to write the parameters (JSON)")] = None,
    seed: Annotated[int, typer.Option(help="seed of vector/matrix scaling's initialisation")] = 0,
    bins: Annotated[int, typer.Option(min=1, help="bins of histogram binning")] = 15,
    kind: Kind = "auto",
) -> None:
    """Fit a post-hoc calibrator on a validation split and save its parameters."""
    from medibench.calibration import load_predictions
    from medibench.calibration.calibrators import fit_calibrator, save_calibrator

    if val is None:
        fail("no validation split: pass --val PRED (calibrators are fitted on validation data)")
    if out is None:
        fail("pass --out PARAMS.json: where to write the fitted parameters")
    _writable_file(out, "--out")
    try:
        cal = fit_calibrator(
            load_predictions(val, kind=kind),  # type: ignore[arg-type]
            method,  # type: ignore[arg-type]
            seed=seed,
            n_bins=bins,
        )
    except (ValueError, FileNotFoundError, ImportError) as exc:
        fail(str(exc))
    save_calibrator(cal, out)
    console.print(
        f"{cal.method} fitted on {cal.n_val} samples: NLL {cal.nll_before:.4f} -> "
        f"{cal.nll_after:.4f}; parameters -> {out}"
    )


@calibration_app.command()
def apply(
    params: Annotated[Path, typer.Argument(help="parameters written by 'calibration fit'")],
    pred: Pred,
    out: Annotated[Path, typer.Option(help="calibrated predictions (.npz, .csv or .parquet)")],
    kind: Kind = "auto",
) -> None:
    """Apply a fitted calibrator to PRED, write the calibrated predictions and print the
    calibration@1 values before and after."""
    from medibench.calibration import load_predictions, save_predictions
    from medibench.calibration.calibrators import apply_calibrator, load_calibrator

    _writable_file(out, "--out")
    try:
        cal = load_calibrator(params)
        original = load_predictions(pred, kind=kind)  # type: ignore[arg-type]
        calibrated = apply_calibrator(cal, original)
        save_predictions(calibrated, out)
        _print_before_after(original, calibrated)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        fail(str(exc))
    console.print(f"{calibrated.n} calibrated predictions ({cal.method}) -> {out}")


@calibration_app.command()
def diagram(
    pred: Pred,
    out: Annotated[Path, typer.Option(help="output folder")],
    bins: Annotated[int, typer.Option(min=1, help="bins")] = 15,
    by: Annotated[list[str] | None, typer.Option(help="group column (repeatable)")] = None,
    fmt: Annotated[
        list[str] | None, typer.Option("--format", help="png and/or svg (default both)")
    ] = None,
    kind: Kind = "auto",
) -> None:
    """Reliability diagrams with confidence histograms of PRED (and of each group)."""
    from medibench.calibration import load_predictions
    from medibench.calibration.diagrams import FORMATS, write_diagrams

    if out.exists() and not out.is_dir():
        fail(f"--out {out} is a file; give a folder for the diagrams")
    try:
        written = write_diagrams(
            load_predictions(pred, kind=kind),  # type: ignore[arg-type]
            out,
            n_bins=bins,
            by=by or (),
            formats=fmt or FORMATS,
        )
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    for path in written:
        console.print(f"diagram -> {path}")


def _writable_outputs(json_out: Path | None, csv_out: Path | None, run: Path | None) -> None:
    """Refuse, before any work, a --json or --csv that names a folder and an --out that names
    a file."""
    _writable_file(json_out, "--json")
    _writable_file(csv_out, "--csv")
    if run is not None and run.exists() and not run.is_dir():
        fail(f"--out {run} is a file; give a run folder")


def _writable_file(path: Path | None, option: str) -> None:
    """Refuse, before any work, an output file option that names a folder."""
    if path is not None and path.is_dir():
        fail(f"{option} {path} is a folder; give a file name (e.g. {path / 'results.json'})")


def _print_scores(result: dict[str, Any]) -> None:
    from medibench.calibration import METRIC_NAMES

    table = Table(title=f"{result['protocol']}: {result['source']}")
    table.add_column("group")
    table.add_column("n", justify="right")
    for name in METRIC_NAMES:
        table.add_column(name, justify="right")
    for r in _score_rows(result):
        table.add_row(r["group"], str(r["n"]), *(_cell(r, name) for name in METRIC_NAMES))
    console.print(table)


def _score_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The printed table as rows: ``protocol``, ``source``, ``group`` (``all``, then each
    group), ``n``, each metric and its interval (``<metric>_ci_low``, ``<metric>_ci_high``:
    ``None`` without a bootstrap)."""
    from medibench.calibration import METRIC_NAMES

    rows = []
    for group, r in [("all", result), *result.get("groups", {}).items()]:
        row: dict[str, Any] = {"protocol": result["protocol"], "source": result["source"]}
        row.update(group=group, n=r["n"])
        for name in METRIC_NAMES:
            low, high = r.get("ci", {}).get(name) or (None, None)
            row.update({name: r[name], f"{name}_ci_low": low, f"{name}_ci_high": high})
        rows.append(row)
    return rows


def _print_before_after(before, after) -> None:
    from medibench.calibration import METRIC_NAMES, score

    table = Table(title="calibration@1 before and after")
    table.add_column("")
    for name in METRIC_NAMES:
        table.add_column(name, justify="right")
    for label, p in (("before", before), ("after", after)):
        bins = min(15, p.n)
        r = score(p, "calibration@1", n_bins=bins, n_resamples=0)
        table.add_row(label, *(f"{r[name]:.4f}" for name in METRIC_NAMES))
    console.print(table)


def _cell(r: dict[str, Any], name: str) -> str:
    low, high = r[f"{name}_ci_low"], r[f"{name}_ci_high"]
    value = f"{r[name]:.4f}"
    return value if low is None else f"{value} [{low:.4f}, {high:.4f}]"


# Few-shot prompt tuning (medibench.prompt_tuning): `calibration train` and `calibration grid`.
from medibench.prompt_tuning._cli import grid_command, train_command  # noqa: E402

calibration_app.command("train")(train_command)
calibration_app.command("grid")(grid_command)
