"""Unified models through module:callable, a VLM on generation samples, BERTScore inside
medgen@code, the judge's views and scales, and the by-format summary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.judges import load_judge
from medibench.judges._parsing import parse_answer
from medibench.metrics.text import BERTScore
from medibench.models.vlm import GeneratedAnswer
from medibench.runs import RunConfig, run
from medibench.runs._answers import read_answers

from .answer_data import build_folder, code_scores, judge_reply

runner = CliRunner()


class Unified:
    """A unified model: text and an image in one call."""

    name = "unified"

    def generate(self, images, prompt, *, seed, want_image):
        image = np.full_like(images[0], 50) if want_image else None
        call = {"role": "unified", "model": self.name, "prompt": prompt}
        return GeneratedAnswer("The lung nodule grows.", image, (call,))


class TextOnly:
    name = "text-only"

    def answer(self, images, prompt, *, seed):
        return "The lung nodule grows."


def make_unified() -> Unified:
    return Unified()


def make_text_only() -> TextOnly:
    return TextOnly()


@pytest.fixture
def folder(tmp_path):
    return build_folder(tmp_path / "data")


def _go(folder: Path, file: str, model: str, out: Path):
    config = RunConfig(dataset=f"medgen:{folder / file}", models=(model,), out=out)
    return run(config, progress=False)


def test_unified_model_and_a_text_only_vlm_on_generation(folder, tmp_path):
    with _go(folder, "gen.jsonl", f"{__name__}:make_unified", tmp_path / "u") as store:
        (score,) = code_scores(store)
        (row,) = read_answers(store).values()
    assert row["calls"] == [{"role": "unified", "model": "unified", "prompt": row["prompt"]}]
    assert row["image_path"].endswith("_0.png") and score.metrics["psnr"] is not None
    with _go(folder, "gen.jsonl", f"{__name__}:make_text_only", tmp_path / "t") as store:
        (score,) = code_scores(store)
    assert score.status == "ok" and score.metrics["text_em"] == 1.0
    assert score.metrics["psnr"] is None and score.reasons["psnr"] == "the model made no image"


def test_bertscore_inside_medgen_code(monkeypatch, folder, tmp_path):
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    model_dir = tmp_path / "tiny-pubmedbert"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "lung", "nodule", "grows", "."]
    model_dir.mkdir()
    (model_dir / "vocab.txt").write_text("\n".join(words) + "\n")
    config = transformers.BertConfig(
        vocab_size=len(words),
        hidden_size=8,
        num_hidden_layers=12,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=32,
    )
    transformers.BertModel(config).save_pretrained(model_dir)
    tok = transformers.BertTokenizer(str(model_dir / "vocab.txt"), model_max_length=32)
    tok.save_pretrained(model_dir)
    monkeypatch.setenv("MEDIBENCH_BERTSCORE_MODEL", str(model_dir))
    with _go(folder, "gen.jsonl", f"{__name__}:make_text_only", tmp_path / "b") as store:
        (score,) = code_scores(store)
    text = "The lung nodule grows."
    assert score.metrics["bertscore"] == pytest.approx(BERTScore(model_dir)(text, text))
    assert score.metrics["bertscore_pass"] == float(score.metrics["bertscore"] >= 0.9)


def test_judge_views_and_scales(folder, tmp_path):
    (mc, report) = load_dataset(f"medgen:{folder / 'vqa.jsonl'}")
    answer = tmp_path / "a_0.txt"
    answer.write_text("b")
    judge = load_judge("medgen-checklist@code")
    roles = judge.images(mc, answer)
    assert [r for r, _ in roles] == ["input", "answer"]
    messages, _ = judge.messages(
        mc, [p for _, p in roles], structured=False, max_side=512, oversize="resize"
    )
    text = messages[0]["content"][-1]["text"]
    assert "Ground-truth answer:\nB. Pneumonia" in text and "The model's text answer:\nb" in text
    assert "visual question answering" in text and "to 10 (excellent)" in text
    nogt = load_judge("medgen-checklist@code-nogt")
    assert "reference" not in nogt.texts(mc)
    messages, _ = nogt.messages(
        mc, [p for _, p in nogt.images(mc, answer)], structured=False, max_side=512,
        oversize="resize",
    )  # fmt: skip
    assert "Ground-truth answer" not in messages[0]["content"][-1]["text"]
    paper = load_judge("medgen-checklist@paper")
    messages, _ = paper.messages(
        mc, [p for _, p in roles], structured=False, max_side=512, oversize="resize"
    )
    prompt = messages[0]["content"][-1]["text"]
    assert "to 5 (excellent)" in prompt
    ok = parse_answer(judge_reply(prompt, 4), paper.fields)
    assert ok.status == "ok" and ok.scores["overall"] == 4.0
    # all or nothing: a 7 on the paper's 1-5 scale leaves every field missing
    bad = parse_answer(
        judge_reply(prompt, 4).replace("Overall: [4]/5", "Overall: [7]/5"), paper.fields
    )
    assert bad.status == "unparsable" and bad.scores == {}
    assert [f.metric for f in nogt.fills][-1] == "overall_nogt"


def test_summary_by_format_task_subtask_modality(folder, tmp_path):
    _go(folder, "vqa.jsonl", f"{__name__}:make_text_only", tmp_path / "s").close()
    res = runner.invoke(app, ["medgen", "summary", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    for field in ("metadata.format", "task", "metadata.subtask", "modality"):
        assert f"medgen@code by {field}" in res.output
    assert "bleu_pass_rate" in res.output


def test_the_editing_checklist_leaves_answers_to_the_code_judge(folder):
    (mc, _) = load_dataset(f"medgen:{folder / 'vqa.jsonl'}")
    for version in ("1", "1-nogt"):
        why = load_judge(f"medgen-checklist@{version}").skip_reason(mc)
        assert why == "a text answer: judged by medgen-checklist@code (answer_judges.py)"


def test_an_editing_sample_answered_by_a_unified_model_gets_the_image_tier(tmp_path):
    from .answer_data import build_release

    release = build_release(tmp_path / "release")
    config = RunConfig(
        dataset=f"medgen:{release / 'parquet' / 'image_editing'}",
        models=(f"{__name__}:make_unified",),
        out=tmp_path / "run",
    )
    with run(config, progress=False) as store:
        (score,) = code_scores(store)
    (sample,) = load_dataset(f"medgen:{release / 'parquet' / 'image_editing'}")
    gt = np.asarray(Image.open(sample.target).convert("RGB"), np.float64)
    assert score.metrics["psnr"] == pytest.approx(10 * np.log10(255**2 / np.mean((gt - 50) ** 2)))
    assert "bleu" not in {k for k, v in score.metrics.items() if v is not None}


class Together:
    """A VLM that answers only when three calls are in flight at once."""

    name = "together"
    concurrency = 3

    def __init__(self) -> None:
        import threading

        self.barrier = threading.Barrier(3, timeout=10)

    def answer(self, images, prompt, *, seed):
        self.barrier.wait()
        return "B"


def make_together() -> Together:
    return Together()


def test_answers_run_concurrency_calls_at_once(tmp_path):
    import json

    root = tmp_path / "data"
    (root / "images").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / "images" / "q.png")
    recs = [
        {"sample_id": f"q{i}", "category": "VQA", "paper_task": "blank-filling",
         "instruction": "Fill in.", "input_image": "images/q.png", "answer": "B"}
        for i in range(3)
    ]  # fmt: skip
    (root / "vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with _go(root, "vqa.jsonl", f"{__name__}:make_together", tmp_path / "run") as store:
        preds = store.predictions()
        scores = code_scores(store)
    assert [p.status for p in preds] == ["ok"] * 3
    assert [s.metrics["task_accuracy"] for s in scores] == [1.0] * 3
