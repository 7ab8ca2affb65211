"""``medibench demo`` and ``medibench run``: a whole run through :func:`medibench.runs.run`
(``merge`` lives beside the shards, in :mod:`medibench.runs._cli`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from medibench._command import settings_from
from medibench.cli._app import (
    console,
    err,
    fail,
    print_dataset_notes,
    print_leaderboards,
    write_summary,
)
from medibench.cli._options import (
    CsvOption,
    DatasetOption,
    DatasetOptionsOption,
    DownloadOption,
    ExecutorOption,
    JsonOption,
    ModelOptionsOption,
    OutputsPerSampleOption,
    ProgressOption,
    ProtocolsOption,
    RayAddressOption,
    RunSeedOption,
)


def demo(
    out: Annotated[Path, typer.Option(help="run folder (the suite data goes in OUT/data)")] = Path(
        "demo_run"
    ),
    seed: Annotated[int, typer.Option(help="seed for the suite items and the models")] = 0,
    suite: Annotated[
        str, typer.Option(help="frozen suite definition to generate")
    ] = "medibench-suite@1",
    report: Annotated[bool, typer.Option(help="write the HTML report")] = True,
    progress: ProgressOption = True,
) -> None:
    """Generate the built-in suite, run identity and classical on it, score, print leaderboards,
    write the HTML report."""
    from medibench.runs import RunConfig
    from medibench.runs._cli import run_folder_session

    t0 = time.perf_counter()
    with run_folder_session(out):
        config = RunConfig(
            dataset=f"suite:{out / 'data'}",
            models=("identity", "classical"),
            out=out,
            protocols=("native@1",),
            seed=seed,
            dataset_options={"name": suite, "seed": seed},
        )
        plan = _plan(config)
        console.print(f"{suite}: {len(plan.dataset)} samples in {out / 'data'}")
        _execute(plan, progress)
        print_leaderboards(out, "native@1", csv_path=out / "results.csv")
        console.print(f"scored in {time.perf_counter() - t0:.1f} s; run store {out / 'run.sqlite'}")
        if report:
            from medibench.report import build_report

            index = build_report(out, out / "report", progress=progress, console=err)
            console.print(f"HTML report: {index}")


def run(
    dataset: DatasetOption,
    model: Annotated[
        list[str],
        typer.Option(
            help="model (repeatable): NAME, NAME:ARG (ip2p:WEIGHTS, openai-image:gpt-image-1), "
            "a YAML spec file, or module:callable"
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="run folder (created if missing, resumed if not); {shard} in it becomes i-of-n",
        ),
    ],
    download: DownloadOption = False,
    dataset_option: DatasetOptionsOption = None,
    protocol: ProtocolsOption = None,
    k: OutputsPerSampleOption = 1,
    seed: RunSeedOption = 0,
    stage: Annotated[str, typer.Option(help="generate, score or all")] = "all",
    only_failed: Annotated[
        bool, typer.Option(help="re-run only failed items (refused ones included)")
    ] = False,
    retry_refused: Annotated[
        bool,
        typer.Option(help="ask again for the edits a model refused (a plain re-run does not)"),
    ] = False,
    model_option: ModelOptionsOption = None,
    executor: ExecutorOption = "local",
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="items in flight (local: API requests or threads, default the model's own; "
            "ray: model actors, default one per GPU)",
        ),
    ] = None,
    ray_address: RayAddressOption = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="run shard i/n of the samples (default: from RANK/WORLD_SIZE or "
            "SLURM_PROCID/SLURM_NTASKS); merge shard runs with `medibench merge`"
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="run only the dataset's first N samples (with --shard, the shard's share of "
            "them); a later run without it adds the rest",
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="USD budget for the API models' paid calls in this run folder (earlier runs' "
            "spend counts; each model needs --model-option price_per_image=USD)",
        ),
    ] = None,
    csv_out: CsvOption = None,
    json_out: JsonOption = None,
    progress: ProgressOption = True,
    icl_k: Annotated[
        list[int] | None,
        typer.Option(
            "--icl-k",
            min=0,
            help="in-context demonstrations per query (repeatable: each K runs every model as "
            "its own entry MODEL@icl-K; 0 shows none)",
        ),
    ] = None,
    icl_pool: Annotated[
        str | None,
        typer.Option(help="dataset spec the demonstrations come from (default: the run's own)"),
    ] = None,
    icl_select: Annotated[
        str,
        typer.Option(
            help="how demonstrations are chosen: random, same-task, same-modality or nearest"
        ),
    ] = "random",
    icl_embedding: Annotated[
        str,
        typer.Option(
            help="image embedding of --icl-select nearest: thumbnail (no weights) or a "
            "feature extractor spec (NAME:PATH)"
        ),
    ] = "thumbnail",
    icl_fallback: Annotated[
        str,
        typer.Option(
            help="a sample with fewer eligible demonstrations than K: refuse (not made, status "
            "too-few-demonstrations), random (the rest drawn from the whole pool) or fewer "
            "(shown those there are)"
        ),
    ] = "refuse",
) -> None:
    """Run models on a dataset and score their outputs; re-running resumes.

    One process per run folder: another process on it exits 3. A model's outputs go to
    outputs/<slug>-<hash of its name>/; its resolved spec is stored, and a re-run with another
    spec under the same name is refused. Refused edits are not asked again unless
    --retry-refused or --only-failed.
    """
    given = dict(locals())
    from medibench.runs import RunConfig
    from medibench.runs._cli import run_folder_errors

    if stage not in {"generate", "score", "all"}:
        fail(f"--stage must be generate, score or all, not {stage!r}")
    if executor not in {"local", "ray"}:
        fail(f"--executor must be local or ray, not {executor!r}")
    if stage == "generate" and (csv_out or json_out):
        fail("--csv/--json write the scores' summary: --stage generate scores nothing")
    _check_icl(icl_k or [], icl_select, icl_fallback)
    config = settings_from(
        RunConfig,
        given,
        models=tuple(model),
        protocols=tuple(protocol or ()),
        model_options=tuple(model_option or ()),
        dataset_options={
            **_dataset_options(dataset_option),
            **({"download": True} if download else {}),
        },
        icl_k=tuple(icl_k or ()),
    )
    plan = _plan(config)
    print_dataset_notes(plan.dataset)
    with run_folder_errors(plan.folder):
        _execute(plan, progress)
    folder, protocols = plan.folder, plan.protocols
    del plan  # the summaries read the run store: the loaded dataset can go
    if stage == "generate":  # no scores to show: say where the outputs are and what is next
        console.print(
            f"outputs in {folder / 'outputs'}; score them with the same command and --stage score",
            markup=False,
            soft_wrap=True,  # one line, the path unbroken (the terminal wraps it)
        )
        return
    rows = [row for p in protocols for row in print_leaderboards(folder, p)]
    write_summary(rows, csv_out, json_out)


def _check_icl(ks: list[int], select: str, fallback: str) -> None:
    from medibench.runs._config import ICL_FALLBACKS, ICL_SELECTIONS

    if select not in ICL_SELECTIONS:
        fail(f"--icl-select must be one of {', '.join(ICL_SELECTIONS)}, not {select!r}")
    if fallback not in ICL_FALLBACKS:
        fail(f"--icl-fallback must be one of {', '.join(ICL_FALLBACKS)}, not {fallback!r}")
    if len(set(ks)) != len(ks):
        fail(f"--icl-k values must be distinct, got {ks}")


def _dataset_options(texts: list[str] | None) -> dict:
    from medibench.cli._options import dataset_options

    try:
        return dataset_options(texts)
    except ValueError as exc:
        fail(str(exc))


def _plan(config: Any):
    from medibench.runs import RunError, plan_run

    try:
        return plan_run(config)
    except RunError as exc:
        fail(str(exc))


def _execute(plan: Any, progress: bool) -> None:
    from medibench.runs import RunError
    from medibench.runs import run as run_benchmark

    try:
        run_benchmark(plan, progress=progress, console=err).close()
    except RunError as exc:
        fail(str(exc))
