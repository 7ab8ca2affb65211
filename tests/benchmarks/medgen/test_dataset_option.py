"""``--dataset-option formats=...``: MedGEN-Bench's VQA and generation records from the folder
itself, through ``medibench score`` and ``medibench run``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from medibench.benchmarks.medgen.dataset import read_medgen
from medibench.cli import app
from medibench.runs import RunStore

from .answer_data import build_folder

runner = CliRunner()


@pytest.fixture
def folder(tmp_path):
    return build_folder(tmp_path / "MedGEN_data")


def _answers(folder, tmp_path):
    preds = tmp_path / "preds" / "m"
    preds.mkdir(parents=True)
    for sample in read_medgen(folder, formats=("vqa",)):
        (preds / f"{sample.sample_id}_0.txt").write_text("B. Pneumonia")
    return preds.parent


def test_score_reads_the_formats_the_option_names(folder, tmp_path):
    preds = _answers(folder, tmp_path)
    out = tmp_path / "s.jsonl"
    args = ["score", "--dataset", f"medgen:{folder}", "--predictions", str(preds)]
    res = runner.invoke(
        app, [*args, "--out", str(out), "--dataset-option", "formats=[vqa]", "--no-progress"]
    )
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    records = [r for r in records if r["protocol_version"] == "code"]
    assert [r["sample_id"] for r in records] == [
        "medgen-VQA-multiple-choice-1",
        "medgen-VQA-report-generation-2",
    ]
    mc = records[0]
    assert mc["notes"][0] == "format=VQA task=multiple-choice subtask="
    assert mc["metrics"]["task_accuracy"] == 1.0
    bad = runner.invoke(app, [*args, "--out", str(out), "--dataset-option", "formats"])
    assert bad.exit_code == 2 and "dataset option 'formats' must look like key=value" in bad.output
    unknown = runner.invoke(app, [*args, "--out", str(out), "--dataset-option", "formats=x"])
    assert unknown.exit_code == 2 and "unknown MedGEN-Bench format" in unknown.output


def test_run_passes_the_option_to_the_loader(folder, tmp_path):
    res = runner.invoke(
        app,
        ["run", "--dataset", f"medgen:{folder}", "--dataset-option", "formats=all", "--model",
         "identity", "--out", str(tmp_path / "r"), "--stage", "generate", "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    with RunStore.open_existing(tmp_path / "r") as store:
        stored = sorted((s.sample_id, s.metadata["format"]) for s in store.samples())
    # this folder holds VQA and generation records (no edit.jsonl): all three of them
    everything = read_medgen(folder, formats="all")
    expected = sorted((s.sample_id, s.metadata["format"]) for s in everything)
    assert stored == expected and {f for _, f in stored} == {"VQA", "MultimodalGeneration"}
