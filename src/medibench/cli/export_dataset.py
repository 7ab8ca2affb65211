"""``medibench export-dataset``: any dataset in the Hub's Parquet layout, native, or MieDB's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medibench.cli._app import console, err, fail, open_dataset
from medibench.cli._options import DatasetOptionsOption, DownloadOption


def export_dataset(
    dataset: Annotated[str, typer.Argument(help="the dataset spec, e.g. native:DIR or starter")],
    out: Annotated[Path, typer.Option(help="the folder to write")],
    format: Annotated[
        str, typer.Option("--format", help="hf-parquet (Hugging Face Parquet), native or miedb")
    ] = "hf-parquet",
    overwrite: Annotated[bool, typer.Option(help="write into a folder that has files")] = False,
    download: DownloadOption = False,
    dataset_option: DatasetOptionsOption = None,
) -> None:
    """Export DATASET to --out: Parquet shards with Image features and a dataset card
    (hf-parquet; read back as native:OUT), samples.jsonl and images (native), or
    dataBenchmark/metadata.json (miedb)."""
    from medibench.datasets import DatasetError
    from medibench.datasets._export import FORMATS
    from medibench.datasets._export import export_dataset as export

    if format not in FORMATS:
        fail(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")
    ds = open_dataset(dataset, download=download, options=dataset_option)
    try:
        result = export(ds, out, format=format, name=ds.name, overwrite=overwrite)
    except (DatasetError, ImportError) as exc:
        fail(str(exc))
    for note in result.notes:
        err.print(f"note: {note}")
    console.print(f"{result.samples} samples -> {out} ({format}, {len(result.files)} files)")
    kind = {"hf-parquet": "native", "native": "native", "miedb": "miedb"}[format]
    console.print(f"read it back: --dataset {kind}:{out}")
