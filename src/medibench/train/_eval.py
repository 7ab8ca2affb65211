"""Evaluation at checkpoints: the checkpoint as a model spec, run through ``medibench run``
(:func:`medibench.runs.run`, the eval dataset's default protocols) into ``DIR/eval/step-N/``,
and the base model the same way into ``DIR/eval/step-0/`` (the curve's first point).
No evaluation loop of its own: generation, scoring, resuming and the store are the runs'."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from medibench.train._config import TrainConfig, TrainError

__all__ = ["BASE_STEP", "checkpoint_model_spec", "evaluate_base", "evaluate_checkpoint"]

#: The step of the base model's evaluation (``DIR/eval/step-0/``): the curve's starting point.
BASE_STEP = 0


def checkpoint_model_spec(config: TrainConfig, checkpoint: Path) -> tuple[str, tuple[str, ...]]:
    """``(model spec, model options)`` that load ``checkpoint``: ``ip2p:CHECKPOINT`` for a full
    fine-tune, the base with ``lora=CHECKPOINT`` for a LoRA."""
    if config.method == "full":
        return f"{config.family}:{checkpoint}", ()
    return config.model, (f"lora={checkpoint}",)


def evaluate_checkpoint(
    config: TrainConfig,
    checkpoint: Path,
    folder: Path,
    model_options: tuple[str, ...] = (),
    console: Any = None,
) -> Path:
    """Run ``checkpoint`` on ``config.eval_dataset`` (its first ``eval_limit`` samples) into
    ``folder``; ``model_options`` (``key=value``) go to the model (``steps=20``)."""
    spec, options = checkpoint_model_spec(config, checkpoint)
    return _evaluate(config, spec, options + tuple(model_options), folder, str(checkpoint), console)


def evaluate_base(
    config: TrainConfig, folder: Path, model_options: tuple[str, ...] = (), console: Any = None
) -> Path:
    """Run the base model (``config.model``, no LoRA: the weights at step 0) as
    :func:`evaluate_checkpoint` runs a checkpoint, into ``folder``."""
    return _evaluate(config, config.model, tuple(model_options), folder, config.model, console)


def _evaluate(
    config: TrainConfig,
    spec: str,
    options: tuple[str, ...],
    folder: Path,
    what: str,
    console: Any,
) -> Path:
    from medibench.runs import RunConfig, RunError, plan_run, run

    run_config = RunConfig(
        dataset=str(config.eval_dataset),
        models=(spec,),
        out=folder,
        seed=config.seed,
        model_options=options,
    )
    try:
        plan = plan_run(run_config)
        if config.eval_limit is not None:
            plan = dataclasses.replace(plan, samples=plan.samples[: config.eval_limit])
        with run(plan, progress=False, console=console):
            pass
    except RunError as exc:
        raise TrainError(f"evaluating {what}: {exc}") from None
    return folder
