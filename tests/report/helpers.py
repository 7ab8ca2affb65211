"""Tiny real runs for the report tests: a native dataset, identity and classical, native@1."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from medibench.io import write_image
from medibench.runs import RunConfig, run

TASKS = [
    ("remove-lesion", "brain", "CT"),
    ("remove-lesion", "chest", "X-ray"),
    ("highlight-lesion", "brain", "MRI"),
]


def make_dataset(root: Path, n: int = 9, size: int = 48) -> Path:
    """``n`` samples of smooth noise with a bright square lesion in the ROI; three
    task/region/modality combinations; perspective modification (perception for highlights)."""
    rng = np.random.default_rng(0)
    lines = []
    yy, xx = np.mgrid[0:size, 0:size]
    for i in range(n):
        task, region, modality = TASKS[i % len(TASKS)]
        base = (100 + 60 * np.sin(xx / 5 + i) * np.cos(yy / 7)).astype(np.uint8)
        img = np.clip(base + rng.integers(0, 20, (size, size)), 0, 255).astype(np.uint8)
        mask = np.zeros((size, size), bool)
        mask[12 + i % 5 : 24 + i % 5, 14:26] = True
        target = img.copy()
        lesioned = img.copy()
        lesioned[mask] = 240
        perception = task.startswith("highlight")
        if perception:
            inp, target = img, img.copy()
            rgb_t = np.dstack([target] * 3)
            rgb_t[mask] = (255, 0, 0)
        else:
            inp, rgb_t = lesioned, np.dstack([target] * 3)
        sid = f"s{i:02d}"
        write_image(root / "img" / f"{sid}.png", np.dstack([inp] * 3))
        write_image(root / "img" / f"{sid}_t.png", rgb_t)
        write_image(root / "img" / f"{sid}_m.png", mask)
        rec = {
            "sample_id": sid,
            "benchmark": "tiny",
            "input": f"img/{sid}.png",
            "target": f"img/{sid}_t.png",
            "mask": f"img/{sid}_m.png",
            "instruction": "Highlight the lesion in red." if perception else "Remove the lesion.",
            "perspective": "perception" if perception else "modification",
            "task": task,
            "region": region,
            "modality": modality,
        }
        if perception:
            rec["overlay_color"] = "red"
        lines.append(json.dumps(rec))
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return root


def make_run(
    run_dir: Path,
    *,
    n: int = 9,
    scored: bool = True,
    models: tuple[str, ...] = ("identity", "classical"),
) -> Path:
    """A real run: the tiny dataset, ``models`` generated, scored by native@1 when ``scored``."""
    data = make_dataset(run_dir.parent / f"{run_dir.name}-data", n=n)
    config = RunConfig(
        dataset=f"native:{data}",
        models=models,
        out=run_dir,
        protocols=("native@1",),
        stage="all" if scored else "generate",
    )
    run(config, progress=False).close()
    return run_dir


#: What the local fake judge answers in :func:`judged_run`, per judge and sample (and pass: the
#: request's seed, 0 or 1). MedEBench's sample s00 changes its mind between passes (EA 7, then
#: 5: ``ea`` holds 0.6); s01 is refused; the rubric answers in JSON with a reason that tries to
#: end the page's script, and on s01 one word of 3,000 letters; MedGEN's checklist gives scores
#: only.
JUDGE_ANSWERS = {
    ("medebench", "a", 0): "Step 1. ORIGINAL's bright lesion is gone in EDITED; REFERENCE "
    "agrees.\nEditing Accuracy: [7]/10\nContextual Preservation: [8]/10\nVisual Quality: [6]/10",
    ("medebench", "a", 1): "Step 1. A faint rim of the lesion is left in EDITED.\n"
    "Editing Accuracy: [5]/10\nContextual Preservation: [8]/10\nVisual Quality: [6]/10",
    ("medebench", "b", 0): "I'm sorry, I cannot evaluate medical images.",
    ("medebench", "b", 1): "I'm sorry, I cannot evaluate medical images.",
    ("rubric", "a", 0): '{"reason": "Half of the lesion is left </script><b>bold</b>", '
    '"rubric": 55}',
    ("rubric", "a", 1): '{"reason": "Half of the lesion is left.", "rubric": 45}',
    ("rubric", "b", 0): '{"reason": "' + "x" * 3000 + '", "rubric": 10}',
    ("rubric", "b", 1): '{"reason": "Nothing was removed.", "rubric": 10}',
}
_MEDGEN_ANSWER = (
    "Edit In Target Region: yes\nContext Preserved: yes\nNo New Artifacts: no\n"
    "Clinically Plausible: yes\nAnatomical Accuracy: 8/10\nClinical Finding Accuracy: 7/10\n"
    "Instruction Compliance: 9/10\nCross-Modal Consistency: 8/10\n"
    "Hallucination Control: 6/10\nOverall: 7/10"
)
#: The judge protocols :func:`judged_run` judges with, by ``medibench judge``.
JUDGES = ("medebench-judge@paper-structure", "miedb-rubric@1", "medgen-checklist@1")


def judged_run(run_dir: Path) -> Path:
    """A run judged by the real ``medibench judge`` against the local fake judge (model
    ``judge-x``, two passes): two samples (``s00``, ``s01``) of model ``m1``, scored under
    medebench@paper, miedb@1 and medgen@code, judged by :data:`JUDGES` (:data:`JUDGE_ANSWERS`)."""
    from typer.testing import CliRunner

    from medibench.cli import app
    from tests.judges._server import FakeJudgeServer, Reply, first_text
    from tests.judges.conftest import build_run

    protocols = (("medebench", "paper"), ("miedb", "1"), ("medgen", "code"))
    run = build_run(run_dir, ["a", "b"], protocols=protocols)

    def answer(body: dict, n: int) -> Reply:
        text = first_text(body)
        if "Hallucination Control" in text:
            return Reply(_MEDGEN_ANSWER)
        judge = "rubric" if "Rubric Score" in text else "medebench"
        tag = re.search(r"(?m)^([ab]): ", text).group(1)  # the sample's change text
        return Reply(JUDGE_ANSWERS[(judge, tag, body["seed"])])

    args = ["judge", str(run), "--judge-model", "judge-x", "--passes", "2"]
    args += [x for spec in JUDGES for x in ("--protocol", spec)]
    with FakeJudgeServer(answer) as server:
        res = CliRunner().invoke(
            app, [*args, "--base-url", server.base_url], env={"OPENAI_API_KEY": "sk-test-0123"}
        )
    assert res.exit_code == 0, res.output
    return run


def browser_data(index: Path) -> dict:
    """The sample browser's whole data of a report, as one blob: the head ``index.html``
    embeds, with ``samples`` (in the run's order) and ``answers`` gathered from its page files
    (``samples/page-NNNN.js``)."""
    html = index.read_text()
    head = json.loads(re.search(r'id="report-data">(.*?)</script>', html, re.S).group(1))
    pages = [
        json.loads(re.fullmatch(rf"window\.medibenchPages\[{n}\]=(.*);\n", path.read_text())[1])
        for n, path in enumerate(page_files(index), start=1)
    ]
    in_order = [s for page in pages for s in page["samples"]]
    by_position = dict(zip(head["index"]["order"], in_order, strict=True))
    samples = [by_position[i] for i in range(len(in_order))]
    answers = {k: v for page in pages for k, v in page["answers"].items()}
    return {**head, "samples": samples, "answers": answers}


def page_files(index: Path) -> list[Path]:
    """The sample browser's data files beside ``index``, in page order."""
    return sorted((index.parent / "samples").glob("page-*.js"))
