"""Post-processing: the perceptual hash against imagehash, near-duplicates, the split rule and
the leakage test (no patient crosses splits)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from medibench.build import BuildError, assign_splits, build, near_duplicates, phash, read_source
from medibench.build._post import hamming, split_groups
from medibench.build._source import SplitRule
from tests.build.conftest import mni_png_source


def test_phash_is_imagehash_phash():
    imagehash = pytest.importorskip("imagehash")
    from PIL import Image

    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (40, 56, 3), dtype=np.uint8),
              rng.integers(0, 256, (128, 128), dtype=np.uint8),
              np.tile(np.linspace(0, 255, 97, dtype=np.uint8), (61, 1))]  # fmt: skip
    for image in images:
        reference = imagehash.phash(Image.fromarray(image))
        ours = phash(image)
        bits = [(ours >> (63 - i)) & 1 for i in range(64)]
        assert bits == reference.hash.ravel().astype(int).tolist()
        assert f"{ours:016x}" == str(reference)


def test_hamming_and_near_duplicates_need_input_and_target_close():
    assert hamming(0b1011, 0b0001) == 2 and hamming(5, 5) == 0

    def rec(sid, task, a, b):
        return {"sample_id": sid, "task": task,
                "metadata": {"phash_input": f"{a:016x}", "phash_target": f"{b:016x}"}}  # fmt: skip

    records = [rec("s1", "t", 0b0000, 0b1111), rec("s2", "t", 0b0001, 0b1110),
               rec("s3", "t", 0b0000, 0b0000), rec("s4", "u", 0b0000, 0b1111),
               rec("s0", "t", 0b0111, 0b1111)]  # fmt: skip
    assert near_duplicates(records, 0) == set()
    assert near_duplicates(records, 1) == {"s2"}  # s0 < s1: s1 is kept (3 bits from s0)
    assert near_duplicates(records, 3) == {"s1", "s2"}  # s0 kept first; s4 is another task


def test_assign_splits_is_seeded_and_keeps_every_split_populated():
    groups = [f"p{i}" for i in range(10)]
    a = assign_splits(groups, SplitRule("patient", 0.2, 0.1, seed=4))
    assert a == assign_splits(list(reversed(groups)), SplitRule("patient", 0.2, 0.1, seed=4))
    assert sorted(a.values()).count("test") == 2 and sorted(a.values()).count("val") == 1
    assert a != assign_splits(groups, SplitRule("patient", 0.2, 0.1, seed=5))
    assert set(assign_splits(["a", "b"], SplitRule("patient", 0.2)).values()) == {"test", "train"}
    assert assign_splits(["only"], SplitRule("patient", 0.2)) == {"only": "train"}


def test_split_by_patient_with_an_item_lacking_the_field(tmp_path):
    path = mni_png_source(tmp_path, patients=2, per_patient=1)
    text = path.read_text().replace(", patient: patient1}", "}")
    path.write_text(text)
    with pytest.raises(BuildError, match=r"split is by patient but item 'p1_0' .*has no 'patient'"):
        split_groups(read_source(path))
    with pytest.raises(BuildError, match="has no 'patient' field"):
        build("perception", path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_no_patient_crosses_splits(tmp_path):
    path = mni_png_source(tmp_path / "src", patients=4, per_patient=2)
    result = build("perception", path, tmp_path / "out", exports=())
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    by_patient: dict[str, set[str]] = {}
    for s in samples:
        by_patient.setdefault(s["metadata"]["patient"], set()).add(s["split"])
    assert result.samples == len(samples) and len(by_patient) == 4
    assert all(len(splits) == 1 for splits in by_patient.values()), by_patient
    assert {next(iter(v)) for v in by_patient.values()} == {"train", "val", "test"}
    quality = json.loads((tmp_path / "out" / "report" / "quality.json").read_text())
    assert quality["leaking_patients"] == {}
    assert quality["counts"]["split"] == {
        k: sum(s["split"] == k for s in samples) for k in ("train", "val", "test")
        if any(s["split"] == k for s in samples)}  # fmt: skip


def test_split_source_keeps_each_items_own_split(tmp_path):
    path = mni_png_source(tmp_path / "src", patients=3, per_patient=1)
    text = path.read_text()
    for p, split in enumerate(("train", "test", "val")):
        text = text.replace(f"patient: patient{p}}}", f"patient: patient{p}, split: {split}}}")
    path.write_text(text.replace("split: {by: patient, test: 0.25, val: 0.25, seed: 3}",
                                 "split: source"))  # fmt: skip
    source = read_source(path)
    assert source.split.by == "source" and [i.split for i in source.items] == [
        "train", "test", "val"]  # fmt: skip
    build("perception", path, tmp_path / "out", exports=())
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    by_item = {s["metadata"]["item"]: s["split"] for s in samples}
    assert by_item == {"p0_0": "train", "p1_0": "test", "p2_0": "val"}
    assert {s["split"] for s in samples} == {"train", "test", "val"}


def test_split_source_errors_name_the_item(tmp_path):
    path = mni_png_source(tmp_path / "src", patients=2, per_patient=1)
    text = path.read_text().replace("patient: patient0}", "patient: patient0, split: train}")
    with_rule = text  # an item's split under a {by: ...} rule would be ignored: refused
    path.write_text(with_rule)
    with pytest.raises(BuildError, match=r"item 'p0_0' names its split but 'split' is "
                       r"\{by: patient, \.\.\.\}; use 'split: source'"):  # fmt: skip
        read_source(path)
    path.write_text(text.replace("split: {by: patient, test: 0.25, val: 0.25, seed: 3}",
                                 "split: source"))  # fmt: skip
    with pytest.raises(BuildError, match=r"split is 'source' \(keep the items' splits\) but "
                       r"item 'p1_0' .*has no 'split' field"):  # fmt: skip
        build("perception", path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    path.write_text(text.replace("split: train", "split: 'tr ain'"))
    with pytest.raises(BuildError, match=r"items\[0\]: split 'tr ain' must be letters"):
        read_source(path)
    path.write_text(text.replace("split: {by: patient, test: 0.25, val: 0.25, seed: 3}",
                                 "split: sources"))  # fmt: skip
    with pytest.raises(BuildError, match=r"or 'source' \(each item's own split\), got 'sources'"):
        read_source(path)
