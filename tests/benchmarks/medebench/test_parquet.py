"""MedEBench from a Parquet conversion of its editing/ tree, written here with ``datasets``."""

import json
import re
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.benchmarks.medebench.dataset import detect, read_medebench
from medibench.benchmarks.medebench.parquet import CACHE, is_medebench_parquet
from medibench.cli import app
from medibench.datasets import DatasetError, load_dataset
from medibench.io import read_image

datasets = pytest.importorskip("datasets")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

runner = CliRunner()
_IMAGES = ("previous_image", "changed_image", "previous_mask")


def _features():
    text = datasets.Value("string")
    return datasets.Features(
        {
            "id": datasets.Value("int64"),
            **{k: text for k in ("Organ", "Task", "prompt", "rephrased_prompt")},
            **{k: text for k in ("detailed_prompt", "url")},
            **{k: datasets.Image() for k in _IMAGES},
        }
    )


def convert(repo, out, *, embed=True, shards=2):
    """The metadata as ``datasets`` Parquet shards, images embedded (``{bytes, path}``) or as
    paths relative to ``out``'s folder; a listed file that does not exist becomes null."""
    records = json.loads((repo / "editing/editing_metadata.json").read_text())["samples"]
    rows = []
    for record in records:
        row = dict(record)
        for column in _IMAGES:
            file = repo / record[column]
            if not file.is_file():
                row[column] = None
            elif embed:
                row[column] = {"bytes": file.read_bytes(), "path": file.name}
            else:
                row[column] = {"bytes": None, "path": record[column]}
        rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    step = -(-len(rows) // shards)
    for n in range(shards):
        part = rows[n * step : (n + 1) * step]
        ds = datasets.Dataset.from_list(part, features=_features())
        ds.to_parquet(str(out / f"train-{n:05d}-of-{shards:05d}.parquet"))
    return out


@pytest.fixture(scope="module")
def converted(medebench_root, tmp_path_factory):
    return convert(medebench_root, tmp_path_factory.mktemp("medebench_parquet") / "data")


def test_same_samples_and_pixels_as_the_folder(converted, medebench_root):
    folder, parquet = read_medebench(medebench_root), read_medebench(converted)
    assert [s.sample_id for s in parquet] == [s.sample_id for s in folder] == list("12345")
    for a, b in zip(parquet, folder, strict=True):
        for field in ("instruction", "paraphrases", "description", "region", "task"):
            assert getattr(a, field) == getattr(b, field)
        assert (a.modality, a.perspective, a.metadata) == (b.modality, b.perspective, b.metadata)
        for field in ("input", "target", "mask"):
            ours, theirs = getattr(a, field), getattr(b, field)
            assert (ours is None) == (theirs is None)
            if ours is not None:
                assert f"/{CACHE}/images/" in ours
                pixels = [read_image(f, mode="unchanged") for f in (ours, theirs)]
                assert np.array_equal(*pixels)
    assert parquet.get("4").mask is None  # the listed mask file did not exist: null cell


def test_path_cells_relative_to_the_repository_root(medebench_root, tmp_path, monkeypatch):
    repo = tmp_path / "MedEBench"
    shutil.copytree(medebench_root / "editing", repo / "editing")
    monkeypatch.chdir(repo)  # datasets sizes path cells from the working folder
    shard = convert(repo, repo, embed=False, shards=1)
    (repo / "editing/editing_metadata.json").unlink()  # only the Parquet says what the samples are
    ds = load_dataset(f"medebench:{shard / 'train-00000-of-00001.parquet'}")
    assert [s.sample_id for s in ds] == list("12345")
    assert ds.get("1").input == str((repo / "editing/previous/1.png").resolve())
    assert not (repo / CACHE / "images").exists()  # nothing to store for path cells


def test_detected_and_scored_identically(converted, medebench_root, tmp_path):
    assert detect(converted) and is_medebench_parquet(converted)
    assert not is_medebench_parquet(medebench_root)
    records = {}
    for name, dataset in (("folder", f"medebench:{medebench_root}"), ("parquet", str(converted))):
        out = tmp_path / f"{name}.jsonl"
        res = runner.invoke(
            app,
            ["score", "--dataset", dataset, "--predictions", str(medebench_root)]
            + ["--out", str(out), "--no-progress"],
        )
        assert res.exit_code == 0, res.output
        records[name] = [json.loads(line) for line in out.read_text().splitlines()]
    drop = {"source", "input", "target", "prediction", "path", "created", "run_id", "dataset"}

    def same(record):  # file names differ (the Parquet's images are stored by hash): not values
        kept = {k: v for k, v in record.items() if k not in drop}
        kept["notes"] = [re.sub(r"/\S+", "FILE", n) for n in kept.get("notes", [])]
        return kept

    strip = [[same(r) for r in records[n]] for n in records]
    assert len(strip[0]) == 20 and strip[0] == strip[1]  # 5 samples x 2 models x 2 protocols
    assert sum(r["status"] == "ok" for r in strip[0]) == 14


def test_missing_columns_are_named_with_those_found(tmp_path):
    file = tmp_path / "x.parquet"
    pq.write_table(pa.table({"id": [1], "prompt": ["p"], "image": ["a.png"]}), file)
    with pytest.raises(DatasetError) as info:
        read_medebench(file)
    message = str(info.value)
    assert "missing column(s) Organ, Task, previous_image, changed_image" in message
    assert "found: id, prompt, image" in message and str(file) in message
    assert not is_medebench_parquet(tmp_path)


def test_an_undecodable_cell_is_that_samples_problem(medebench_root, tmp_path):
    out = convert(medebench_root, tmp_path / "data", shards=1)
    file = out / "train-00000-of-00001.parquet"
    table = pq.read_table(file)
    rows = table.to_pylist()
    rows[1]["previous_image"] = {"bytes": b"not an image", "path": "2.png"}
    rows[2]["previous_mask"] = {"bytes": b"\x89PNG broken", "path": "3.png"}
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), file)
    ds = read_medebench(out)
    assert [s.sample_id for s in ds] == ["1", "3", "4", "5"]
    assert ds.get("3").mask is None and ds.get("3").target is not None
    text = "\n".join(ds.problems)
    assert f"{file} row 1 (id 2): row 1, column 'previous_image': the bytes are not an image" in (
        text
    )
    assert "(id 3): row 2, column 'previous_mask': the bytes are not an image" in text


def test_a_second_read_of_unchanged_shards_reads_no_rows(converted, monkeypatch):
    from medibench.benchmarks.medebench import parquet

    first = read_medebench(converted)
    monkeypatch.setattr(parquet, "_records", lambda *a: (_ for _ in ()).throw(AssertionError))
    again = read_medebench(converted)
    assert [s.model_dump() for s in again] == [s.model_dump() for s in first]
