"""The pairing-sensitivity test on a control set whose Delta is known by construction.

Six multiple-choice samples: three X-rays whose answer is B and whose pixels are 100, three CTs
whose answer is C and whose pixels are 180. The VLM reads the answer off the pixels (0 -> A,
< 150 -> B, else C). So on blank inputs every answer is wrong (Delta 1), on an unrelated
(other-modality) input every answer is wrong (Delta 1), on a same-modality input every answer is
still right (Delta 0), each with a CI of zero width.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from medibench.benchmarks.medgen.controls import derive_controls, pairing_panel
from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.runs import RunConfig, RunStore, run

runner = CliRunner()
CHOICES = ["A. Normal", "B. Pneumonia", "C. Nodule"]


class ReadsPixels:
    name = "reads-pixels"

    def answer(self, images, prompt, *, seed):
        v = int(images[0][0, 0, 0])
        return "A" if v == 0 else "B" if v < 150 else "C"


def make_reader() -> ReadsPixels:
    return ReadsPixels()


@pytest.fixture
def sample_set(tmp_path):
    root = tmp_path / "set"
    (root / "images").mkdir(parents=True)
    rows = []
    for i in range(6):
        xray = i < 3
        Image.fromarray(np.full((16, 20, 3), 100 if xray else 180, np.uint8)).save(
            root / "images" / f"q{i}.png"
        )
        rows.append(
            {
                "sample_id": f"medgen:VQA:multiple-choice:{i}",
                "category": "VQA",
                "paper_task": "multiple-choice",
                "instruction": "What is shown?",
                "input_image": f"images/q{i}.png",
                "answer": "B. Pneumonia" if xray else "C. Nodule",
                "choice": CHOICES,
                "modality": "X-ray" if xray else "CT",
            }
        )
    (root / "vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _run(dataset: str, out):
    config = RunConfig(dataset=dataset, models=(f"{__name__}:make_reader",), out=out)
    run(config, progress=False).close()


def test_delta_known_by_construction(sample_set, tmp_path):
    original = tmp_path / "run-original"
    _run(f"medgen:{sample_set / 'vqa.jsonl'}", original)
    control_runs = []
    for control in ("blank", "unrelated", "same-modality"):
        folder = tmp_path / f"set-{control}"
        res = runner.invoke(
            app,
            ["medgen", "controls", "--dataset", f"medgen:{sample_set / 'vqa.jsonl'}"]
            + ["--control", control, "--seed", "3", "--out", str(folder)],
        )
        assert res.exit_code == 0, res.output
        assert f"{control} control of 6 samples (seed 3)" in res.output
        out = tmp_path / f"run-{control}"
        _run(f"medgen:{folder / 'vqa.jsonl'}", out)
        control_runs.append(out)
    args = ["medgen", "delta", str(original), "--metric", "task_accuracy"]
    for out in control_runs:
        args += ["--control", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = json.loads((original / "report" / "pairing_sensitivity.json").read_text())
    got = {r["control"]: (r["n"], r["delta"], r["ci_low"], r["ci_high"]) for r in rows}
    assert got == {
        "blank": (6, 1.0, 1.0, 1.0),
        "unrelated": (6, 1.0, 1.0, 1.0),
        "same-modality": (6, 0.0, 0.0, 0.0),
    }
    with RunStore.open_existing(original) as store:
        panel = pairing_panel(store, original)
    assert panel is not None and panel["title"] == "Pairing sensitivity"
    assert [row[:3] + row[6:8] for row in panel["tables"][0]["rows"]] == [
        ["blank", "reads-pixels", "task_accuracy", "1.000", "[1.000, 1.000]"],
        ["unrelated", "reads-pixels", "task_accuracy", "1.000", "[1.000, 1.000]"],
        ["same-modality", "reads-pixels", "task_accuracy", "0.000", "[0.000, 0.000]"],
    ]
    res = runner.invoke(app, ["report", str(original), "--no-plots"])
    assert res.exit_code == 0, res.output
    html = (original / "report" / "index.html").read_text()
    assert "Pairing sensitivity" in html and "same-modality" in html
    md = (original / "report" / "pairing_sensitivity.md").read_text()
    assert (
        "| blank | reads-pixels | task_accuracy | 6 | 1.000 | 0.000 | 1.000 | [1.000, 1.000] |"
        in md
    )


def test_donors_are_seeded_recorded_and_from_the_right_modality(sample_set, tmp_path):
    samples = list(load_dataset(f"medgen:{sample_set / 'vqa.jsonl'}"))
    by_id = {s.sample_id: s for s in samples}
    a = derive_controls(samples, "unrelated", 5, tmp_path / "a")
    b = derive_controls(samples, "unrelated", 5, tmp_path / "b")
    assert a["samples"] == b["samples"]  # the same seed draws the same donors
    for sid, donor in a["samples"].items():
        assert by_id[donor].modality != by_id[sid].modality
    same = derive_controls(samples, "same-modality", 5, tmp_path / "c")
    for sid, donor in same["samples"].items():
        assert donor != sid and by_id[donor].modality == by_id[sid].modality
    derived = load_dataset(f"medgen:{tmp_path / 'c' / 'vqa.jsonl'}")
    first = derived.get(samples[0].sample_id)
    assert first.metadata["control"]["kind"] == "same-modality"
    assert first.metadata["control"]["seed"] == 5
    assert first.metadata["control"]["drawn_from"] == same["samples"][samples[0].sample_id]
    assert first.metadata["expected"]["text"] == "B. Pneumonia"
    blank = derive_controls(samples, "blank", 0, tmp_path / "d")
    assert set(blank["samples"].values()) == {None}
    (first_blank, *_) = load_dataset(f"medgen:{tmp_path / 'd' / 'vqa.jsonl'}")
    img = np.asarray(Image.open(first_blank.input))
    assert img.shape == (16, 20, 3) and not img.any()


def test_a_sample_without_a_donor_is_left_out(sample_set, tmp_path):
    samples = list(load_dataset(f"medgen:{sample_set / 'vqa.jsonl'}"))[:4]  # one CT only
    manifest = derive_controls(samples, "same-modality", 0, tmp_path / "c")
    assert list(manifest["left_out"]) == [samples[3].sample_id]
    assert (
        "no other sample of the same modality than 'CT'"
        in manifest["left_out"][samples[3].sample_id]
    )
    with pytest.raises(ValueError, match="not empty"):
        derive_controls(samples, "blank", 0, tmp_path / "c")
    res = runner.invoke(
        app,
        ["medgen", "controls", "--dataset", f"medgen:{sample_set / 'vqa.jsonl'}"]
        + ["--control", "scrambled", "--out", str(tmp_path / "x")],
    )
    assert res.exit_code == 2 and "unknown control 'scrambled'" in res.output
