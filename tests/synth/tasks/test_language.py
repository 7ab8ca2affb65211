"""Instructions: paraphrases, clinical words and spatial language consistent with the image."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.synth.scenes import make_scene, render
from medibench.synth.suite import SuiteItem, generate_item
from medibench.synth.tasks import PRESETS, Difficulty, TaskContext, get_difficulty, get_task
from medibench.synth.tasks._common import human, locate


def test_paraphrases_are_distinct_and_vary_with_the_item() -> None:
    seen = set()
    for index in range(4):
        item, _ = generate_item(SuiteItem("remove-described-lesion", index, "xray"), size=128)
        texts = (item.instruction, *item.paraphrases)
        assert len(set(texts)) == len(texts) >= 4
        seen.add(item.instruction)
    assert len(seen) >= 2  # the place named in the instruction follows the lesion


@pytest.mark.parametrize("index", range(6))
def test_left_lung_is_on_the_image_right_in_radiological_convention(index: int) -> None:
    item, _ = generate_item(SuiteItem("remove-lesion", index, "xray"), size=128)
    (lesion,) = item.metadata["scene"]["lesions"]
    col = lesion["center"][1]
    side = "left" if lesion["host"] == "lung_left" else "right"
    assert (col > 63.5) == (side == "left")  # the patient's left lung: the image's right
    assert f"{side} lung" in item.description
    image_side = "right" if col > 63.5 else "left"
    assert f"shown on the image's {image_side}, radiological convention" in item.description


def test_locate_words_per_convention() -> None:
    ct = make_scene("ct", seed=4, size=128, variant="abdomen")
    rendered = render(ct)
    liver = rendered.labels["liver"]
    rows, cols = np.nonzero(liver)
    top = (float(rows.min() + 2), float(cols[rows.argmin()]))
    place = locate(top, "liver", rendered, ct)
    assert place.vertical == "anterior" and place.convention == "radiological"
    assert "on the patient's" in place.phrase
    derm = make_scene("dermoscopy", seed=1, size=128)
    drender = render(derm)
    place = locate((10.0, 120.0), "skin", drender, derm)
    assert place.phrase == "the upper right part of the image" and place.convention == "image"
    assert human("lung_left") == "left lung" and human("white_matter") == "white matter"


def test_impossible_knobs_say_why() -> None:
    huge = PRESETS["medium"].replace(lesion_radius=(0.4, 0.45))
    with pytest.raises(ValueError, match="larger than the organ"):
        generate_item(SuiteItem("remove-lesion", 0, "ct"), difficulty=huge, size=128)
    with pytest.raises(ValueError, match="lesion_radius"):
        Difficulty(lesion_radius=(0.1, 0.05))
    with pytest.raises(ValueError, match="easy, medium, hard"):
        get_difficulty("extreme")
    with pytest.raises(ValueError, match="Valid tasks: highlight-structure"):
        get_task("remove-tumour")


def test_task_make_is_a_pure_function_of_its_generator() -> None:
    task = get_task("denoise-gaussian")
    a = task.make(TaskContext(np.random.default_rng(5), "ct", PRESETS["easy"], 128))
    b = task.make(TaskContext(np.random.default_rng(5), "ct", PRESETS["easy"], 128))
    assert a.instruction == b.instruction and np.array_equal(a.input, b.input)
    assert a.metadata == b.metadata
    c, key_c = generate_item(SuiteItem("move-lesion", 2, "xray"), size=128)
    d, key_d = generate_item(SuiteItem("move-lesion", 2, "xray"), size=128)
    assert key_c == key_d and np.array_equal(c.target, d.target) and c.metadata == d.metadata
    assert key_c["seed_key"].startswith("medibench-suite|1|move-lesion|xray|medium|2|0")
