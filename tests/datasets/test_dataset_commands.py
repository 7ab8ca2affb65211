"""``medibench dataset describe | split | filter | concat``: the values they count and write,
their provenance, and every bad input's error (docs/datasets.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.datasets import DatasetError, load_dataset, read_native
from medibench.datasets._derive import (
    PROVENANCE,
    assign_parts,
    concat_datasets,
    filter_dataset,
    parse_fractions,
    split_dataset,
)
from medibench.datasets._describe import describe_dataset
from tests.datasets.conftest import CLINIC, write_clinic


def _invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def _splits(folder: Path) -> dict[str, str]:
    return {s.sample_id: s.split for s in read_native(folder)}


# --- describe --------------------------------------------------------------------------------


def test_describe_counts_sizes_and_mask_fractions(clinic):
    info = describe_dataset(read_native(clinic), "native:clinic")
    assert info["samples"] == 10
    assert info["counts"]["task"] == {"denoise": 5, "remove-lesion": 5}
    assert info["counts"]["region"] == {"brain": 6, "chest": 2, "liver": 2}
    assert info["counts"]["split"] == {"test": 10} and info["counts"]["modality"] == {"MRI": 10}
    assert "dataset" not in info["counts"]  # no sample is derived
    assert info["patients"] == {"distinct": 5, "samples_without": 0}
    assert info["image_sizes"] == {"8x6": 7, "16x12": 3}
    assert info["targets"] == {"with": 10, "without": 0}
    # fractions 1/6, 1/3, 1/2 x3, 1 x3 (rows filled / height): hand-computed
    masks = info["masks"]
    assert (masks["with"], masks["without"]) == (8, 2)
    assert masks["fraction"] == pytest.approx(
        {"min": 1 / 6, "median": 0.5, "mean": 5 / 8, "max": 1.0}
    )


def test_describe_prints_tables_and_writes_json(clinic, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    res = _invoke("dataset", "describe", f"native:{clinic}", "--json", tmp_path / "d.json")
    assert res.exit_code == 0, res.output
    assert "10 samples, 5 patients (0 samples without one)" in res.output
    for text in ("remove-lesion", "16x12", "0.6250", "0.1667"):
        assert text in res.output
    assert "…" not in res.output
    saved = json.loads((tmp_path / "d.json").read_text())
    assert saved["image_sizes"] == {"8x6": 7, "16x12": 3} and saved["samples"] == 10


def test_describe_names_an_unreadable_image(clinic):
    (clinic / "img" / "c04.png").write_bytes(b"not a png")
    res = _invoke("dataset", "describe", f"native:{clinic}")
    assert res.exit_code == 2 and "c04.png" in res.output


# --- split -----------------------------------------------------------------------------------


def test_split_by_patient_is_seeded_group_aware_and_pinned(clinic, tmp_path):
    made = split_dataset(
        list(read_native(clinic)), "native:clinic", tmp_path / "s", fractions={"train": 0.6,
        "test": 0.4}, seed=7)  # fmt: skip
    # default_rng(7).permutation(5) = [2, 0, 4, 1, 3]: P2, P0, P4 to train, P1, P3 to test
    assert list(np.random.default_rng(7).permutation(5)) == [2, 0, 4, 1, 3]
    expected = {sid: "test" if p in ("P1", "P3") else "train" for sid, (p, *_) in CLINIC.items()}
    assert _splits(tmp_path / "s") == expected
    assert [s.sample_id for s in read_native(tmp_path / "s")] == list(CLINIC)  # order kept
    patients: dict[str, set[str]] = {}
    for s in read_native(tmp_path / "s"):
        patients.setdefault(s.metadata["patient"], set()).add(s.split)
    assert all(len(v) == 1 for v in patients.values())
    assert made.provenance["by"] == "patient" and made.provenance["seed"] == 7
    assert made.provenance["splits"] == {"test": 4, "train": 6}
    # the same input and seed: the same bytes; another seed: another assignment
    split_dataset(list(read_native(clinic)), "native:clinic", tmp_path / "again",
                  fractions={"train": 0.6, "test": 0.4}, seed=7)  # fmt: skip
    assert (tmp_path / "s" / "samples.jsonl").read_bytes() == (
        tmp_path / "again" / "samples.jsonl"
    ).read_bytes()
    split_dataset(list(read_native(clinic)), "native:clinic", tmp_path / "other",
                  fractions={"train": 0.6, "test": 0.4}, seed=1)  # fmt: skip
    # default_rng(1).permutation(5) = [4, 0, 1, 2, 3]: P4, P0, P1 train; P2, P3 test
    other = _splits(tmp_path / "other")
    assert {sid for sid, v in other.items() if v == "test"} == {"c04", "c05", "c06", "c07"}


def test_split_records_provenance_per_sample_and_in_the_folder(clinic, tmp_path):
    res = _invoke("dataset", "split", f"native:{clinic}", "--by", "patient", "--fractions",
                  "train=0.6,test=0.4", "--seed", "7", "--out", tmp_path / "s")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "10 samples (test 4, train 6)" in res.output
    record = json.loads((tmp_path / "s" / PROVENANCE).read_text())
    assert record["operation"] == "medibench dataset split"
    assert record["datasets"] == [f"native:{clinic}"]
    assert record["fractions"] == {"train": 0.6, "test": 0.4} and record["samples"] == 10
    sample = read_native(tmp_path / "s").get("c03")
    assert sample.metadata["derived_from"] == {"dataset": f"native:{clinic}", "sample_id": "c03"}
    assert sample.metadata["patient"] == "P1" and Path(sample.input).is_file()


def test_split_without_patients_is_by_sample_and_fractions_are_of_groups(tmp_path):
    data = write_clinic(tmp_path / "d", patients=False)
    made = split_dataset(list(read_native(data)), "native:d", tmp_path / "s",
                         fractions={"train": 0.7, "val": 0.1, "test": 0.2}, seed=0)  # fmt: skip
    assert made.provenance["by"] == "sample"
    # default_rng(0).permutation(10) = [4 6 2 7 3 5 9 0 8 1]: 7 train, 1 val, 2 test in order
    ids = sorted(CLINIC)
    order = [ids[i] for i in np.random.default_rng(0).permutation(10)]
    expected = {sid: "train" for sid in order[:7]} | {order[7]: "val"}
    expected |= {sid: "test" for sid in order[8:]}
    assert _splits(tmp_path / "s") == expected


def test_split_by_another_field(clinic, tmp_path):
    split_dataset(list(read_native(clinic)), "native:clinic", tmp_path / "s", by="region",
                  fractions={"a": 0.5, "b": 0.5}, seed=0)  # fmt: skip
    by_region: dict[str, set[str]] = {}
    for s in read_native(tmp_path / "s"):
        by_region.setdefault(s.region, set()).add(s.split)
    assert all(len(v) == 1 for v in by_region.values()) and len(by_region) == 3


def test_assign_parts_rounds_by_largest_remainder_and_fills_every_part():
    groups = [f"g{i}" for i in range(7)]
    parts = assign_parts(groups, {"train": 0.8, "val": 0.1, "test": 0.1}, seed=0)
    counts = {k: list(parts.values()).count(k) for k in ("train", "val", "test")}
    # 5.6, 0.7, 0.7: floors 5, 0, 0; the two left go to the largest remainders (val, test)
    assert counts == {"train": 5, "val": 1, "test": 1}
    three = assign_parts(["a", "b", "c"], {"train": 0.98, "val": 0.01, "test": 0.01}, seed=0)
    assert sorted(three.values()) == ["test", "train", "val"]  # every part gets one
    with pytest.raises(DatasetError, match=r"names 3 parts \(train, val, test\) but there are "
                       "only 2 groups to deal"):  # fmt: skip
        assign_parts(["a", "b"], {"train": 0.9, "val": 0.05, "test": 0.05}, seed=0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("train=0.8,test=0.1", "the fractions sum to 0.9, not 1"),
        ("train=0.8,train=0.2", "split 'train' is given twice"),
        ("train=0.8,test", "expected NAME=FRACTION"),
        ("train=1.2,test=-0.2", "train=1.2 is not in (0, 1]"),
        ("train=x,test=0.2", "'x' is not a number"),
        ("tr ain=0.8,test=0.2", "must be letters, digits and '_'"),
    ],
)
def test_bad_fractions(text, message):
    with pytest.raises(DatasetError) as exc:
        parse_fractions(text)
    assert message in str(exc.value) and text in str(exc.value)


def test_split_errors_name_the_field_and_the_folder(clinic, tmp_path):
    res = _invoke("dataset", "split", f"native:{clinic}", "--by", "ward", "--out", tmp_path / "s")
    assert res.exit_code == 2
    assert "--by ward: no sample has the field 'ward'; fields present: sample_id" in res.output
    assert "metadata.patient" in res.output and "patient" in res.output
    res = _invoke("dataset", "split", f"native:{clinic}", "--fractions", "train=0.5,test=0.4",
                  "--out", tmp_path / "s")  # fmt: skip
    assert res.exit_code == 2 and "the fractions sum to 0.9, not 1" in res.output
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("x")
    res = _invoke("dataset", "split", f"native:{clinic}", "--out", tmp_path / "full")
    assert res.exit_code == 2 and "is not empty; pass --overwrite" in res.output
    res = _invoke("dataset", "split", f"native:{clinic}", "--out", tmp_path / "full",
                  "--overwrite")  # fmt: skip
    assert res.exit_code == 0 and len(read_native(tmp_path / "full")) == 10


def test_split_by_patient_with_samples_lacking_one(tmp_path):
    ids = {**CLINIC, "c10": ("", "denoise", "brain", (6, 8), None)}
    data = write_clinic(tmp_path / "d", ids=ids)
    with pytest.raises(DatasetError, match=r"--by patient: 1 of 11 samples have no patient "
                       r"\(first: sample 'c10'\)"):  # fmt: skip
        split_dataset(list(read_native(data)), "native:d", tmp_path / "s",
                      fractions={"train": 1.0}, seed=0)  # fmt: skip
    assert not (tmp_path / "s").exists()


# --- filter ----------------------------------------------------------------------------------


def test_filter_same_field_is_or_and_fields_are_and(clinic, tmp_path):
    res = _invoke("dataset", "filter", f"native:{clinic}", "--where", "region=liver", "--where",
                  "region=chest", "--where", "task=denoise", "--out", tmp_path / "f")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert read_native(tmp_path / "f").sample_ids() == ["c03", "c07"]
    record = json.loads((tmp_path / "f" / PROVENANCE).read_text())
    assert record["where"] == {"region": ["liver", "chest"], "task": ["denoise"]}
    made = filter_dataset(list(read_native(clinic)), "native:clinic", tmp_path / "p",
                          where=["patient=P4", "metadata.patient=P4"])  # fmt: skip
    assert [s.sample_id for s in made.samples] == ["c08", "c09"]
    assert made.samples[0].metadata["derived_from"]["sample_id"] == "c08"


def test_filter_errors(clinic, tmp_path):
    samples = list(read_native(clinic))
    said = r"region in \{lung\} and task in \{denoise\}; nothing to write"
    with pytest.raises(DatasetError, match=r"no sample of 'native:clinic' \(10 read\) has " + said):
        filter_dataset(
            samples, "native:clinic", tmp_path / "f", where=["region=lung", "task=denoise"]
        )
    with pytest.raises(DatasetError, match="--where 'region': expected FIELD=VALUE"):
        filter_dataset(samples, "native:clinic", tmp_path / "f", where=["region"])
    with pytest.raises(DatasetError, match="no sample has the field 'metadata.ward'"):
        filter_dataset(samples, "native:clinic", tmp_path / "f", where=["metadata.ward=3"])
    res = _invoke("dataset", "filter", f"native:{clinic}", "--out", tmp_path / "f")
    assert res.exit_code == 2 and "needs at least one --where FIELD=VALUE" in res.output
    assert not (tmp_path / "f").exists()


# --- concat ----------------------------------------------------------------------------------


def test_concat_prefixes_clashing_ids_and_records_origins(clinic, tmp_path):
    other = write_clinic(tmp_path / "other", ids={k: CLINIC[k] for k in ("c00", "c01")}
                         | {"x9": CLINIC["c02"]})  # fmt: skip
    res = _invoke("dataset", "concat", f"native:{clinic}", f"native:{other}",
                  "--out", tmp_path / "c")  # fmt: skip
    assert res.exit_code == 0, res.output
    ds = read_native(tmp_path / "c")
    assert ds.sample_ids() == ["clinic-c00", "clinic-c01", *list(CLINIC)[2:],
                               "other-c00", "other-c01", "x9"]  # fmt: skip
    assert ds.get("other-c01").metadata["derived_from"] == {
        "dataset": f"native:{other}", "sample_id": "c01"}  # fmt: skip
    record = json.loads((tmp_path / "c" / PROVENANCE).read_text())
    assert record["renamed"] == 4 and record["samples"] == 13
    assert record["prefixes"] == {f"native:{clinic}": "clinic", f"native:{other}": "other"}
    info = describe_dataset(ds, "native:c")
    assert info["counts"]["dataset"] == {f"native:{clinic}": 10, f"native:{other}": 3}


def test_concat_errors(clinic, tmp_path):
    samples = list(read_native(clinic))
    with pytest.raises(DatasetError, match="needs two datasets or more"):
        concat_datasets([("native:a", "a", samples)], tmp_path / "c")
    with pytest.raises(DatasetError, match="native:a given twice"):
        concat_datasets([("native:a", "a", samples), ("native:a", "a", samples)], tmp_path / "c")
    # two folders of one name: the second prefix is NAME-2
    made = concat_datasets([("native:a", "clinic", samples[:1]),
                            ("native:b", "clinic", samples[:1])], tmp_path / "c")  # fmt: skip
    assert [s.sample_id for s in made.samples] == ["clinic-c00", "clinic-2-c00"]


def test_a_derived_folder_is_read_by_every_command_as_native(clinic, tmp_path):
    split_dataset(list(read_native(clinic)), "native:clinic", tmp_path / "s",
                  fractions={"train": 0.6, "test": 0.4}, seed=7)  # fmt: skip
    test = load_dataset(f"native:{tmp_path / 's'}", split="test")
    assert test.sample_ids() == ["c02", "c03", "c06", "c07"]
    res = _invoke("run", "--dataset", f"native:{tmp_path / 's'}", "--dataset-option",
                  "split=test", "--model", "identity", "--out", tmp_path / "r",
                  "--stage", "generate", "--no-progress")  # fmt: skip
    assert res.exit_code == 0, res.output
    from medibench.runs import RunStore

    with RunStore.open_existing(tmp_path / "r") as store:
        assert sorted(s.sample_id for s in store.samples()) == ["c02", "c03", "c06", "c07"]


def test_concat_refuses_a_prefixed_id_that_is_taken(clinic, tmp_path):
    one = read_native(clinic).get("c00")
    a = [one.model_copy(update={"sample_id": "x"})]
    b = [one.model_copy(update={"sample_id": sid}) for sid in ("x", "b-x")]
    with pytest.raises(DatasetError, match="sample 'b-x' of 'native:b' would be 'b-x', an id "
                       "already taken"):  # fmt: skip
        concat_datasets([("native:a", "a", a), ("native:b", "b", b)], tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_describe_without_masks_or_patients(tmp_path):
    ids = {sid: (p, t, r, size, None) for sid, (p, t, r, size, _) in CLINIC.items()}
    data = write_clinic(tmp_path / "d", ids=ids, patients=False)
    info = describe_dataset(read_native(data), "native:d")
    assert info["masks"] == {"with": 0, "without": 10, "fraction": None}
    assert info["patients"] == {"distinct": 0, "samples_without": 10}
