"""``medibench judge``: judge a run folder's outputs, or a benchmark's published outputs
(``--dataset D --predictions DIR``: kept as a run folder first, so the report shows them as any
run's). The judging itself is :func:`medibench.judges._cli.judge_run_folder`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medibench.cli import _options as opt
from medibench.cli._app import fail
from medibench.runs._cli import run_folder_session

__all__ = ["judge", "JudgeConfigOption", "JudgeModelOption", "JudgedRunOption"]

JudgeConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--judge",
        metavar="JUDGE.yaml",
        help="judge config (.yaml, .json or .toml): model, base_url, prices, limits",
    ),
]
JudgeModelOption = Annotated[
    str | None, typer.Option(help="judge model id (instead of, or over, the config's)")
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        help="OpenAI-compatible endpoint, e.g. http://host:8000/v1 (default: the config's "
        "base_url, else $OPENAI_BASE_URL, else the OpenAI API)"
    ),
]
PublishedModelsOption = Annotated[
    list[str] | None,
    typer.Option(
        help="with --predictions: models to take (default: all), or the name of a one-model folder"
    ),
]
#: ``score --run``: where ``score --judge`` keeps the published outputs it judges.
JudgedRunOption = Annotated[
    Path | None,
    typer.Option(
        "--run",
        help="the run folder the outputs are kept and scored in (made, or added to), and judged "
        "with --judge (default with --judge: OUT with the suffix .run); `medibench report RUN` "
        "shows them",
    ),
]


def judge(
    run: Annotated[
        Path,
        typer.Argument(
            metavar="RUN",
            help="run folder (with run.sqlite); with --predictions, the folder to make from "
            "the published outputs (or to add to)",
        ),
    ],
    judge_config: JudgeConfigOption = None,
    judge_model: JudgeModelOption = None,
    base_url: BaseUrlOption = None,
    protocol: Annotated[
        list[str] | None,
        typer.Option(
            help="judge protocol (medebench-judge@paper-structure, miedb-rubric@1, "
            "medgen-checklist@1, ...) or a scoring protocol for its default judge; repeatable; "
            "default: the judges of the protocols the run was scored with",
        ),
    ] = None,
    only_failed: Annotated[
        bool, typer.Option(help="re-judge only stored failures (refused, unparsable, error)")
    ] = False,
    passes: Annotated[
        int,
        typer.Option(min=1, help="judge each prediction N times (seed + pass); mean and spread"),
    ] = 1,
    max_cost: Annotated[
        float | None,
        typer.Option(metavar="USD", help="stop starting calls at this cost (resumable)"),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="show the calls and estimated cost, spend nothing")
    ] = False,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="calls in flight (default: the config's)")
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            help="with --predictions: the benchmark the published outputs answer (a dataset "
            "spec, as for `medibench score`)"
        ),
    ] = None,
    predictions: Annotated[
        Path | None,
        typer.Option(
            help="published model outputs to judge (generated_images/, eval_results/, MedGEN's "
            "inference files, or one model's <sample_id>_<k>.png files): RUN is made from them, "
            "scored by the dataset's protocols, then judged"
        ),
    ] = None,
    dataset_option: opt.DatasetOptionsOption = None,
    download: opt.DownloadOption = False,
    model: PublishedModelsOption = None,
    limit: Annotated[
        int | None,
        typer.Option(min=1, help="with --predictions: only the first N samples of the dataset"),
    ] = None,
    progress: opt.ProgressOption = True,
) -> None:
    """Judge a run's outputs, or a benchmark's published outputs, with a VLM and fill the
    judged metrics (ea, vq, rubric, ...).

    The API key comes from OPENAI_API_KEY (or the variable the config names), never a file.
    """
    from medibench.judges._cli import judge_run_folder

    if (dataset is None) != (predictions is None):
        fail("published outputs need both --dataset D and --predictions DIR")
    if predictions is None and (model or dataset_option or limit):
        fail("--model, --dataset-option and --limit go with --dataset and --predictions")
    published = dataset is not None and predictions is not None
    if published and judge_config is None and judge_model is None:  # before making RUN
        fail("give a judge config (--judge JUDGE.yaml) or a judge model (--judge-model)")
    with run_folder_session(run, create=published):
        if dataset is not None and predictions is not None:
            from medibench.cli._published import published_run

            published_run(
                run,
                dataset=dataset,
                predictions=predictions,
                model=model,
                dataset_option=dataset_option,
                download=download,
                limit=limit,
                progress=progress,
            )
        judge_run_folder(
            run,
            judge_config,
            judge_model,
            base_url=base_url,
            protocol=protocol,
            only_failed=only_failed,
            passes=passes,
            max_cost=max_cost,
            dry_run=dry_run,
            concurrency=concurrency,
        )
