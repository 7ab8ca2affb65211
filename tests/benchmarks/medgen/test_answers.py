"""MedGEN-Bench's VQA and generation records in the three layouts, their text tier, answering
models, a compositional run end to end against a scripted server, and every bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from medibench.benchmarks.medgen.dataset import read_medgen
from medibench.cli import app
from medibench.datasets import DatasetError, load_dataset
from medibench.metrics.text import bleu
from medibench.models._spec import parse_model_spec
from medibench.models.compose import CompositionalSystem, parse_plan
from medibench.models.vlm import AnswerError, contact_sheet
from medibench.registry import UnknownNameError
from medibench.runs import RunConfig, RunStore, run
from medibench.runs._answers import read_answers

from .answer_data import (
    CHOICES,
    EDITED,
    FakeOpenAI,
    build_folder,
    build_release,
    code_scores,
    pixels,
)

runner = CliRunner()


@pytest.fixture
def folder(tmp_path):
    return build_folder(tmp_path / "MedGEN_data")


def test_vqa_records_from_the_prepared_folder(folder):
    ds = load_dataset(f"medgen:{folder / 'vqa.jsonl'}")
    assert ds.sample_ids() == ["medgen-VQA-multiple-choice-1", "medgen-VQA-report-generation-2"]
    mc, report = ds
    assert mc.metadata["choices"] == CHOICES and mc.metadata["format"] == "VQA"
    assert mc.metadata["expected"] == {
        "text": "B. Pneumonia",
        "sections": None,
        "images": [],
        "raw": "B. Pneumonia",
    }
    assert mc.target is None and mc.task == "multiple-choice"
    # multi-image input kept as a list, in order
    assert [p.rsplit("/", 1)[1] for p in report.metadata["input_images"]] == [
        "q2a.png",
        "q2b.png",
        "q2c.png",
    ]
    # report sections: the unknown header is kept and named
    assert report.metadata["expected"]["sections"]["NOTE"] == "x"
    assert report.metadata["unknown_sections"] == ["NOTE"]
    assert report.description == (
        "FINDINGS: Small left pleural effusion.\nIMPRESSION: Effusion.\nNOTE: x"
    )
    assert report.metadata["subtask"] == "chest"
    problems = "\n".join(ds.problems)
    assert "header(s) NOTE are not among the known ones" in problems and "kept" in problems
    # an answer record with neither text nor image is skipped with that reason
    assert "medgen:VQA:question-answering:3" in problems
    assert "has neither an answer nor a ground-truth image; skipped" in problems


def test_generation_records_and_all_formats(folder):
    gen = load_dataset(f"medgen:{folder / 'gen.jsonl'}")
    (s,) = gen
    assert s.metadata["format"] == "MultimodalGeneration" and s.target.endswith("g1_gt.png")
    assert s.metadata["expected"]["text"] == "The lung nodule grows."
    both = read_medgen(folder, formats=("vqa", "gen"))
    assert [x.metadata["format"] for x in both] == ["VQA", "VQA", "MultimodalGeneration"]
    with pytest.raises(ValueError, match="unknown MedGEN-Bench format"):
        read_medgen(folder, formats=("vqa", "pictures"))
    with pytest.raises(DatasetError, match="none of the MedGEN-Bench files"):
        read_medgen(folder, formats="edit")


def test_parquet_release_gives_the_same_records(tmp_path):
    release = build_release(tmp_path / "release")
    ds = load_dataset(f"medgen:{release / 'parquet' / 'vqa'}")
    mc, report = ds
    assert mc.sample_id == "medgen-vqa-train-00000-of-00001-000000"
    assert mc.metadata["choices"] == CHOICES
    assert report.metadata["expected"]["sections"]["FINDINGS"] == "Small left pleural effusion."
    assert len(report.metadata["input_images"]) == 2
    np.testing.assert_array_equal(np.asarray(Image.open(mc.input)), pixels(0))
    everything = read_medgen(release, formats="all")
    assert [s.metadata["format"] for s in everything] == [
        "ImageEditing",
        "VQA",
        "VQA",
        "MultimodalGeneration",
    ]


def test_table_iv_view_keeps_its_contact_sheet(folder):
    recs = [json.loads(x) for x in (folder / "vqa.jsonl").read_text().splitlines()]
    sheet = contact_sheet([pixels(1), pixels(2), pixels(3)], cell_size=128)
    Image.fromarray(sheet).save(folder / "images" / "sheet.jpg")
    recs[1]["input_image"] = "images/sheet.jpg"
    (folder / "vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    report = load_dataset(f"medgen:{folder / 'vqa.jsonl'}").get("medgen-VQA-report-generation-2")
    assert report.metadata["contact_sheet"].endswith("sheet.jpg")
    assert len(report.metadata["input_images"]) == 3


def test_contact_sheet_layout_is_the_official_one():
    ims = [np.full((100, 50, 3), 10 * (i + 1), np.uint8) for i in range(4)]
    sheet = contact_sheet(ims, cell_size=128)
    # 4 images: min(3, ceil(sqrt 4)) = 2 columns, 2 rows of 128 + 44 label pixels
    assert sheet.shape == (2 * (128 + 44), 2 * 128, 3)
    assert tuple(sheet[40, 120]) == (0x20, 0x20, 0x20)  # the label band, right of the text
    # the 100x50 image fits unscaled, centred: x from (128 - 50) // 2, y from 44 + 14
    assert tuple(sheet[44 + 14, 39]) == (10, 10, 10) and tuple(sheet[44 + 14, 38]) == (
        255,
        255,
        255,
    )
    assert tuple(sheet[172 + 44 + 14, 128 + 39]) == (40, 40, 40)  # the 4th image
    with pytest.raises(ValueError, match="two or more"):
        contact_sheet(ims[:1])


def test_plan_parsing():
    assert parse_plan('```json\n{"output_text": "t", "edit_prompt": " grow it "}\n```') == (
        "t",
        "grow it",
    )
    with pytest.raises(AnswerError, match="non-empty 'edit_prompt'"):
        parse_plan("I would rather not.")


def test_a_compositional_spec_naming_an_unknown_model(monkeypatch, folder, tmp_path):
    with pytest.raises(UnknownNameError, match="unknown VLM 'gpt-chat'.*compositional spec"):
        CompositionalSystem("gpt-chat:gpt-4o + identity")
    with pytest.raises(UnknownNameError, match="unknown VLM 'nomodule.nowhere:make'"):
        CompositionalSystem("nomodule.nowhere:make + identity")
    with pytest.raises(UnknownNameError, match="unknown model 'paint-bot'.*the editor part"):
        CompositionalSystem(f"{__name__}:make_fixed + paint-bot:v1")
    with pytest.raises(ValueError, match="must be 'VLM \\+ EDITOR'"):
        CompositionalSystem("openai-chat:gpt-4o + identity + identity")
    res = runner.invoke(
        app,
        [
            "run",
            "--dataset",
            f"medgen:{folder / 'vqa.jsonl'}",
            "--model",
            "openai-chat:gpt-4o + openai-imag:gpt-image-1",
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
        ],
    )
    assert res.exit_code != 0 and "unknown model 'openai-imag'" in res.output


def _vlm(answers):
    def answer(text, n_images):
        if "Reply with one JSON object" in text:
            return json.dumps({"output_text": "The lung nodule grows.", "edit_prompt": "grow it"})
        for key, said in answers.items():
            if key in text:
                return said
        return "no idea"

    return answer


def _run(folder, file, tmp_path, url, out="run"):
    config = RunConfig(
        dataset=f"medgen:{folder / file}",
        models=("openai-chat:gpt-4o + openai-image:gpt-image-1",),
        out=tmp_path / out,
        model_options=(
            f"vlm_options={{base_url: {url}, api_key_required: false, max_images: 1}}",
            f"editor_options={{base_url: {url}}}",
        ),
    )
    return run(config, progress=False)


def test_compositional_run_end_to_end(monkeypatch, folder, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    said = {"What does": "b", "radiology report": "Left pleural effusion. IMPRESSION: effusion."}
    with FakeOpenAI(_vlm(said)) as server:
        with _run(folder, "vqa.jsonl", tmp_path, server.url) as store:
            scores = {s.sample_id: s for s in code_scores(store)}
            answers = read_answers(store)
        with _run(folder, "gen.jsonl", tmp_path, server.url, "gen") as store:
            gen_scores = code_scores(store)
            gen_answers = read_answers(store)
        # the VQA samples: the VLM alone, the 3-image report shown as one contact sheet
        chats = [r for r in server.requests if r["path"] == "/v1/chat/completions"]
        assert [r["images"] for r in chats] == [1, 1, 1]
        edits = [r for r in server.requests if r["path"] == "/v1/images/edits"]
        assert [e["prompt"] for e in edits] == ["grow it"]
        for proto in ("medgen-checklist@code", "medgen-checklist@code-nogt"):
            for where in ("run", "gen"):
                res = runner.invoke(
                    app,
                    ["judge", str(tmp_path / where), "--judge-model", "j", "--base-url"]
                    + [server.url, "--protocol", proto],
                )
                assert res.exit_code == 0, res.output
        judged = len(server.requests)
        res = runner.invoke(
            app,
            ["judge", str(tmp_path / "run"), "--judge-model", "j", "--base-url", server.url]
            + ["--protocol", "medgen-checklist@code"],
        )
        assert res.exit_code == 0 and len(server.requests) == judged  # cached: no new call
    mc = scores["medgen-VQA-multiple-choice-1"]
    assert mc.metrics["task_accuracy"] == 1.0 and mc.metrics["text_em"] == 1.0
    assert mc.metrics["bleu"] == pytest.approx(bleu("b. pneumonia", "b. pneumonia"))
    assert mc.notes[0] == "format=VQA task=multiple-choice subtask="
    report = scores["medgen-VQA-report-generation-2"]
    assert report.metrics["task_accuracy"] is None
    ref = "FINDINGS: Small left pleural effusion.\nIMPRESSION: Effusion.\nNOTE: x"
    assert report.metrics["bleu"] == pytest.approx(
        bleu("Left pleural effusion. IMPRESSION: effusion.", ref)
    )
    assert report.metrics["entity_recall"] == 1.0  # pleura, pleural effusion
    assert "MEDIBENCH_BERTSCORE_MODEL" in report.reasons["bertscore"]
    key = ("gpt-4o+gpt-image-1", "medgen-VQA-report-generation-2", 0)
    assert answers[key]["contact_sheet"] == 1 and answers[key]["images_shown"] == 3
    (g,) = gen_scores
    (row,) = gen_answers.values()
    assert [c["role"] for c in row["calls"]] == ["vlm", "editor"]
    assert row["calls"][1]["instruction"] == "grow it" and row["text"] == "The lung nodule grows."
    assert g.metrics["text_em"] == 1.0 and g.metrics["psnr"] is not None
    gt = np.asarray(Image.open(folder / "images" / "g1_gt.png").convert("RGB"), np.float64)
    mse = np.mean((gt - EDITED) ** 2)
    assert g.metrics["psnr"] == pytest.approx(10 * math.log10(255**2 / mse))
    assert mc.metrics["overall"] is None  # scores read before judging
    # the judge filled both views on the 1-10 scale (all or nothing)
    with RunStore.open_existing(tmp_path / "gen") as store:
        (judged_g,) = code_scores(store)
    assert judged_g.metrics["overall"] == 8.0 and judged_g.metrics["overall_nogt"] == 8.0
    with RunStore.open_existing(tmp_path / "run") as store:
        judged_mc = {s.sample_id: s for s in code_scores(store)}["medgen-VQA-multiple-choice-1"]
    assert judged_mc.metrics["anatomical_accuracy"] == 7.0
    assert judged_mc.metrics["overall"] == 8.0 and judged_mc.metrics["overall_nogt"] == 8.0


class _Fixed:
    """A VLM that always says the same thing."""

    def __init__(self, text: str) -> None:
        self.name = f"fixed-{len(text)}"
        self.text = text

    def answer(self, images, prompt, *, seed):
        return self.text


def make_fixed(text: str = "") -> _Fixed:
    return _Fixed(text)


def test_empty_answer_is_a_failed_prediction_and_off_choice_is_wrong(folder, tmp_path):
    config = RunConfig(
        dataset=f"medgen:{folder / 'vqa.jsonl'}",
        models=(f"{__name__}:make_fixed", f"{__name__}:make_fixed"),
        model_options=(),
        out=tmp_path / "run",
    )
    config = RunConfig(
        dataset=config.dataset, models=(f"{__name__}:make_fixed",), out=tmp_path / "run"
    )
    with run(config, progress=False) as store:
        preds = store.predictions()
        scores = code_scores(store)
    assert {p.status for p in preds} == {"error"}
    assert all(
        "answer is empty (a failed prediction, not a wrong answer)" in p.error for p in preds
    )
    assert {s.status for s in scores} == {"missing"}
    off = RunConfig(
        dataset=config.dataset,
        models=(f"{__name__}:make_fixed",),
        model_options=("text=D. Tuberculosis",),
        out=tmp_path / "off",
    )
    with run(off, progress=False) as store:
        rows = {(s.protocol_version, s.sample_id): s for s in store.scores("medgen")}
    mc = rows["1", "medgen-VQA-multiple-choice-1"]  # medgen@1 names the choice-less answer
    assert mc.status == "ok" and mc.metrics["task_accuracy"] == 0.0
    assert "'D. Tuberculosis' is not among the choices: wrong" in mc.notes[1]
    code = rows["code", "medgen-VQA-multiple-choice-1"]  # the code compares its forms: wrong too
    assert code.metrics["task_accuracy"] == 0.0 and len(code.notes) == 1


def test_bertscore_model_folder_that_is_not_there(monkeypatch, folder, tmp_path):
    monkeypatch.setenv("MEDIBENCH_BERTSCORE_MODEL", str(tmp_path / "pubmedbert"))
    config = RunConfig(
        dataset=f"medgen:{folder / 'vqa.jsonl'}",
        models=(f"{__name__}:make_fixed",),
        model_options=("text=B",),
        out=tmp_path / "run",
    )
    with run(config, progress=False) as store:
        mc = {s.sample_id: s for s in code_scores(store)}["medgen-VQA-multiple-choice-1"]
    assert (
        f"BERTScore model file {tmp_path / 'pubmedbert'} does not exist"
        in (mc.reasons["bertscore"])
    )


def test_registered_answering_models_build_from_specs():
    options = {"base_url": "http://127.0.0.1:9", "api_key_required": False, "max_images": 1}
    vlm = parse_model_spec("openai-chat:m", options).load()
    assert vlm.name == "m" and vlm.max_images == 1 and callable(vlm.answer)
    spec = parse_model_spec("openai-chat:m + identity", {"vlm_options": options})
    system = spec.load()
    assert spec.model == "compose" and system.name == "m+identity" and system.max_images == 1
