"""``medibench build``: MieDB-style triplets from a segmentation dataset (:mod:`medibench.build`).

``medibench build perception|transformation|modification --source SOURCE.yaml --out DIR``
builds a native dataset in DIR (re-running resumes), with its attempt log, quality report and
exports; ``medibench build report DIR`` rewrites the quality report; ``medibench build
demo-sources --out DIR`` writes SOURCE.yaml files for data that installed packages ship.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from medibench._console import labelled
from medibench.cli._app import console, err, fail
from medibench.cli._options import RayAddressOption

build_app = typer.Typer(no_args_is_help=True, add_completion=False)
#: VLM rejections printed after a build (the report lists them all).
_SHOWN = 5

Source = Annotated[Path, typer.Option(help="the source description, SOURCE.yaml (docs/build.md)")]
Out = Annotated[Path, typer.Option(help="build folder (created; re-running resumes)")]
Seed = Annotated[int, typer.Option(help="build seed (every draw derives from it)")]
Executor = Annotated[str, typer.Option(help="local, or ray (Ray tasks over source items)")]
Export = Annotated[
    list[str] | None,
    typer.Option(help="export format (repeatable): native, miedb, hf-parquet, omnigen2 "
                 "(default: miedb and omnigen2)"),
]  # fmt: skip


def _perspective_command(perspective: str, help: str) -> None:
    """Register ``medibench build PERSPECTIVE`` for a perspective with no options of its own."""

    def command(
        source: Source, out: Out, seed: Seed = 0, executor: Executor = "local",
        ray_address: RayAddressOption = None, export: Export = None,
    ) -> None:  # fmt: skip
        _build(perspective, source, out, seed, executor, ray_address, export)

    build_app.command(perspective, help=help)(command)


_perspective_command(
    "perception",
    "Overlay triplets: each structure blended in red, green or blue (alpha 0.6), mask beside.",
)
_perspective_command(
    "transformation",
    "Degradation pairs: the suite's operators on each slice, the clean slice the target.",
)


@build_app.command()
def modification(
    source: Source,
    out: Out,
    seed: Seed = 0,
    inpainter: Annotated[
        str, typer.Option(help="classical[:telea|ns|biharmonic], diffusers-inpaint:PATH or "
                          "module:callable")
    ] = "classical",
    lora: Annotated[
        Path | None, typer.Option(help="LoRA weights for a diffusers-inpaint inpainter")
    ] = None,
    inpainter_option: Annotated[
        list[str] | None, typer.Option(help="diffusers inpainter option key=value (repeatable)")
    ] = None,
    verifier: Annotated[
        str, typer.Option(help="statistics (default) or module:callable")
    ] = "statistics",
    max_attempts: Annotated[int, typer.Option(min=1, help="attempts per lesion")] = 3,
    executor: Executor = "local",
    ray_address: RayAddressOption = None,
    export: Export = None,
) -> None:  # fmt: skip
    """Counterfactuals: each lesion inpainted away (remove) and back (add), verified, logged."""
    options: dict[str, Any] = dict(_key_value(o) for o in inpainter_option or [])
    if lora is not None:
        options["lora"] = str(lora.resolve())
    _build("modification", source, out, seed, executor, ray_address, export,
           inpainter=inpainter, inpainter_options=options, verifier=verifier,
           options={"max_attempts": max_attempts})  # fmt: skip


@build_app.command("report")
def report(folder: Annotated[Path, typer.Argument(help="a build folder")]) -> None:
    """Rewrite the quality report of a build (Markdown, JSON, plots) and print its summary."""
    from medibench.build import write_report
    from medibench.datasets import DatasetError

    try:
        out = write_report(folder)
    except (DatasetError, ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    _summary(out)


@build_app.command("demo-sources")
def demo_sources(out: Out) -> None:
    """Write SOURCE.yaml files for data installed packages ship (nilearn MNI152, pydicom-data)."""
    from medibench.build.demo import write_demo_sources

    try:
        paths = write_demo_sources(out)
    except (ImportError, FileNotFoundError) as exc:
        fail(f"{exc} (install the demo data: pip install 'medibench[demo-data]')")
    for name, path in paths.items():
        console.print(f"{name}: {path}")


def _build(
    perspective: str, source: Path, out: Path, seed: int, executor: str,
    ray_address: str | None, export: list[str] | None, **kwargs: Any,
) -> None:  # fmt: skip
    from medibench.build import BuildError, build
    from medibench.runs._cli import run_folder_errors

    t0 = time.perf_counter()
    try:
        with run_folder_errors(out):  # in use: exit 3; a full disk: the run's message, exit 1
            result = build(
                perspective, source, out, seed=seed, executor=executor, ray_address=ray_address,
                exports=tuple(export) if export else ("miedb", "omnigen2"), **kwargs,
            )  # fmt: skip
    except (BuildError, ValueError, ImportError) as exc:
        fail(str(exc))
    elapsed = time.perf_counter() - t0
    if result.skipped:
        console.print(f"resumed: {len(result.skipped)} finished item(s) skipped")
    if result.failures:
        for error in result.failures.values():
            err.print(labelled("error", error))
        err.print(
            f"{len(result.failures)} item(s) failed, {len(result.built)} built; fix them and "
            "re-run the same command (finished items are kept)"
        )
        raise typer.Exit(code=1)
    filters = ", ".join(f"{k} {v}" for k, v in sorted(result.filters.items()) if v) or "none"
    console.print(
        f"{result.samples} {perspective} samples in {out} ({elapsed:.1f} s); filtered: {filters}"
    )
    for fmt, path in result.exports.items():
        console.print(f"export {fmt}: {path}")
    for kind, counts in sorted(result.calls.items()):
        console.print(
            f"{kind} calls: {counts.get('made', 0)} made, {counts.get('cached', 0)} answered "
            "from the cache"
        )
    _summary(out / "report")


def _summary(report_dir: Path) -> None:
    import json

    numbers = json.loads((report_dir / "quality.json").read_text(encoding="utf-8"))
    dice = numbers["overlay_dice"]
    for kind in ("grayscale", "rgb"):
        if dice[f"{kind}_mean"] is not None:
            console.print(
                f"overlay-to-mask Dice ({kind}): {dice[f'{kind}_mean']:.4f} over "
                f"{dice[f'n_{kind}']} samples"
            )
    for modality, a in numbers["acceptance"].items():
        rate = a["acceptance_rate"]
        console.print(
            f"acceptance ({modality}): {a['lesions_accepted']}/{a['lesions']} lesions"
            + ("" if rate is None else f" ({rate:.0%})")
            + f", {a['attempts']} attempts, {a['retries']} retries"
        )
    vlm = numbers.get("vlm_verifier")
    if vlm:
        console.print(
            f"VLM verifier ({', '.join(vlm['models'])}): {vlm['asked']} fills asked, "
            f"{vlm['accepted']} accepted, {vlm['rejected']} rejected"
        )
        for r in vlm["rejections"][:_SHOWN]:
            console.print(
                f"  rejected {r['slice']} {r['lesion']} attempt {r['attempt']}: {r['reason']}",
                markup=False,
                highlight=False,
            )  # the VLM's words
        if len(vlm["rejections"]) > _SHOWN:
            console.print(f"  ... {len(vlm['rejections']) - _SHOWN} more in the report")
    if numbers.get("rephrased"):
        console.print(f"rephrased: the instructions of {numbers['rephrased']} samples")
    if numbers["leaking_patients"]:
        err.print(labelled("leakage", numbers["leaking_patients"]))
    console.print(f"report: {report_dir / 'quality.md'}")


def _key_value(text: str) -> tuple[str, Any]:
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        fail(f"--inpainter-option must be key=value, got {text!r}")
    return key.strip(), yaml.safe_load(value)
