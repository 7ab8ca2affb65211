"""``medibench dataset describe | split | filter | concat`` (:mod:`medibench.datasets`,
docs/datasets.md): count a dataset, and write native dataset folders made from datasets, each
with ``provenance.json`` and every sample's origin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from medibench.cli._app import console, fail, open_dataset
from medibench.cli._options import DatasetOptionsOption, DownloadOption

Spec = Annotated[str, typer.Argument(help="the dataset spec, e.g. native:DIR or medebench:DIR")]
Out = Annotated[Path, typer.Option(help="the native dataset folder to write")]
Overwrite = Annotated[bool, typer.Option(help="write into a folder that has files")]

dataset_app = typer.Typer(no_args_is_help=True, add_completion=False)


@dataset_app.command()
def describe(
    spec: Spec,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="also write the description as JSON")
    ] = None,
    download: DownloadOption = False,
    dataset_option: DatasetOptionsOption = None,
) -> None:
    """Count SPEC's samples by every grouping field (benchmark, split, task, region, modality,
    perspective, and the dataset a derived sample came from), its patients, input image sizes
    and masks (how many, and the fraction of each mask's pixels inside the ROI)."""
    from medibench.datasets._describe import describe_dataset
    from medibench.io import ImageReadError, atomic_write_text

    ds = open_dataset(spec, download=download, options=dataset_option)
    try:
        info = describe_dataset(ds, spec)
    except (ImageReadError, OSError) as exc:
        fail(str(exc))
    _print_description(info)
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(info, indent=2, ensure_ascii=False) + "\n")
        console.print(f"description -> {json_path}", markup=False)


@dataset_app.command()
def split(
    spec: Spec,
    out: Out,
    fractions: Annotated[
        str, typer.Option(help="NAME=FRACTION,... summing to 1, e.g. train=0.8,test=0.2")
    ] = "train=0.8,test=0.2",
    by: Annotated[
        str | None,
        typer.Option(
            help="the field whose groups stay together: patient (default when the samples "
            "record one), sample, task, region, metadata.KEY, ..."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="the seed of the groups' shuffle")] = 0,
    overwrite: Overwrite = False,
    download: DownloadOption = False,
    dataset_option: DatasetOptionsOption = None,
) -> None:
    """Split SPEC into parts of its patients (or --by groups): groups shuffled by --seed and
    dealt by --fractions, every sample of a group in one part; writes a native dataset whose
    samples' split is their part (use one with --dataset-option split=NAME)."""
    from medibench.datasets._derive import parse_fractions, split_dataset

    ds = open_dataset(spec, download=download, options=dataset_option)
    made = _derive(
        lambda: split_dataset(
            list(ds), spec, out, fractions=parse_fractions(fractions), seed=seed, by=by,
            overwrite=overwrite,
        )
    )  # fmt: skip
    _print_written(made)


@dataset_app.command("filter")
def filter_(
    spec: Spec,
    out: Out,
    where: Annotated[
        list[str] | None,
        typer.Option(
            help="FIELD=VALUE a sample must have (repeatable: the same field again is 'or', "
            "another field 'and')"
        ),
    ] = None,
    overwrite: Overwrite = False,
    download: DownloadOption = False,
    dataset_option: DatasetOptionsOption = None,
) -> None:
    """Write the samples of SPEC that match every --where field (any of a field's values) as
    a native dataset."""
    from medibench.datasets._derive import filter_dataset

    ds = open_dataset(spec, download=download, options=dataset_option)
    made = _derive(
        lambda: filter_dataset(list(ds), spec, out, where=where or (), overwrite=overwrite)
    )
    _print_written(made)


@dataset_app.command()
def concat(
    specs: Annotated[
        list[str], typer.Argument(metavar="SPEC...", help="two dataset specs or more")
    ],
    out: Out,
    overwrite: Overwrite = False,
    download: DownloadOption = False,
    dataset_option: DatasetOptionsOption = None,
) -> None:
    """Write the samples of every SPEC, in order, as one native dataset; an id found in more
    than one of them is prefixed by its dataset's name (NAME-ID)."""
    from medibench.datasets._derive import concat_datasets

    loaded = [open_dataset(s, download=download, options=dataset_option) for s in specs]
    made = _derive(
        lambda: concat_datasets(
            [(s, ds.name, list(ds)) for s, ds in zip(specs, loaded, strict=True)], out,
            overwrite=overwrite,
        )
    )  # fmt: skip
    _print_written(made)


# --- helpers ---------------------------------------------------------------------------------


def _derive(make: Any) -> Any:
    """``make()``, its bad inputs one-line errors."""
    from medibench.datasets import DatasetError

    try:
        return make()
    except DatasetError as exc:
        fail(str(exc))


def _print_written(made: Any) -> None:
    from medibench.datasets._derive import PROVENANCE

    rec = made.provenance
    parts = ", ".join(f"{k} {n}" for k, n in rec["splits"].items())
    console.print(f"{rec['samples']} samples ({parts}) -> {made.out}", markup=False)
    console.print(f"provenance -> {made.out / PROVENANCE}", markup=False)
    console.print(f"read it as: --dataset native:{made.out}", markup=False)


def _print_description(info: dict[str, Any]) -> None:
    patients = info["patients"]
    console.print(
        f"{info['dataset']}: {info['samples']} samples, {patients['distinct']} patients "
        f"({patients['samples_without']} samples without one)",
        markup=False,
    )
    n = info["samples"]
    counts = Table(title="samples by field")
    for name, justify in (("field", "left"), ("value", "left"), ("samples", "right")):
        counts.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    counts.add_column("share", justify="right")
    for field, values in info["counts"].items():
        for value, k in values.items():
            counts.add_row(field, value, str(k), f"{k / n:.1%}")
    console.print(counts)
    sizes = Table(title="input image sizes")
    sizes.add_column("size (WxH)", no_wrap=True)
    sizes.add_column("samples", justify="right")
    for size, k in info["image_sizes"].items():
        sizes.add_row(size, str(k))
    console.print(sizes)
    masks, targets = info["masks"], info["targets"]
    table = Table(title="targets and masks (mask: fraction of its pixels in the ROI)")
    for name in ("with target", "with mask", "without mask", "min", "median", "mean", "max"):
        table.add_column(name, justify="right")
    stats = masks["fraction"] or {}
    cells = [f"{stats[k]:.4f}" if stats else "-" for k in ("min", "median", "mean", "max")]
    table.add_row(str(targets["with"]), str(masks["with"]), str(masks["without"]), *cells)
    console.print(table)
