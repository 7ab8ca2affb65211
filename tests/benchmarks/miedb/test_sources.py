"""MieDB-100k as downloaded: the ``dataBenchmark_00.tar`` archive, and the official outputs in
``inference/eval_results/`` found from the repository root."""

from __future__ import annotations

import json
import shutil
import tarfile

import pytest
from typer.testing import CliRunner

from medibench.benchmarks.miedb.dataset import read_miedb
from medibench.cli import app
from medibench.datasets import DatasetError, load_dataset
from medibench.sources import CACHE_SUFFIX, SourceError

from .conftest import MODEL

runner = CliRunner()


@pytest.fixture(scope="module")
def download(layout, tmp_path_factory):
    """The layout as people get it: ``dataBenchmark_00.tar`` (holding ``dataBenchmark/``) next
    to a checkout of the code repository with its outputs in ``inference/eval_results/``."""
    root = tmp_path_factory.mktemp("download")
    archive = root / "dataBenchmark_00.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(layout.root / "dataBenchmark", arcname="dataBenchmark")
    repo = root / "MieDB-100k"
    shutil.copytree(layout.root / "eval_results", repo / "inference" / "eval_results")
    return archive, repo


def _score(spec, predictions, out):
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            spec,
            "--predictions",
            str(predictions),
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_tar_loads_as_the_extracted_folder(layout, download):
    archive, _ = download
    from_tar = load_dataset(f"miedb:{archive}")
    from_folder = load_dataset(f"miedb:{layout.root}")
    assert (
        from_tar.root == (archive.parent / f"{archive.name}{CACHE_SUFFIX}/dataBenchmark").resolve()
    )
    assert from_tar.sample_ids() == from_folder.sample_ids()
    for a, b in zip(from_tar, from_folder, strict=True):
        assert a.model_copy(update={"input": b.input, "target": b.target}) == b


def test_a_folder_holding_only_the_download_is_read_through_it(download):
    archive, _ = download
    ds = read_miedb(archive.parent)
    assert len(ds) == 9 and f"{archive.name}{CACHE_SUFFIX}" in str(ds.root)


def test_the_tar_scores_to_the_same_records_as_the_folder(layout, download, tmp_path):
    archive, repo = download
    # the same outputs for both: the records (error texts included) then differ by nothing
    from_folder = _score(f"miedb:{layout.root}", repo, tmp_path / "a.jsonl")
    from_tar = _score(f"miedb:{archive}", repo, tmp_path / "b.jsonl")
    assert from_tar == from_folder
    assert {r["status"] for r in from_folder} == {"ok", "missing", "error"}


@pytest.mark.parametrize("below", ["", "inference", "inference/eval_results"])
def test_official_outputs_are_found_from_the_repository_root(layout, download, below):
    _, repo = download
    ds = read_miedb(layout.root)
    index = ds.find_predictions(repo / below)
    assert index.models == [MODEL]
    reference = ds.find_predictions(layout.root / "eval_results")
    assert {
        m: {s: {k: p.name for k, p in ks.items()} for s, ks in f.items()}
        for m, f in index.files.items()
    } == {
        m: {s: {k: p.name for k, p in ks.items()} for s, ks in f.items()}
        for m, f in reference.files.items()
    }


def test_a_truncated_download_names_the_archive(download, tmp_path):
    archive, _ = download
    cut = tmp_path / archive.name
    data = archive.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match=rf"archive {cut} is truncated or corrupt"):
        load_dataset(f"miedb:{cut}")
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            f"miedb:{cut}",
            "--predictions",
            str(tmp_path),
            "--out",
            str(tmp_path / "x.jsonl"),
        ],
    )
    assert res.exit_code != 0 and "truncated or corrupt" in res.output
    assert "Traceback" not in res.output


def test_an_archive_without_the_benchmark_is_named(tmp_path):
    archive = tmp_path / "other.tar"
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "readme.txt").write_text("hi")
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "x" / "readme.txt", arcname="readme.txt")
    with pytest.raises(DatasetError, match=rf"{archive} \(extracted to .*\) is not a MieDB-100k"):
        read_miedb(archive)
