"""The ``medibench train`` command: :func:`medibench.train.train` from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medibench._command import settings_from
from medibench.cli._app import console, fail
from medibench.cli._options import DatasetOptionsOption, dataset_options

__all__ = ["train"]


def train(
    dataset: Annotated[str, typer.Option(help="dataset spec with input, target, instruction")],
    model: Annotated[
        str,
        typer.Option(
            help="FAMILY:PATH: ip2p, flux-kontext, qwen-image-edit or diffusers-inpaint, "
            "and the base weights"
        ),
    ],
    method: Annotated[str, typer.Option(help="full or lora")],
    out: Annotated[Path, typer.Option(help="training folder (a re-run resumes it)")],
    max_steps: Annotated[int, typer.Option(help="optimizer steps")] = 1000,
    batch_size: Annotated[int, typer.Option(help="samples per micro-batch and process")] = 1,
    grad_accum: Annotated[int, typer.Option(help="micro-batches per optimizer step")] = 1,
    lr: Annotated[
        float, typer.Option(help="AdamW learning rate (the schedule's peak, after warm-up)")
    ] = 1e-4,
    lr_scheduler: Annotated[
        str,
        typer.Option(
            help="diffusers' get_scheduler schedule: constant, constant_with_warmup, linear, "
            "cosine, cosine_with_restarts or polynomial"
        ),
    ] = "constant",
    lr_warmup_steps: Annotated[
        int, typer.Option(help="steps of linear warm-up (a schedule with warm-up)")
    ] = 0,
    random_flip: Annotated[
        bool, typer.Option(help="flip input and target together, left to right, half the time")
    ] = False,
    ema: Annotated[
        bool,
        typer.Option(help="keep an EMA of the weights (diffusers' EMAModel); checkpoints hold it"),
    ] = False,
    resolution: Annotated[int | None, typer.Option(help="one resolution bin, pixels")] = None,
    bins: Annotated[
        str | None, typer.Option(help="resolution bins, e.g. 128,256,512 (the default)")
    ] = None,
    mix: Annotated[
        str | None,
        typer.Option(
            help="sampling weight per perspective or task, e.g. perception=1,modification=0"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of data order, noise and dropout")] = 0,
    rank: Annotated[int, typer.Option(help="LoRA rank (alpha = rank)")] = 16,
    checkpoint_every: Annotated[int, typer.Option(help="steps between checkpoints")] = 500,
    eval_dataset: Annotated[
        str | None, typer.Option(help="held-out dataset to run each evaluated checkpoint on")
    ] = None,
    eval_every: Annotated[int | None, typer.Option(help="evaluate every N steps")] = None,
    eval_limit: Annotated[int | None, typer.Option(help="evaluate on the first M samples")] = None,
    eval_model_option: Annotated[
        list[str] | None,
        typer.Option(
            help="model option key=value for the evaluation runs (repeatable), e.g. steps=20"
        ),
    ] = None,
    mixed_precision: Annotated[str, typer.Option(help="no, bf16 or fp16")] = "no",
    conditioning_dropout: Annotated[
        float,
        typer.Option(
            help="probability of dropping text, image and both (classifier-free guidance)"
        ),
    ] = 0.05,
    snr_gamma: Annotated[float | None, typer.Option(help="Min-SNR loss weighting gamma")] = None,
    gradient_checkpointing: Annotated[bool, typer.Option(help="recompute activations")] = False,
    use_8bit_adam: Annotated[bool, typer.Option(help="bitsandbytes AdamW8bit")] = False,
    dataset_option: DatasetOptionsOption = None,
    overwrite: Annotated[
        bool, typer.Option(help="start afresh: remove the checkpoints, log and record in --out")
    ] = False,
) -> None:
    """Fine-tune an editing model (or an inpainting expert) on a dataset's triplets."""
    given = dict(locals())
    from medibench.runs._cli import run_folder_errors
    from medibench.train import TrainConfig, TrainError, parse_bins, parse_mix
    from medibench.train import train as run_training

    try:
        if resolution is not None and bins is not None:
            raise TrainError("give --resolution or --bins, not both")
        chosen = (resolution,) if resolution is not None else parse_bins(bins or "128,256,512")
        config = settings_from(
            TrainConfig,
            given,
            bins=chosen,
            mix=parse_mix(mix),
            dataset_options=dataset_options(dataset_option),
        )
        with run_folder_errors(out):
            result = run_training(
                config, eval_model_options=tuple(eval_model_option or ()), overwrite=overwrite
            )
    except (TrainError, ImportError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    if not result.main_process:
        return
    first = "trained" if result.start_step == 0 else f"resumed at step {result.start_step}, trained"
    console.print(f"{first} to step {result.final_step}: {result.checkpoint}")
    for folder in result.evaluations:
        console.print(f"evaluation -> {folder}")
