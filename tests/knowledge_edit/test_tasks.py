"""Task readers (SLAKE, VQA-RAD: official layouts and Parquet copies), request building,
validation, the sequential order and the synthetic task set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medibench.io import encode_image, read_image
from medibench.knowledge_edit import (
    TaskError,
    build_requests,
    read_slake,
    read_taskset,
    read_vqarad,
    synthetic_taskset,
    write_taskset,
)
from medibench.knowledge_edit._build import VQARow


def _jpg(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_image(np.full((8, 8, 3), value, np.uint8), ".png"))


def _slake(root: Path) -> Path:
    base = root / "Slake1.0"
    records = [
        {
            "qid": 1,
            "img_name": "xmlab1/source.jpg",
            "question": "Which organ is abnormal?",
            "answer": "Lung",
            "q_lang": "en",
            "modality": "CT",
            "location": "Chest",
            "answer_type": "OPEN",
            "content_type": "Organ",
            "base_type": "vqa",
        },
        {
            "qid": 2,
            "img_name": "xmlab1/source.jpg",
            "question": "哪个器官异常？",
            "answer": "肺",
            "q_lang": "zh",
            "modality": "CT",
            "location": "Chest",
        },
        {
            "qid": 3,
            "img_name": "xmlab2/source.jpg",
            "question": "Which organ is abnormal?",
            "answer": "Lung",
            "q_lang": "en",
            "modality": "CT",
            "location": "Chest",
        },
        {
            "qid": 4,
            "img_name": "xmlab3/source.jpg",
            "question": "Which organ is abnormal?",
            "answer": "Liver",
            "q_lang": "en",
            "modality": "MRI",
            "location": "Abdomen",
        },
        {
            "qid": 5,
            "img_name": "xmlab1/source.jpg",
            "question": "Is this a CT image?",
            "answer": "Yes",
            "q_lang": "en",
            "modality": "CT",
            "location": "Chest",
        },
    ]
    base.mkdir(parents=True)
    (base / "test.json").write_text(json.dumps(records, ensure_ascii=False))
    for i in (1, 2, 3):
        _jpg(base / "imgs" / f"xmlab{i}" / "source.jpg", 40 * i)
    return root


def test_slake_official_english_filter_and_language_field(tmp_path):
    root = _slake(tmp_path / "slake")
    images = tmp_path / "ts" / "images"
    rows = read_slake(root, images, split="test")
    assert [r.qid for r in rows] == ["1", "3", "4", "5"]
    assert {r.language for r in rows} == {"en"}
    every = read_slake(root, images, split="test", language="all")
    assert [r.language for r in every] == ["en", "zh", "en", "en", "en"]
    first = rows[0]
    assert (first.modality, first.organ, first.answer) == ("CT", "Chest", "Lung")
    stored = read_image(tmp_path / "ts" / first.image, mode="rgb")
    assert int(stored[0, 0, 0]) == 40


def test_slake_missing_image_names_the_question(tmp_path):
    root = _slake(tmp_path / "slake")
    (root / "Slake1.0" / "imgs" / "xmlab3" / "source.jpg").unlink()
    with pytest.raises(
        TaskError, match=r"test\.json row 3: question 4 .*xmlab3/source\.jpg is missing"
    ):
        read_slake(root, tmp_path / "ts" / "images")


def test_empty_gold_answer_names_the_row(tmp_path):
    root = _slake(tmp_path / "slake")
    path = root / "Slake1.0" / "test.json"
    records = json.loads(path.read_text())
    records[2]["answer"] = "  "
    path.write_text(json.dumps(records))
    with pytest.raises(TaskError, match=r"test\.json row 2: question 3 .* empty gold answer"):
        read_slake(root, tmp_path / "ts" / "images")


def _vqarad(root: Path) -> Path:
    records = [
        {
            "qid": "a1",
            "phrase_type": "test_freeform",
            "qid_linked_id": "L1",
            "image_name": "synpic1.jpg",
            "image_organ": "CHEST",
            "question": "Is there a mass?",
            "question_rephrase": "NULL",
            "answer": "yes",
            "answer_type": "CLOSED",
            "question_type": "PRES",
        },
        {
            "qid": "a2",
            "phrase_type": "test_para",
            "qid_linked_id": "L1",
            "image_name": "synpic1.jpg",
            "image_organ": "CHEST",
            "question": "Is a mass present?",
            "answer": "yes",
            "answer_type": "CLOSED",
            "question_type": "PRES",
        },
        {
            "qid": "a3",
            "phrase_type": "freeform",
            "qid_linked_id": "L2",
            "image_name": "synpic2.jpg",
            "image_organ": "HEAD",
            "question": "Is there a mass?",
            "answer": "no",
        },
    ]
    root.mkdir(parents=True)
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(records))
    _jpg(root / "VQA_RAD Image Folder" / "synpic1.jpg", 10)
    _jpg(root / "VQA_RAD Image Folder" / "synpic2.jpg", 20)
    return root


def test_vqarad_official_split_and_rephrasings(tmp_path):
    root = _vqarad(tmp_path / "rad")
    rows = read_vqarad(root, tmp_path / "ts" / "images", split="test")
    assert [r.qid for r in rows] == ["a1", "a2"]
    assert rows[0].rephrases == ("Is a mass present?",)  # the linked para question
    assert rows[1].rephrases == ()
    assert rows[0].modality == "CHEST"
    train = read_vqarad(root, tmp_path / "ts" / "images", split="train")
    assert [r.qid for r in train] == ["a3"]
    requests = build_requests(rows, seed=0)
    first = next(r for r in requests if r.edit_id == "vqa-rad-a1")
    t2 = [p for p in first.probes if p.task_type == "T2"]
    assert [(p.question, p.metadata["rephrase"]) for p in t2] == [("Is a mass present?", "dataset")]


def _parquet(folder: Path, rows: list[dict]) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "test-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(rows[:1]), folder / "train-00000-of-00001.parquet")


def test_parquet_copies(tmp_path):
    png = encode_image(np.full((8, 8, 3), 99, np.uint8), ".png")
    _parquet(
        tmp_path / "rad" / "data",
        [
            {
                "image": {"bytes": png, "path": None},
                "question": "Is there a mass?",
                "answer": "yes",
            },
            {"image": {"bytes": png, "path": None}, "question": "Where is it?", "answer": "lung"},
        ],
    )
    rows = read_vqarad(tmp_path / "rad", tmp_path / "ts" / "images", split="test")
    assert [(r.question, r.answer) for r in rows] == [
        ("Is there a mass?", "yes"),
        ("Where is it?", "lung"),
    ]
    assert rows[0].image == rows[1].image  # content-addressed: one file
    assert int(read_image(tmp_path / "ts" / rows[0].image)[0, 0, 0]) == 99
    assert "test-00000-of-00001.parquet row 1" in rows[1].where


def test_parquet_bad_rows(tmp_path):
    _parquet(
        tmp_path / "slake" / "data",
        [
            {
                "img_name": "xmlab9/source.jpg",
                "question": "Which organ?",
                "answer": "Lung",
                "q_lang": "en",
            },
        ],
    )
    with pytest.raises(TaskError, match=r"row 0: question .*'Which organ\?'.* is missing"):
        read_slake(tmp_path / "slake", tmp_path / "ts" / "images")
    _parquet(
        tmp_path / "empty" / "data",
        [
            {"image": {"bytes": b"x", "path": None}, "question": "Which organ?", "answer": ""},
        ],
    )
    with pytest.raises(TaskError, match="row 0: question .* empty gold answer"):
        read_vqarad(tmp_path / "empty", tmp_path / "ts" / "images")


def _row(qid, image, question, answer, modality="CT") -> VQARow:
    return VQARow("slake", qid, image, question, answer, f"file row {qid}", modality=modality)


def test_probe_relations_on_hand_made_rows():
    rows = [
        _row("1", "i1", "Which organ is abnormal?", "lung"),
        _row("2", "i2", "Which organ is abnormal?", "lung"),  # T1 G (same modality, same answer)
        _row("3", "i3", "which organ is abnormal", "lung", "MRI"),  # T3 G
        _row("4", "i4", "Which organ is abnormal?", "liver", "MRI"),  # T3 L
        _row("5", "i1", "Where is the lesion?", "lung"),  # T4 G (same image, answer = target)
        _row("6", "i1", "Is this a CT?", "yes"),  # T4 L
        _row("7", "i5", "What modality is this?", "MRI"),  # unrelated: T0 L
    ]
    (req,) = [r for r in build_requests(rows, seed=0, n_unrelated=5) if r.edit_id == "slake-1"]
    got = {(p.task_type, p.kind, p.metadata.get("qid")) for p in req.probes}
    assert ("T0", "reliability", "1") in got
    assert ("T1", "generality", "2") in got
    assert ("T3", "generality", "3") in got and ("T3", "locality", "4") in got
    assert ("T4", "generality", "5") in got and ("T4", "locality", "6") in got
    assert ("T0", "locality", "7") in got
    assert not any(p.task_type == "T5" for p in req.probes)  # no follow-up images here
    t2 = [p for p in req.probes if p.task_type == "T2"]
    assert t2 and all(p.metadata["rephrase"] == "template" for p in t2)
    assert {p.answer for p in req.probes if p.kind != "locality"} == {"lung"}


def test_build_refuses_an_empty_gold_answer():
    with pytest.raises(TaskError, match=r"file row 2: question 2 .* empty gold answer"):
        build_requests([_row("1", "i1", "q?", "a"), _row("2", "i2", "q?", "")])


def test_sequential_order_is_seeded_and_written(tmp_path):
    rows = [_row(str(i), f"i{i}", f"question {i}?", "a") for i in range(20)]
    a, b = build_requests(rows, seed=5), build_requests(list(reversed(rows)), seed=5)
    assert [r.edit_id for r in a] == [r.edit_id for r in b]
    assert [r.order for r in a] == list(range(20))
    assert [r.edit_id for r in build_requests(rows, seed=6)] != [r.edit_id for r in a]


def test_synthetic_taskset_is_byte_reproducible_and_complete(tmp_path):
    one = synthetic_taskset(tmp_path / "a", 6, seed=1)
    two = synthetic_taskset(tmp_path / "b", 6, seed=1)
    assert (tmp_path / "a" / "tasks.jsonl").read_bytes() == (
        tmp_path / "b" / "tasks.jsonl"
    ).read_bytes()
    for r in one.requests:
        assert (tmp_path / "a" / r.image).read_bytes() == (tmp_path / "b" / r.image).read_bytes()
    assert two.manifest["n_edits"] == 6
    types = {p.task_type for r in one.requests for p in r.probes}
    assert types == {"T0", "T1", "T2", "T3", "T4", "T5"}
    back = read_taskset(tmp_path / "a")
    assert [r.edit_id for r in back.requests] == [r.edit_id for r in one.requests]
    assert [r.order for r in back.requests] == list(range(6))
    for r in back.requests:  # the answers are the scene's truth
        attr = r.metadata["attribute"]
        assert (
            r.target
            in {
                "count": ("one", "two", "three"),
                "side": ("left", "right"),
                "colour": ("red", "green", "blue"),
            }[attr]
        )


def test_taskset_with_a_missing_image_is_refused(tmp_path):
    ts = synthetic_taskset(tmp_path / "a", 2, seed=0)
    probe = ts.requests[0].probes[1]
    (tmp_path / "a" / probe.image).unlink()
    with pytest.raises(
        TaskError, match=r"tasks\.jsonl line \d: question .*: image .* is missing"
    ):
        read_taskset(tmp_path / "a")


def test_write_refuses_an_empty_target(tmp_path):
    import dataclasses

    ts = synthetic_taskset(tmp_path / "a", 2, seed=0)
    bad = dataclasses.replace(ts.requests[0], target="")
    with pytest.raises(TaskError, match="empty gold answer"):
        write_taskset(tmp_path / "a", [bad, ts.requests[1]], sources=["synthetic"], seed=0)
