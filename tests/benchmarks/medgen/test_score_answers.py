"""``medibench score`` on VQA and generation answers: the official inference's JSONL (with an
empty answer and a generated image) and medibench's own ``<sample_id>_<k>.txt`` files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from medibench.cli import app
from medibench.samples import Score

from .answer_data import build_folder, records

runner = CliRunner()


def _scores(path, version="code"):
    rows = map(Score.from_json, path.read_text().splitlines())
    return {s.sample_id: s for s in rows if s.protocol_version == version}


def test_score_official_answer_files(tmp_path):
    folder = build_folder(tmp_path / "MedGEN_data")
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    vqa = records()["vqa.jsonl"][:2]
    answers = [dict(vqa[0], response="B", raw_response="B"), dict(vqa[1], response="  ")]
    (outputs / "qwen_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in answers))
    Image.fromarray(np.full((24, 28, 3), 7, np.uint8)).save(outputs / "made.png")
    gen = dict(
        records()["gen.jsonl"][0], response="The lung nodule grows.", output_image="made.png"
    )
    (outputs / "qwen_gen.jsonl").write_text(json.dumps(gen) + "\n")
    out = tmp_path / "vqa.jsonl"
    res = runner.invoke(
        app,
        ["score", "--dataset", f"medgen:{folder / 'vqa.jsonl'}", "--predictions", str(outputs)]
        + ["--model", "qwen", "--out", str(out)],
    )  # qwen_vqa.jsonl: model "qwen" (the official name without its mission)
    assert res.exit_code == 0, res.output
    got = _scores(out)
    mc = got["medgen-VQA-multiple-choice-1"]
    assert mc.status == "ok" and mc.metrics["task_accuracy"] == 1.0
    empty = got["medgen-VQA-report-generation-2"]  # the code scores it: BLEU 0
    assert empty.status == "ok" and empty.metrics["bleu"] == 0.0
    empty = _scores(out, "1")["medgen-VQA-report-generation-2"]
    assert empty.status == "missing" and "the model's answer is empty" in empty.error
    out = tmp_path / "gen.jsonl"
    res = runner.invoke(
        app,
        ["score", "--dataset", f"medgen:{folder / 'gen.jsonl'}", "--predictions", str(outputs)]
        + ["--model", "qwen_gen", "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    (g,) = _scores(out).values()
    assert g.metrics["text_em"] == 1.0
    gt = np.asarray(Image.open(folder / "images" / "g1_gt.png"), np.float64)
    assert g.metrics["psnr"] == pytest.approx(10 * np.log10(255**2 / np.mean((gt - 7) ** 2)))


def test_score_medibench_text_files(tmp_path):
    folder = build_folder(tmp_path / "MedGEN_data")
    model = tmp_path / "preds" / "my-vlm"
    model.mkdir(parents=True)
    (model / "medgen-VQA-multiple-choice-1_0.txt").write_text("C. Pleural effusion")
    out = tmp_path / "s.jsonl"
    res = runner.invoke(
        app,
        ["score", "--dataset", f"medgen:{folder / 'vqa.jsonl'}", "--predictions"]
        + [str(tmp_path / "preds"), "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    got = _scores(out)
    assert got["medgen-VQA-multiple-choice-1"].metrics["task_accuracy"] == 0.0
    assert got["medgen-VQA-report-generation-2"].status == "missing"
