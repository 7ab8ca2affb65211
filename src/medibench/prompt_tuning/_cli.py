"""``medibench calibration train`` and ``medibench calibration grid``: thin commands over
:mod:`medibench.prompt_tuning`, mounted on the ``calibration`` group by ``cli/calibration.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from medibench._command import settings_from
from medibench._console import console, fail

__all__ = ["grid_command", "train_command"]


def _methods_default(what: str) -> Any:
    """A training setting that, not given, is the method's own (``_defaults``)."""
    return typer.Option(help=f"{what} (default: the method's)")


def train_command(
    dataset: Annotated[str, typer.Option(help="labelled images: PATH or PATH@SPLIT")],
    backbone: Annotated[
        str,
        typer.Option(
            help="clip:PATH, siglip:PATH, hf:PATH, open_clip:PATH, open_clip:hf-hub:NAME or "
            "module:callable"
        ),
    ],
    method: Annotated[
        str,
        typer.Option(
            help="zero-shot, linear-probe, coop, cocoop, kgcoop, prograd, maple, promptsrc, "
            "hicropl (--set prompt_file=FILE)"
        ),
    ],
    out: Annotated[Path, typer.Option(help="output folder")],
    shots: Annotated[int, typer.Option(help="images per class for training")] = 16,
    seed: Annotated[
        int, typer.Option(help="seed of the shots, the initialisation, the batches")
    ] = 1,
    loss: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME[:key=value,...], repeatable: ce, mcm, focal, ls, mbls, dca, mdca, smac, "
            "mmce, logitnorm, eccv-penalty, eccv-zs, angular, otpt, tmm (weight=W)"
        ),
    ] = None,
    template: Annotated[str, typer.Option(help="hard prompt, one {} for the class")] = (
        "a photo of a {}."
    ),
    epochs: Annotated[int | None, _methods_default("epochs")] = None,
    lr: Annotated[float | None, _methods_default("learning rate")] = None,
    batch_size: Annotated[int | None, _methods_default("batch size")] = None,
    eval_: Annotated[
        list[str] | None,
        typer.Option("--eval", help="NAME=SPEC, repeatable (default: the images beside the shots)"),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="KEY=VALUE method option, repeatable")
    ] = None,
    augment: Annotated[bool, typer.Option(help="random resized crop and flip")] = True,
    device: Annotated[str, typer.Option(help="torch device: cpu, cuda, cuda:1")] = "cpu",
    teacher_templates: Annotated[
        str | None,
        typer.Option(
            help="promptsrc's frozen teacher: imagenet60 (default), template or FILE of templates"
        ),
    ] = None,
) -> None:
    """Few-shot prompt tuning of a CLIP-family backbone; writes predictions that `calibration
    score` reads."""
    given = dict(locals())
    from medibench.prompt_tuning._defaults import option_value

    try:
        from medibench.prompt_tuning._train import TrainSettings, train
    except ImportError as exc:
        fail(
            "calibration train needs torch and transformers: "
            f"pip install 'medibench[torch]' ({exc})"
        )
    try:
        settings = settings_from(
            TrainSettings,
            given,
            out=str(out),
            losses=list(loss or ["ce"]),
            evals=_pairs(eval_ or [], "--eval", str),
            options=_pairs(set_ or [], "--set", option_value),
        )
        from medibench.runs._cli import run_folder_session

        with run_folder_session(out, create=True):  # one writer; a killed one's temps go
            result = train(settings, log=console.print)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        fail(str(exc))
    for name, acc in result["accuracy"].items():
        console.print(f"{name}: accuracy {acc:.4f} -> {out / 'predictions' / (name + '.npz')}")


def grid_command(
    config: Annotated[Path, typer.Argument(help="grid YAML (docs/calibration.md)")],
    executor: Annotated[str, typer.Option(help="local or ray")] = "local",
    out: Annotated[
        Path | None,
        typer.Option(
            help="the grid's run folder: cells, tables and the report's panel (default: the "
            "YAML's out)"
        ),
    ] = None,
) -> None:
    """Methods x losses x seeds x templates x backbones: trains what is not done, then writes
    accuracy/ECE/MCE/ACE tables, spreads and Kendall tau between in-domain and shifted; `medibench
    report OUT` shows them."""
    from medibench.prompt_tuning._grid import load_grid, run_grid
    from medibench.runs._cli import run_folder_session

    try:
        grid = load_grid(config, out=out)
        with run_folder_session(grid.out, create=True):  # one grid writes a folder at a time
            summary = run_grid(grid, executor=executor, log=console.print)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        fail(str(exc))
    console.print(
        f"{summary['cells']} cells ({summary['trained']} trained, {summary['skipped']} done "
        f"before); tables -> {summary['tables']} (shown by `medibench report {grid.out}`)"
    )


def _pairs(items: list[str], option: str, convert) -> dict:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{option} {item!r}: expected KEY=VALUE")
        out[key.strip()] = convert(value.strip())
    return out
