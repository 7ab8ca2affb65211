"""MedGEN-Bench's Parquet release (parquet/{image_editing,multimodal_generation,vqa}/*.parquet).

A tiny release is built here with pyarrow; the prepared folder it is compared with is written
the way the official ``prepare_medgen_data.py`` lays it out (ids
``medgen:<config>:<shard stem>:<row:06d>``, images in ``images/assets/<xx>/<sha256><ext>``).
"""

import hashlib
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

from medibench.benchmarks.medgen.dataset import detect, read_medgen
from medibench.cli import app
from medibench.datasets import DatasetError
from medibench.io import read_image

runner = CliRunner()
SHARDS = ("train-00000-of-00002", "train-00001-of-00002")


def _encode(array, fmt="PNG"):
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format=fmt)
    return buf.getvalue()


def _pixels(seed, shape=(32, 40, 3)):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _edit_rows():
    """(shard, rows): 3 + 2 editing rows; row (1, 1) has an output cell that is not an image."""
    tasks = ["contrast-enhancement", "artifact-removal", "organ-removal", "style-transfer", "x"]
    rows = []
    for i, task in enumerate(tasks):
        jpeg = i == 2
        fmt, name = ("JPEG", f"in_{i}.jpeg") if jpeg else ("PNG", f"in_{i}.png")
        rows.append(
            {
                "input_images": [{"bytes": _encode(_pixels(i), fmt), "path": name}],
                "output_images": [{"bytes": _encode(_pixels(10 + i)), "path": None}],
                "instruction": f"Edit number {i}.",
                "task": task,
                "subtask": "Sub" if i else None,
                "modality": "CT",
            }
        )
    rows[4]["output_images"] = [{"bytes": b"not an image", "path": "gt.png"}]
    return {SHARDS[0]: rows[:3], SHARDS[1]: rows[3:]}


def _write(folder, name, rows):
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / f"{name}.parquet")


def build_release(root):
    for shard, rows in _edit_rows().items():
        _write(root / "parquet" / "image_editing", shard, rows)
    other = {
        "input_images": [{"bytes": _encode(_pixels(99)), "path": "q.png"}],
        "instruction": "What is shown?",
        "task": "multiple-choice",
        "subtask": None,
        "modality": "MRI",
        "answer": "A",
    }
    _write(root / "parquet" / "vqa", SHARDS[0][:6] + "00000-of-00001", [other])
    gen = dict(other, output_images=other["input_images"], task="disease-prediction")
    _write(root / "parquet" / "multimodal_generation", "train-00000-of-00001", [gen])
    return root


def _asset(folder, data, stored):
    digest = hashlib.sha256(data).hexdigest()
    ext = ".jpg" if stored and stored.endswith(".jpeg") else ".png"
    rel = f"images/assets/{digest[:2]}/{digest}{ext}"
    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
    (folder / rel).write_bytes(data)
    return rel


def build_prepared(folder):
    """The same editing rows as the official preparation writes them (no answer)."""
    folder.mkdir(parents=True)
    lines = []
    for shard, rows in _edit_rows().items():
        for i, row in enumerate(rows):
            if row["task"] == "x":
                continue  # the official script stops on an unreadable image
            ins = [_asset(folder, c["bytes"], c["path"]) for c in row["input_images"]]
            outs = [_asset(folder, c["bytes"], c["path"]) for c in row["output_images"]]
            record = {
                "sample_id": f"medgen:image_editing:{shard}:{i:06d}",
                "category": "ImageEdit",
                "paper_format": "ImageEditing",
                "paper_task": row["task"],
                "paper_subtask": row["subtask"],
                "sub-category": row["task"],
                "modality": row["modality"],
                "instruction": row["instruction"],
                "input_images": ins,
                "input_image": ins[0],
                "ground_truth_images": outs,
                "ground_truth_image": outs[0],
            }
            lines.append(json.dumps(record))
    (folder / "edit.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("medgen_parquet")
    release = build_release(tmp / "MedGEN-Bench")
    prepared = build_prepared(tmp / "MedGEN_data")
    preds = tmp / "outputs"
    preds.mkdir()
    lines = []
    for n, (shard, row) in enumerate([(SHARDS[0], 0), (SHARDS[0], 1), (SHARDS[1], 0)]):
        out = preds / f"out_{n}.png"
        Image.fromarray(_pixels(10 + n if n < 2 else 20)).save(out)
        sid = f"medgen:image_editing:{shard}:{row:06d}"
        lines.append(json.dumps({"sample_id": sid, "output_image": str(out), "response": ""}))
    (preds / "vlm_editor_edit.jsonl").write_text("\n".join(lines) + "\n")
    return {"release": release, "prepared": prepared, "preds": preds, "tmp": tmp}


def _score(tmp, dataset, preds, name):
    out = tmp / f"{name}.jsonl"
    args = ["score", "--dataset", dataset, "--predictions", str(preds), "--out", str(out)]
    res = runner.invoke(app, [*args, "--no-progress", "--protocol", "medgen@code"])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_ids_fields_and_cache_layout(trees):
    release = trees["release"]
    ds = read_medgen(release)
    assert detect(release) and detect(release / "parquet")
    assert ds.sample_ids() == [
        "medgen-image_editing-train-00000-of-00002-000000",
        "medgen-image_editing-train-00000-of-00002-000001",
        "medgen-image_editing-train-00000-of-00002-000002",
        "medgen-image_editing-train-00001-of-00002-000000",
    ]
    first = ds.get(ds.sample_ids()[0])
    assert first.metadata["medgen_sample_id"] == "medgen:image_editing:train-00000-of-00002:000000"
    assert first.task == "contrast-enhancement" and first.modality == "CT"
    assert first.description is None  # editing rows carry no answer
    cache = release / "parquet.medibench" / "images" / "assets"
    jpeg = ds.get(ds.sample_ids()[2])
    assert jpeg.task == "organic-removal" and jpeg.input.endswith(".jpg")
    assert jpeg.input.startswith(str(cache))
    prepared = read_medgen(trees["prepared"])
    for a, b in zip(ds, prepared, strict=True):
        rel_a = (a.input, a.target)
        assert [str(p).split("parquet.medibench/")[1] for p in rel_a] == [
            str(p).split("MedGEN_data/")[1] for p in (b.input, b.target)
        ]
        assert np.array_equal(read_image(a.input), read_image(b.input))
        assert np.array_equal(read_image(a.target), read_image(b.target))
    assert read_medgen(release / "parquet").sample_ids() == ds.sample_ids()


def test_other_configs_kept_with_official_ids(trees):
    other = read_medgen(trees["release"]).other_records
    assert other["vqa"][0]["sample_id"] == "medgen:vqa:train-00000-of-00001:000000"
    assert other["vqa"][0]["answer"] == "A" and other["vqa"][0]["category"] == "VQA"
    gen = other["gen"][0]
    assert gen["sample_id"] == "medgen:multimodal_generation:train-00000-of-00001:000000"
    assert gen["paper_task"] == "disease-prediction"


def test_undecodable_cell_is_that_samples_problem(trees):
    ds = read_medgen(trees["release"])
    bad = [p for p in ds.problems if "train-00001-of-00002.parquet row 1" in p]
    assert len(bad) == 1 and "output_images[0]" in bad[0] and "not an image" in bad[0]
    assert len(ds) == 4


def test_score_records_equal_the_prepared_folders(trees):
    tmp, preds = trees["tmp"], trees["preds"]
    from_parquet = _score(tmp, f"medgen:{trees['release']}", preds, "parquet")
    from_folder = _score(tmp, f"medgen:{trees['prepared']}", preds, "folder")
    assert len(from_parquet) == 4
    assert [r["status"] for r in from_parquet].count("ok") == 3
    assert _comparable(from_parquet) == _comparable(from_folder)


def _comparable(records):
    drop = {"source", "input", "target", "prediction", "path", "created", "run_id", "dataset"}
    return [{k: v for k, v in r.items() if k not in drop} for r in records]


def test_columns_that_do_not_match_name_missing_and_found(tmp_path):
    rows = [{"image": [{"bytes": _encode(_pixels(0)), "path": "a.png"}], "instruction": "x"}]
    _write(tmp_path / "parquet" / "image_editing", SHARDS[0], rows)
    with pytest.raises(DatasetError) as err:
        read_medgen(tmp_path)
    message = str(err.value)
    assert "missing column(s) input_images, output_images, task, modality" in message
    assert "found: image, instruction" in message


def test_neither_layout_says_both(tmp_path):
    with pytest.raises(DatasetError, match=r"no edit.jsonl and no parquet/image_editing"):
        read_medgen(tmp_path)


def test_a_second_read_of_unchanged_shards_reads_no_editing_rows(trees, monkeypatch):
    from medibench.benchmarks.medgen import parquet

    first = read_medgen(trees["release"])

    def no_rows(*a, **k):
        raise AssertionError("the editing shards were read again")

    monkeypatch.setattr(parquet, "_edit_records", no_rows)
    again = read_medgen(trees["release"])
    assert [s.model_dump() for s in again] == [s.model_dump() for s in first]
    assert again.problems == first.problems
