"""The MieDB-100k adapter: samples, colours, prediction index, and bad layouts."""

from __future__ import annotations

import re

import pytest

from medibench.benchmarks.miedb.dataset import MieDBDataset, detect, read_miedb
from medibench.datasets import DatasetError, load_dataset
from medibench.samples import Perspective

from .conftest import MODEL


def _record(idx=0, category="Perception", output="a/out_red.png", note=""):
    return dict(
        idx=idx,
        category=category,
        input_image="a/in.png",
        output_image=output,
        prompt="Segment it.",
        note=note,
    )


def test_samples_from_the_official_layout(layout):
    ds = load_dataset(f"miedb:{layout.root}")
    assert isinstance(ds, MieDBDataset)
    assert ds.sample_ids() == ["0", "1", "2", "3", "4", "10", "11", "12", "20"]
    assert ds.problems == []
    assert ds.default_protocols == ("miedb@paper", "miedb@1") and ds.expected_k == 3
    s0 = ds.get("0")
    assert s0.perspective is Perspective.perception and s0.overlay_color == ("red",)
    assert s0.input == str(layout.root.resolve() / "dataBenchmark/Perception/input/astro.png")
    assert s0.target.endswith("Perception/output/astro_red.png") and s0.mask is None
    assert s0.instruction == "Segment the lesion in red." and s0.benchmark == "miedb"
    assert s0.metadata["output_stem"] == "astro_red" and s0.metadata["idx"] == 0
    assert ds.get("1").overlay_color == ("green",) and ds.get("2").overlay_color == ("blue",)
    multi = ds.get("3")
    assert multi.overlay_color == ("red", "green", "blue") and multi.task == "Multiclasses"
    # categories compare case-insensitively ("perception", "TRANSFORMATION")
    assert ds.get("4").perspective is Perspective.perception
    assert ds.get("12").perspective is Perspective.transformation
    assert ds.get("20").perspective is Perspective.modification


def test_the_benchmark_folder_itself_is_accepted(layout):
    ds = read_miedb(layout.root / "dataBenchmark")
    assert len(ds) == 9 and ds.root == (layout.root / "dataBenchmark").resolve()


def test_predictions_are_found_by_output_name(layout):
    ds = read_miedb(layout.root)
    index = ds.find_predictions(layout.root / "eval_results")
    assert index.models == [MODEL]
    files = index.files[MODEL]
    assert sorted(files["0"]) == [1, 2] and sorted(files["3"]) == [0, 1, 2]
    assert files["0"][1].name == "astro_red_1.png"
    assert "4" not in files and "12" not in files
    assert sorted(p.name for _, p in index.unknown) == ["astro_red_3.png", "nobody_red_0.png"]
    # a folder of PNGs is one model
    one = ds.find_predictions(layout.root / "eval_results" / MODEL, model="m")
    assert one.models == ["m"] and sorted(one.files["m"]["10"]) == [0, 1, 2]


def test_shared_output_names_score_the_same_file(write_metadata):
    root = write_metadata([_record(0), _record(1)])
    ds = read_miedb(root)
    assert any("share the output file name 'out_red.png'" in p for p in ds.problems)
    preds = root / "eval_results" / "m"
    preds.mkdir(parents=True)
    (preds / "out_red_0.png").write_bytes(b"x")
    index = ds.find_predictions(root / "eval_results")
    assert index.files["m"]["0"][0] == index.files["m"]["1"][0] == preds / "out_red_0.png"


def test_missing_or_duplicate_idx_falls_back_to_the_output_name(write_metadata):
    records = [_record(5), _record(5, output="a/out.png", category="Transformation")]
    records.append({k: v for k, v in _record(output="a/in.png").items() if k != "idx"})
    records[2]["category"] = "Modification"
    ds = read_miedb(write_metadata(records))
    assert ds.sample_ids() == ["5", "out", "in"]
    assert len(ds.problems) == 2
    assert (
        "idx 5 is already used by an earlier entry; using the output file name 'out'"
        in (ds.problems[0])
    )
    assert "no idx; using the output file name 'in'" in ds.problems[1]


def test_metadata_that_is_not_a_list_is_refused(write_metadata):
    root = write_metadata({"samples": []})
    with pytest.raises(
        DatasetError, match=r"metadata\.json: expected a JSON list .* got a JSON object"
    ):
        read_miedb(root)


def test_an_entry_that_is_not_an_object_is_refused(write_metadata):
    root = write_metadata([_record(0), "a/in.png"])
    with pytest.raises(DatasetError, match=r"metadata\.json: .* entry 1 is a JSON string"):
        read_miedb(root)


def test_invalid_json_is_refused(write_metadata):
    with pytest.raises(DatasetError, match=r"metadata\.json: not valid JSON"):
        read_miedb(write_metadata("[{"))


def test_a_folder_without_metadata_is_refused(tmp_path):
    with pytest.raises(DatasetError, match="is not a MieDB-100k folder"):
        read_miedb(tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        read_miedb(tmp_path / "nope")


def test_unknown_category_is_reported_and_skipped(write_metadata):
    ds = read_miedb(write_metadata([_record(0, category="Segmentation"), _record(1)]))
    assert ds.sample_ids() == ["1"]
    assert len(ds.problems) == 1
    assert re.search(r"entry 0 \(idx 0\): skipped, unknown category 'Segmentation'", ds.problems[0])


def test_perception_target_without_colour_is_reported_and_skipped(write_metadata):
    records = [_record(0, output="a/out.png"), _record(1, output="a/out.png", note="Multiclasses")]
    ds = read_miedb(write_metadata(records))
    assert ds.sample_ids() == ["1"]  # a multi-class target needs no colour in its name
    assert "perception target 'a/out.png' has no colour suffix" in ds.problems[0]


def test_missing_files_and_fields_are_reported(write_metadata):
    records = [
        _record(0, output="a/gone_red.png"),
        {k: v for k, v in _record(1).items() if k != "prompt"},
        _record(2),
    ]
    ds = read_miedb(write_metadata(records))
    assert ds.sample_ids() == ["2"]
    assert (
        "entry 0 (idx 0): skipped, output_image 'a/gone_red.png' does not exist" in ds.problems[0]
    )
    assert "entry 1: skipped, field(s) prompt missing" in ds.problems[1]


@pytest.mark.parametrize("bad", ["../outside.png", "/etc/passwd", "a/../../x.png"])
def test_paths_that_leave_the_benchmark_folder_are_refused(write_metadata, bad):
    record = _record(0)
    record["input_image"] = bad
    with pytest.raises(DatasetError, match=r"entry 0 \(idx 0\), field 'input_image': path .*"):
        read_miedb(write_metadata([record]))


def test_detect(layout, write_metadata, tmp_path):
    assert detect(layout.root) and detect(layout.root / "dataBenchmark")
    assert not detect(layout.root / "eval_results")
    other = tmp_path / "other"
    other.mkdir()
    (other / "metadata.json").write_text('{"samples": []}')
    assert not detect(other)
    (other / "metadata.json").write_text("not json")
    assert not detect(other)
