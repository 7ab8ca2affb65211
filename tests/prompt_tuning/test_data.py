"""Labelled datasets in MVC-Bench's, the native and the Parquet layouts; the few-shot split."""

from __future__ import annotations

import json

import numpy as np
import pytest

from medibench.datasets._base import DatasetError
from medibench.prompt_tuning import few_shot_indices, read_labelled
from tests.prompt_tuning.conftest import write_folder_dataset


def test_mvcbench_folders_labels_follow_sorted_folders(folder_dataset):
    data = read_labelled(str(folder_dataset))
    assert data.class_names == ["benign lesion", "malignant lesion", "normal skin"]
    assert len(data) == 18
    assert (
        data.ids[0] == "benign/benign_00.png"
        and data.labels.tolist() == [0] * 6 + [1] * 6 + [2] * 6
    )
    img = data.image(7)
    assert img.shape == (40, 36, 3) and img.dtype == np.uint8


def test_split_file_selects_a_split(tmp_path):
    root = write_folder_dataset(tmp_path / "d", per_class=2)
    split = {
        "train": [
            ["benign/benign_00.png", 0, "benign lesion"],
            ["normal/normal_01.png", 2, "normal skin"],
        ],
        "val": [],
        "test": [["malignant/malignant_00.png", 1, "malignant lesion"]],
    }
    (root / "split_zhou_skin.json").write_text(json.dumps(split))
    train = read_labelled(f"{root}@train")
    assert train.ids == ["benign/benign_00.png", "normal/normal_01.png"]
    assert train.labels.tolist() == [0, 2]
    with pytest.raises(DatasetError, match="no split 'dev'.*splits: test, train, val"):
        read_labelled(f"{root}@dev")
    with pytest.raises(DatasetError, match="no images in split 'val'"):
        read_labelled(f"{root}@val")


def test_folder_missing_from_classnames_is_named(tmp_path):
    root = write_folder_dataset(tmp_path / "d", per_class=1)
    (root / "extra").mkdir()
    with pytest.raises(DatasetError, match="class folder\\(s\\) extra are not in .*classnames.txt"):
        read_labelled(str(root))


def test_native_with_label_field(tmp_path, folder_dataset):
    from medibench.datasets.native import write_native
    from medibench.samples import Sample

    samples = [
        Sample(
            sample_id=f"s{i}",
            input=str(folder_dataset / "benign" / f"benign_0{i}.png"),
            instruction="classify",
            benchmark="skin",
            perspective="perception",
            metadata={"label": lab, "split": sp},
        )
        for i, (lab, sp) in enumerate([("cyst", "train"), ("mass", "train"), ("cyst", "test")])
    ]
    write_native(tmp_path / "n", samples)
    data = read_labelled(str(tmp_path / "n"))
    assert data.class_names == ["cyst", "mass"] and data.labels.tolist() == [0, 1, 0]
    assert read_labelled(f"{tmp_path / 'n'}@train").ids == ["s0", "s1"]
    (tmp_path / "n" / "classnames.txt").write_text("mass\ncyst\n")
    assert read_labelled(str(tmp_path / "n")).labels.tolist() == [1, 0, 1]


def test_parquet_with_image_and_label_columns(tmp_path, folder_dataset):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    png = (folder_dataset / "normal" / "normal_00.png").read_bytes()
    table = pa.table({"image": [{"bytes": png, "path": "a.png"}] * 3, "label": [0, 1, 1]})
    pq.write_table(table, tmp_path / "x.parquet")
    with pytest.raises(
        DatasetError, match="integer labels need class names: write .*classnames.txt"
    ):
        read_labelled(str(tmp_path / "x.parquet"))
    (tmp_path / "classnames.txt").write_text("normal\nabnormal\n")
    data = read_labelled(str(tmp_path / "x.parquet"))
    assert data.ids == ["x.parquet:0", "x.parquet:1", "x.parquet:2"]
    assert data.class_names == ["normal", "abnormal"] and data.image(2).shape == (40, 36, 3)
    pq.write_table(
        pa.table({"image": [{"bytes": png, "path": "a.png"}], "label": [5]}), tmp_path / "x.parquet"
    )
    with pytest.raises(DatasetError, match="sample 'x.parquet:0': label 5 is out of range"):
        read_labelled(str(tmp_path / "x.parquet"))


def test_unknown_layout(tmp_path):
    with pytest.raises(DatasetError, match="not a labelled dataset"):
        read_labelled(str(tmp_path))


def test_few_shot_is_class_balanced_seeded_and_independent_of_order(folder_dataset):
    data = read_labelled(str(folder_dataset))
    a = few_shot_indices(data, 2, seed=1)
    assert np.bincount(data.labels[a]).tolist() == [2, 2, 2]
    assert a == few_shot_indices(data, 2, seed=1)
    assert a != few_shot_indices(data, 2, seed=2)
    # the same ids whatever the order the images come in
    order = list(range(len(data)))[::-1]
    shuffled = data.subset(order)
    b = few_shot_indices(shuffled, 2, seed=1)
    assert sorted(shuffled.ids[i] for i in b) == sorted(data.ids[i] for i in a)
    # the draw: default_rng(seed).choice over each class's sorted ids
    rng = np.random.default_rng(1)
    expected = []
    for label in range(3):
        members = sorted(np.flatnonzero(data.labels == label), key=lambda i: data.ids[i])
        expected += sorted(int(members[i]) for i in rng.choice(len(members), 2, replace=False))
    assert a == expected


def test_too_many_shots_is_a_clear_error(folder_dataset):
    data = read_labelled(str(folder_dataset))
    with pytest.raises(
        ValueError,
        match="class 'benign lesion' \\(label 0\\) has 6 image\\(s\\), fewer than --shots 7",
    ):
        few_shot_indices(data, 7, seed=1)


def test_native_sample_without_label_is_named(tmp_path, folder_dataset):
    from medibench.datasets.native import write_native
    from medibench.samples import Sample

    image = str(folder_dataset / "benign" / "benign_00.png")
    common = {"instruction": "classify", "benchmark": "skin", "perspective": "perception"}
    labelled = Sample(sample_id="a", input=image, metadata={"label": "x"}, **common)
    write_native(tmp_path / "n", [labelled, Sample(sample_id="b", input=image, **common)])
    with pytest.raises(DatasetError, match="sample 'b' has no metadata.label"):
        read_labelled(str(tmp_path / "n"))
