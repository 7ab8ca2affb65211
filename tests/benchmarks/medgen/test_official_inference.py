"""The official inference's answer files as they are, and the edges ``medgen@code`` scores as
the code at 3450b8e does and ``medgen@1`` corrects (issue 28; issue 27 item 7).

Each edge's ``medgen@code`` value is the official function's, worked out here: NLTK's
``sentence_bleu`` with method1 on whitespace tokens (``util/metrics.py``), and the code's
``canonical_*_text`` / ``compute_task_accuracy`` rules restated in ``_code_reference``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
from PIL import Image
from typer.testing import CliRunner

from medibench.cli import app
from medibench.samples import Score

from .answer_data import build_folder, pixels, records

runner = CliRunner()
EDIT_ID = "medgen:ImageEditing:artifact-removal:000001"


def _official_bleu(hyp: str, ref: str) -> float:
    """The code's BLEU: ``sentence_bleu([ref.split()], hyp.split(), method1)``."""
    return sentence_bleu([ref.split()], hyp.split(), smoothing_function=SmoothingFunction().method1)


def _dataset(root: Path, extra_vqa: list[dict] | None = None) -> Path:
    """answer_data's vqa.jsonl and gen.jsonl, plus edit.jsonl with one editing record."""
    build_folder(root)
    Image.fromarray(pixels(20)).save(root / "images" / "e_in.png")
    Image.fromarray(pixels(21)).save(root / "images" / "e_gt.png")
    edit = {
        "sample_id": EDIT_ID,
        "category": "ImageEdit",
        "paper_task": "artifact-removal",
        "instruction": "Remove the artifact.",
        "input_image": "images/e_in.png",
        "ground_truth_image": "images/e_gt.png",
    }
    (root / "edit.jsonl").write_text(json.dumps(edit) + "\n")
    if extra_vqa:
        with open(root / "vqa.jsonl", "a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in extra_vqa)
    return root


def _write(path: Path, recs: list[dict], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + tail)


def _score(dataset: str, preds: Path, out: Path, *extra: str):
    args = ["score", "--dataset", dataset, "--predictions", str(preds), "--out", str(out)]
    res = runner.invoke(app, [*args, "--no-progress", *extra])
    assert res.exit_code == 0, res.output
    rows = [Score.from_json(line) for line in out.read_text().splitlines()]
    return {(r.model, r.protocol_version, r.sample_id): r for r in rows}, res.output


def _official_layout(tmp_path: Path) -> tuple[Path, Path]:
    data = _dataset(tmp_path / "MedGEN_data")
    inference = tmp_path / "inference_jsonl"
    inference.mkdir()
    vqa = records()["vqa.jsonl"][:2]
    _write(inference / "qwen_vqa.jsonl", [dict(vqa[0], response="B"), dict(vqa[1], response="x")])
    Image.fromarray(np.full((24, 28, 3), 7, np.uint8)).save(inference / "made.png")
    gen = dict(
        records()["gen.jsonl"][0], response="The lung nodule grows.", output_image="made.png"
    )
    _write(inference / "qwen_gpt-image-1_generate.jsonl", [gen])
    edit = json.loads((data / "edit.jsonl").read_text())
    _write(inference / "qwen_gpt-image-1_edit.jsonl", [dict(edit, output_image="made.png")])
    return data, inference


def test_the_official_layout_scores_all_three_formats_with_nothing_else(tmp_path):
    data, inference = _official_layout(tmp_path)
    rows, said = _score(f"medgen:{data}", inference, tmp_path / "s.jsonl")
    assert "loaded the VQA, generation records too" in said
    assert {m for m, _, _ in rows} == {"qwen", "qwen_gpt-image-1"}  # the names minus missions
    mc = rows["qwen", "code", "medgen-VQA-multiple-choice-1"]
    assert mc.status == "ok" and mc.metrics["task_accuracy"] == 1.0
    gen = rows["qwen_gpt-image-1", "code", "medgen-MultimodalGeneration-disease-prediction-1"]
    gt = np.asarray(Image.open(data / "images" / "g1_gt.png"), np.float64)
    expected = 10 * np.log10(255**2 / np.mean((gt - 7) ** 2))
    assert gen.metrics["text_em"] == 1.0 and gen.metrics["psnr"] == pytest.approx(expected)
    edit = rows["qwen_gpt-image-1", "1", EDIT_ID.replace(":", "-")]
    gt = np.asarray(Image.open(data / "images" / "e_gt.png"), np.float64)
    assert edit.metrics["psnr"] == pytest.approx(10 * np.log10(255**2 / np.mean((gt - 7) ** 2)))
    # eval.py scores each file on its own records: the VQA model is not scored on the edit,
    # the image model not on the VQA samples; every model answered its own file: none missing
    assert ("qwen", "code", EDIT_ID.replace(":", "-")) not in rows
    assert sorted({(m, sid.split("-")[1]) for m, _, sid in rows}) == [
        ("qwen", "VQA"),
        ("qwen_gpt-image-1", "ImageEditing"),
        ("qwen_gpt-image-1", "MultimodalGeneration"),
    ]
    assert "0 missing" in said and {r.status for r in rows.values()} == {"ok"}


def test_a_sample_of_its_own_format_a_model_left_out_is_missing(tmp_path):
    data, inference = _official_layout(tmp_path)
    _write(inference / "qwen_vqa.jsonl", [dict(records()["vqa.jsonl"][0], response="B")])
    rows, said = _score(f"medgen:{data}", inference, tmp_path / "s.jsonl", "--protocol", "medgen@1")
    assert "1 missing" in said
    missing = {(m, sid) for (m, _, sid), r in rows.items() if r.status == "missing"}
    assert missing == {("qwen", "medgen-VQA-report-generation-2")}


def test_an_output_in_the_working_folder_is_read_first_as_eval_py_does(tmp_path, monkeypatch):
    data = _dataset(tmp_path / "MedGEN_data")
    preds = tmp_path / "inference_jsonl"
    preds.mkdir()
    edit = json.loads((data / "edit.jsonl").read_text())
    _write(preds / "m_x_edit.jsonl", [dict(edit, output_image="out/e.png")])
    work = tmp_path / "work"
    for folder, image in ((work, pixels(21)), (preds, np.full((24, 28, 3), 7, np.uint8))):
        (folder / "out").mkdir(parents=True)
        Image.fromarray(image).save(folder / "out" / "e.png")
    monkeypatch.chdir(work)  # resolve_image_path: the working folder before anything else
    rows, _ = _score(f"medgen:{data}", preds, tmp_path / "s.jsonl", "--protocol", "medgen@code")
    assert rows["m_x", "code", EDIT_ID.replace(":", "-")].metrics["psnr"] == 100.0  # e_gt.png
    (work / "out" / "e.png").unlink()  # then beside the JSONL, where eval.py does not look
    rows, _ = _score(f"medgen:{data}", preds, tmp_path / "t.jsonl", "--protocol", "medgen@code")
    gt = np.asarray(Image.open(data / "images" / "e_gt.png"), np.float64)
    expected = 10 * np.log10(255**2 / np.mean((gt - 7) ** 2))
    assert rows["m_x", "code", EDIT_ID.replace(":", "-")].metrics["psnr"] == pytest.approx(expected)


def test_answers_for_a_format_not_loaded_name_the_option(tmp_path):
    data, inference = _official_layout(tmp_path)
    rows, said = _score(f"medgen:{data / 'vqa.jsonl'}", inference, tmp_path / "s.jsonl")
    flat = " ".join(said.split())
    assert "qwen_gpt-image-1_edit.jsonl hold image-editing answers" in flat
    assert "--dataset-option formats=[edit,vqa] (or formats=all)" in flat
    assert {sid for _, _, sid in rows} == {
        "medgen-VQA-multiple-choice-1",
        "medgen-VQA-report-generation-2",
    }
    (data / "gen.jsonl").unlink()  # a folder without the generation records
    _, said = _score(f"medgen:{data}", inference, tmp_path / "t.jsonl")
    flat = " ".join(said.split())
    assert "qwen_gpt-image-1_generate.jsonl hold generation answers, but" in flat
    assert "has no gen.jsonl or parquet/multimodal_generation/" in flat


# -- the edges: the code's value under medgen@code, medibench's under medgen@1 --------------
def _qa(sid: str, answer, task: str = "question-answering", **more) -> dict:
    rec = {
        "sample_id": sid,
        "category": "VQA",
        "paper_task": task,
        "instruction": "Answer.",
        "input_image": "images/q3.png",
    }
    if answer is not ...:
        rec["answer"] = answer
    return {**rec, **more}


REPORT_JSON = json.dumps({"FINDINGS": "Clear lungs.", "IMPRESSION": "Normal study."})
EDGES = [
    # (sample id, record, response)
    ("e-empty", _qa("e-empty", "Left side"), ""),
    ("e-blank", _qa("e-blank", "Left side"), "   "),
    ("e-null", _qa("e-null", "Left side"), None),
    ("e-json", _qa("e-json", REPORT_JSON, "report-generation"), REPORT_JSON),
    ("e-letter", _qa("e-letter", "B", "multiple-choice", choice=["Normal", "Pneumonia"]), "B"),
    ("e-int", _qa("e-int", 3, "blank-filling"), "3"),
    ("e-noans", _qa("e-noans", ""), "Liver"),
]


@pytest.fixture
def edges(tmp_path):
    data = _dataset(tmp_path / "MedGEN_data", [r for _, r, _ in EDGES])
    preds = tmp_path / "inference_jsonl"
    preds.mkdir()
    answers = [dict(rec, response=resp) for _, rec, resp in EDGES]
    _write(preds / "m_vqa.jsonl", answers)
    rows, _ = _score(f"medgen:{data / 'vqa.jsonl'}", preds, tmp_path / "s.jsonl")
    return {(v, sid): r for (_, v, sid), r in rows.items()}


@pytest.mark.parametrize("sid", ["e-empty", "e-blank", "e-null"])
def test_an_empty_answer_is_scored_by_the_code_and_failed_by_medgen_1(edges, sid):
    code = edges["code", sid]
    # canonical texts "" and "left side": BLEU 0, EM 0, token F1 0, no entity on either side: 1
    assert code.status == "ok" and _official_bleu("", "Left side") == 0.0
    assert code.metrics["bleu"] == 0.0 and code.metrics["text_em"] == 0.0
    assert code.metrics["text_f1"] == 0.0 and code.metrics["entity_f1"] == 1.0
    fixed = edges["1", sid]
    assert fixed.status == "missing" and "the model's answer is empty" in fixed.error
    assert all(v is None for v in fixed.metrics.values())


def test_a_json_string_report_is_compared_raw_by_the_code_and_by_section_by_medgen_1(edges):
    code, fixed = edges["code", "e-json"], edges["1", "e-json"]
    assert code.metrics["bleu"] == pytest.approx(_official_bleu(REPORT_JSON, REPORT_JSON)) == 1.0
    sections = "FINDINGS: Clear lungs.\nIMPRESSION: Normal study."
    assert fixed.metrics["bleu"] == pytest.approx(_official_bleu(REPORT_JSON, sections))
    assert fixed.metrics["bleu"] < 0.7


def test_a_choice_less_letter_is_right_in_the_code_and_wrong_in_medgen_1(edges):
    # compute_task_accuracy: "b" == "b" (no choice has a letter to map it to)
    assert edges["code", "e-letter"].metrics["task_accuracy"] == 1.0
    fixed = edges["1", "e-letter"]
    assert fixed.metrics["task_accuracy"] == 0.0
    assert any("is not among the choices: wrong" in n for n in fixed.notes)


def test_integer_and_empty_answers_load(edges):
    for v in ("code", "1"):
        assert edges[v, "e-int"].metrics["task_accuracy"] == 1.0  # str(3) == "3"
    code = edges["code", "e-noans"]  # against "": BLEU 0, EM 0, F1 0 (one side has tokens)
    assert (code.metrics["bleu"], code.metrics["text_em"], code.metrics["text_f1"]) == (0, 0, 0)
    fixed = edges["1", "e-noans"]
    assert fixed.metrics["bleu"] is None
    assert fixed.reasons["bleu"] == "the sample has no reference text"


def test_an_absolute_input_path_loads(tmp_path):
    data = _dataset(tmp_path / "MedGEN_data")
    rec = _qa("abs", "Liver", input_image=str((data / "images" / "q1.png").absolute()))
    with open(data / "vqa.jsonl", "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    from medibench.datasets import load_dataset

    ds = load_dataset(f"medgen:{data / 'vqa.jsonl'}")
    assert ds.get("abs").input == str((data / "images" / "q1.png").absolute())


def test_identical_images_psnr_100_in_the_code_inf_in_medgen_1(tmp_path):
    data = _dataset(tmp_path / "MedGEN_data")
    preds = tmp_path / "inference_jsonl"
    preds.mkdir()
    edit = json.loads((data / "edit.jsonl").read_text())
    truth = str(data / "images" / "e_gt.png")
    _write(preds / "m_x_edit.jsonl", [dict(edit, output_image=truth)])
    rows, _ = _score(f"medgen:{data}", preds, tmp_path / "s.jsonl")
    sid = EDIT_ID.replace(":", "-")
    assert rows["m_x", "code", sid].metrics["psnr"] == 100.0
    assert rows["m_x", "1", sid].metrics["psnr"] == np.inf


# -- issue 27 item 7: damage in an answer file fails only its sample -----------------------
def test_a_cut_off_line_and_wrong_types_fail_only_their_samples(tmp_path):
    data = _dataset(tmp_path / "MedGEN_data", [_qa("t-int", "B"), _qa("t-list", "B")])
    preds = tmp_path / "inference_jsonl"
    preds.mkdir()
    vqa = records()["vqa.jsonl"]
    good = [dict(vqa[0], response="B"), _qa("t-int", "B", response=42)]
    good.append(_qa("t-list", "B", response=["B"]))
    cut = json.dumps(dict(vqa[1], response="FINDINGS: clear"))[:-25]  # a killed inference
    _write(preds / "m_vqa.jsonl", good, tail=cut)
    rows, said = _score(f"medgen:{data / 'vqa.jsonl'}", preds, tmp_path / "s.jsonl")
    assert rows["m", "code", "medgen-VQA-multiple-choice-1"].metrics["task_accuracy"] == 1.0
    broken = rows["m", "code", "medgen-VQA-report-generation-2"]
    assert (
        broken.status == "error" and "m_vqa.jsonl line 4: not valid JSON (cut off" in broken.error
    )
    for sid, shown in (("t-int", "int 42"), ("t-list", 'list ["B"]')):
        row = rows["m", "1", sid]
        assert row.status == "error" and f"response is {shown}, not text" in row.error
        assert "m_vqa.jsonl line" in row.error


def test_a_cut_off_line_without_a_legible_id_is_named_by_file_and_line(tmp_path):
    data = _dataset(tmp_path / "MedGEN_data")
    preds = tmp_path / "inference_jsonl"
    preds.mkdir()
    _write(preds / "m_vqa.jsonl", [dict(records()["vqa.jsonl"][0], response="B")], '{"categ')
    rows, said = _score(f"medgen:{data / 'vqa.jsonl'}", preds, tmp_path / "s.jsonl")
    assert "m_vqa.jsonl line 2: not valid JSON (cut off" in " ".join(said.split())
    assert rows["m", "code", "medgen-VQA-multiple-choice-1"].status == "ok"
