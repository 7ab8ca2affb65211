"""MedGEN VQA answering (``medibench run --dataset medgen:...vqa.jsonl --model
transformers-vlm:PATH``) on every family's tiny model: what the run stores is what the adapter
answers for the stored prompt and seed, and a second run is byte-identical."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from medibench.models._hf_processor import torchvision_available
from tests.conformance._matrix import FAMILIES, cell
from tests.conformance.conftest import image

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def vqa(tmp_path_factory):
    root = tmp_path_factory.mktemp("medgen-vqa")
    (root / "images").mkdir()
    Image.fromarray(image(5, (18, 26))).save(root / "images" / "q0.png")
    row = {"sample_id": "medgen:VQA:multiple-choice:0", "category": "VQA",
           "paper_task": "multiple-choice", "instruction": "Which organ is shown?",
           "input_image": "images/q0.png", "answer": "B. Lung",
           "choice": ["A. Heart", "B. Lung"], "modality": "CT"}  # fmt: skip
    (root / "vqa.jsonl").write_text(json.dumps(row) + "\n")
    return root / "vqa.jsonl"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_medgen_vqa_run_stores_the_adapters_answer_reproducibly(family, family_folder, vqa,
                                                                 tmp_path):  # fmt: skip
    from medibench.io import read_image
    from medibench.models.vlm import TransformersVLM
    from medibench.runs import RunConfig, RunStore, run
    from medibench.runs._answers import read_answers

    if cell(family, "medgen vqa", torchvision=torchvision_available())[0] != "supported":
        return  # the transformers-vlm cell tests its error
    spec = f"transformers-vlm:{family_folder(family)}"
    texts = []
    for name in ("a", "b"):
        config = RunConfig(dataset=f"medgen:{vqa}", models=(spec,), out=tmp_path / name,
                           model_options=("max_new_tokens=3",))  # fmt: skip
        run(config, progress=False).close()
        (txt,) = (tmp_path / name / "outputs").rglob("*.txt")
        texts.append(txt.read_bytes())
    assert texts[0] == texts[1]
    with RunStore(tmp_path / "a") as store:
        ((_, row),) = read_answers(store).items()
        (pred,) = store.predictions()
    assert row["prompt"] == "Which organ is shown?\nOptions:\nA. Heart\nB. Lung"
    vlm = TransformersVLM(family_folder(family), max_new_tokens=3)
    shown = read_image(vqa.parent / "images" / "q0.png", mode="rgb")
    assert np.array_equal(shown, image(5, (18, 26)))
    assert texts[0].decode() == vlm.answer([shown], row["prompt"], seed=pred.seed)
