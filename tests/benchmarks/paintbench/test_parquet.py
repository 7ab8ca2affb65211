"""PaintBench from its Hub Parquet: the same samples, pixels and score records as its tree.

The snapshot is built here, with pyarrow, from the tiny generated tree of ``conftest.py``, in
the layout ``push_to_hub`` gives ``load_dataset("PaintBench/PaintBench", CONFIG, split=...)``:
``<config>/<split>-00000-of-00001.parquet``, images as ``{bytes, path}`` structs, ``metadata``
the problem's ``NNN.json`` text.
"""

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from medibench.benchmarks.paintbench.dataset import detect, read_paintbench
from medibench.cli import app
from medibench.datasets import DatasetError, load_dataset
from medibench.io import read_image

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema(
    [
        ("task", pa.string()),
        ("problem_id", pa.int64()),
        ("mode", pa.string()),
        ("visual_condition", pa.string()),
        ("instruction", pa.string()),
        ("metadata", pa.string()),
        ("input_image", IMAGE),
        ("answer_image", IMAGE),
    ]
)


def _cell(path):
    return {"bytes": path.read_bytes(), "path": path.name} if path.is_file() else None


def hub_rows(bench):
    """One row per ``<task>/NNN_input.png`` of the tree, as the Hub upload would write it."""
    listed = {}
    for line in (bench / "problems.jsonl").read_text().splitlines():
        record = json.loads(line)
        listed[(record["task"], record["problem_id"])] = record
    rows = []
    for task_dir in sorted(p for p in bench.iterdir() if p.is_dir()):
        for inp in sorted(task_dir.glob("*_input.png")):
            num = inp.name.split("_")[0]
            meta_path = task_dir / f"{num}.json"
            text = meta_path.read_text() if meta_path.is_file() else None
            try:
                meta = json.loads(text) if text else {}
            except json.JSONDecodeError:
                meta = {}
            meta = meta if isinstance(meta, dict) else {}
            fallback = listed.get((task_dir.name, int(num)), {})
            rows.append(
                {
                    "task": task_dir.name,
                    "problem_id": int(num),
                    "mode": meta.get("mode") or "",
                    "visual_condition": meta.get("visual_condition") or "",
                    "instruction": meta.get("instruction") or fallback.get("instruction") or "",
                    "metadata": text,
                    "input_image": _cell(inp),
                    "answer_image": _cell(task_dir / f"{num}_answer.png"),
                }
            )
    return rows


def write_shard(path, rows, schema=SCHEMA):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=4)


@pytest.fixture(scope="module")
def snapshot(paint_tree, tmp_path_factory):
    root = tmp_path_factory.mktemp("hub") / "PaintBench-hub"
    rows = hub_rows(paint_tree["bench"])
    write_shard(root / "PaintBench" / "test-00000-of-00001.parquet", rows)
    write_shard(root / "PaintBench" / "dev-00000-of-00001.parquet", rows[:3])
    write_shard(root / "TinyGrafixBench" / "test-00000-of-00001.parquet", rows[3:5])
    (root / "README.md").write_text("---\nconfigs:\n- config_name: PaintBench\n---\n")
    return root


def _score(spec, outputs, out):
    result = CliRunner().invoke(
        app,
        ["score", "--dataset", spec, "--predictions", str(outputs), "--out", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_parquet_and_tree_give_identical_records(snapshot, paint_tree, tmp_path):
    outputs = paint_tree["outputs"]
    tree = _score(f"paintbench:{paint_tree['bench']}", outputs, tmp_path / "tree.jsonl")
    hub = _score(f"paintbench:{snapshot}", outputs, tmp_path / "hub.jsonl")
    assert len(tree) >= 6 and any(r["status"] == "ok" for r in tree)
    assert hub == tree


def test_same_samples_and_pixels(snapshot, paint_tree):
    local, parquet = read_paintbench(paint_tree["bench"]), load_dataset(f"paintbench:{snapshot}")
    assert [s.sample_id for s in parquet] == [s.sample_id for s in local]
    assert parquet.benchmark_name == "PaintBench" and parquet.name == "PaintBench"
    for a, b in zip(local, parquet, strict=True):
        assert b.model_dump(exclude={"input", "target"}) == a.model_dump(
            exclude={"input", "target"}
        )
        assert np.array_equal(read_image(b.input), read_image(a.input))
        assert np.array_equal(read_image(b.target), read_image(a.target))
    index = parquet.find_predictions(paint_tree["outputs"])
    assert index.files == local.find_predictions(paint_tree["outputs"]).files
    assert any("astrology" in p for p in parquet.problems)  # the same problems reported
    assert any("not valid JSON" in p for p in parquet.problems)
    assert any("recolor" in p and "no answer image" in p for p in parquet.problems)


def test_configs_and_splits(snapshot):
    assert detect(snapshot)
    dev = read_paintbench(snapshot / "PaintBench" / "dev")
    assert dev.name == "PaintBench-dev" and len(dev) == 2  # the 3 rows minus recolor-002
    assert {s.split for s in dev} == {"dev"}
    assert [s.sample_id for s in read_paintbench(snapshot, split="dev")] == [
        s.sample_id for s in dev
    ]
    tiny = read_paintbench(snapshot / "TinyGrafixBench")
    assert tiny.benchmark_name == "TinyGrafixBench" and len(tiny) == 2
    assert len(read_paintbench(snapshot, config="TinyGrafixBench")) == 2
    shard = read_paintbench(snapshot / "PaintBench" / "test-00000-of-00001.parquet")
    assert shard.benchmark_name == "PaintBench" and {s.split for s in shard} == {"test"}
    with pytest.raises(DatasetError, match=r"no PaintBench config 'Nope' \(found: PaintBench"):
        read_paintbench(snapshot, config="Nope")
    with pytest.raises(DatasetError, match=r"no split 'train' \(found: dev, test\)"):
        read_paintbench(snapshot, split="train")


def test_wrong_columns_name_missing_and_found(paint_tree, tmp_path):
    rows = [
        {k: v for k, v in r.items() if k not in ("answer_image", "mode")}
        for r in hub_rows(paint_tree["bench"])
    ]
    schema = pa.schema([f for f in SCHEMA if f.name not in ("answer_image", "mode")])
    write_shard(tmp_path / "PaintBench" / "test-00000-of-00001.parquet", rows, schema)
    with pytest.raises(DatasetError) as err:
        read_paintbench(tmp_path)
    message = str(err.value)
    assert "missing column(s) mode, answer_image" in message
    assert "found: task, problem_id, visual_condition, instruction, metadata, input_image" in (
        message
    )


def test_undecodable_image_is_that_problems_problem(paint_tree, tmp_path):
    rows = hub_rows(paint_tree["bench"])
    bad = next(i for i, r in enumerate(rows) if (r["task"], r["problem_id"]) == ("recolor", 0))
    rows[bad]["input_image"] = {"bytes": b"not a png at all", "path": "000_input.png"}
    write_shard(tmp_path / "PaintBench" / "test-00000-of-00001.parquet", rows)
    ds = read_paintbench(tmp_path)
    ids = [s.sample_id for s in ds]
    assert "recolor-000" not in ids and "recolor-001" in ids and "counting-000" in ids
    (problem,) = [p for p in ds.problems if "recolor-000" in p]
    assert f"row {bad}, column 'input_image'" in problem and "skipped" in problem


def test_unwritable_snapshot_stores_images_in_the_user_cache(snapshot, tmp_path, monkeypatch):
    copy = tmp_path / "snap"
    shutil.copytree(snapshot / "TinyGrafixBench", copy / "TinyGrafixBench")
    (copy / ".medibench-assets").write_text("in the way")  # the assets folder cannot be made
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ds = read_paintbench(copy)
    assert ds.benchmark_name == "TinyGrafixBench" and len(ds) == 2
    assert all(s.input.startswith(str(tmp_path / "cache")) for s in ds)


def test_a_second_read_of_unchanged_shards_reads_no_rows(snapshot, monkeypatch):
    from medibench.benchmarks.paintbench import parquet

    first = read_paintbench(snapshot)

    def no_rows(*a, **k):
        raise AssertionError("the shards were read again")

    monkeypatch.setattr(parquet, "_read", no_rows)
    again = read_paintbench(snapshot)
    assert [s.model_dump() for s in again] == [s.model_dump() for s in first]
    assert again.problems == first.problems
