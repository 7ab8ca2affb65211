"""``medibench download``: a benchmark's official files from the Hugging Face Hub, pinned."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from medibench.cli._app import console, err, fail


def download(
    benchmark: Annotated[str, typer.Argument(help="the benchmark (dataset kind), e.g. medgen")],
    out: Annotated[Path, typer.Option(help="the folder to download into")],
    revision: Annotated[
        str | None,
        typer.Option(help="another revision (branch, tag or commit) than the pinned one"),
    ] = None,
) -> None:
    """Download a benchmark's official files at its pinned revision into --out, recording them
    with their sha256 in OUT/medibench-source.json (re-verified whenever OUT is loaded)."""
    from medibench.benchmarks import BENCHMARKS
    from medibench.registry import UnknownNameError
    from medibench.sources._hub import SOURCE_MANIFEST, download_source

    try:
        bench = BENCHMARKS.get(benchmark)
    except UnknownNameError as exc:
        fail(str(exc))
    source = bench.hub
    if source is None:
        on_hub = ", ".join(b.name for b in BENCHMARKS if b.hub is not None)
        fail(f"benchmark '{bench.name}' has no hub source to download; those with one: {on_hub}")
    if out.exists() and not out.is_dir():
        fail(f"--out {out} is a file; give a folder to download into")
    if revision is not None:
        source = dataclasses.replace(source, revision=revision)
    if not source.pinned:
        err.print(
            f"[bold yellow]warning:[/] {source.repo_id} is unpinned (revision "
            f"'{source.revision}'): what it gives changes when its owners push; the commit "
            f"downloaded is recorded in {SOURCE_MANIFEST}"
        )
    try:
        manifest = download_source(source, out, benchmark=bench.name, revision=revision)
    except ImportError as exc:
        fail(f"{exc}; medibench download needs the hf extra: pip install 'medibench[hf]'")
    except ValueError as exc:  # SourceError: offline, HTTP failure, commit or hash mismatch
        fail(str(exc))
    except OSError as exc:  # the folder: not writable, disk full
        fail(f"cannot download into {out}: {exc.strerror or exc} ({exc.filename or out})")
    size = sum(f.size for f in manifest.files)
    console.print(
        f"{source.repo_id}@{manifest.resolved_revision}: {len(manifest.files)} files, "
        f"{size / 1e6:.1f} MB -> {out} (hashes in {out / SOURCE_MANIFEST})"
    )
    licence = manifest.licence or f"not stated: read the dataset card, {source.url}"
    console.print(f"licence: {licence}")
    target = out / source.dataset if source.dataset else out
    console.print(
        f"next: medibench score --dataset {bench.name}:{target} --predictions DIR "
        "--out scores.jsonl"
    )
