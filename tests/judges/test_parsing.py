import pytest

from medibench.judges import ScoreField, load_judge, parse_answer

MEDEBENCH = load_judge("medebench-judge@paper-structure").fields
RUBRIC = load_judge("miedb-rubric@1").fields
MEDGEN = load_judge("medgen-checklist@1").fields


@pytest.mark.parametrize(
    "text",
    [
        "Editing Accuracy: [7]/10\nContextual Preservation: [8]/10\nVisual Quality: [6]/10",
        "**Editing Accuracy:** 7/10\n**Contextual Preservation:** 8/10\n**Visual Quality:** 6/10",
        "### Scores\n- **Editing Accuracy**: **7**/10\n- *Contextual Preservation*: 8 / 10\n"
        "- __Visual Quality__: [6] / 10",
        "Editing Accuracy - 7 out of 10. Contextual Preservation - 8 out of 10. "
        "Visual Quality - 6 out of 10.",
        "Step 1: the lesion shrank; Editing Accuracy is high.\nStep 2:\n"
        "Editing Accuracy (EA): 7/10\nContextual Preservation (CP): 8/10\n"
        "Visual Quality (VQ): 6/10",
        '{"differences": "x", "editing_accuracy": 7, "contextual_preservation": 8, '
        '"visual_quality": 6}',
        'Here you go:\n```json\n{"Editing Accuracy": "7/10", "Contextual Preservation": "[8]", '
        '"Visual Quality": 6}\n```\nThanks.',
        'My verdict {"scores": {"editing accuracy": 7, "contextual preservation": 8, '
        '"visual quality": {"score": 6, "reason": "ok"}}} end',
        "EA: 7, CP: 8, VQ: 6",
    ],
)
def test_every_answer_shape_gives_the_same_scores(text):
    got = parse_answer(text, MEDEBENCH)
    assert got.status == "ok", got.problems
    assert got.scores == {
        "editing_accuracy": 7.0,
        "contextual_preservation": 8.0,
        "visual_quality": 6.0,
    }


def test_the_last_score_wins_after_reasoning():
    text = (
        "Editing Accuracy: [Score]/10 was the template.\nEditing Accuracy: 3/10\n"
        "Contextual Preservation: 4/10\nVisual Quality: 5/10"
    )
    assert parse_answer(text, MEDEBENCH).scores["editing_accuracy"] == 3.0


def test_missing_one_score_keeps_the_others():
    got = parse_answer("Editing Accuracy: 7/10\nVisual Quality: 6/10", MEDEBENCH)
    assert got.status == "unparsable"
    assert got.scores == {"editing_accuracy": 7.0, "visual_quality": 6.0}
    assert got.problems["contextual_preservation"].startswith("unparsable: no 'Contextual")


def test_out_of_range_is_rejected_and_named():
    got = parse_answer(
        "Editing Accuracy: 11/10\nContextual Preservation: 8/10\nVisual Quality: -1/10", MEDEBENCH
    )
    assert got.status == "unparsable"
    assert got.scores == {"contextual_preservation": 8.0}
    assert got.problems["editing_accuracy"] == "out_of_range: 11 is not in [0, 10]"
    assert got.problems["visual_quality"] == "out_of_range: -1 is not in [0, 10]"


def test_another_scale_is_not_rescaled():
    got = parse_answer("Rubric Score: 8/10", RUBRIC)
    assert got.status == "unparsable" and "expected /100" in got.problems["rubric"]


@pytest.mark.parametrize(
    "text,value",
    [
        ("Looks good. Rubric Score: [72]/100", 72.0),
        ("Score: [85]/100", 85.0),
        ('{"reason": "fine", "rubric": 64}', 64.0),
        ("**Rubric Score:** 91 out of 100", 91.0),
    ],
)
def test_rubric(text, value):
    assert parse_answer(text, RUBRIC).scores == {"rubric": value}


def test_refusal_and_garbage():
    assert (
        parse_answer("I'm sorry, but I can't help with medical images.", MEDEBENCH).status
        == "refused"
    )
    got = parse_answer("The image looks nice.", MEDEBENCH)
    assert got.status == "unparsable" and got.scores == {}
    assert parse_answer(None, MEDEBENCH).status == "unparsable"


def test_medgen_checklist_is_optional_and_yes_no():
    dims = "\n".join(f"{f.label}: [{i + 3}]/10" for i, f in enumerate(MEDGEN) if f.required)
    got = parse_answer("Edit In Target Region: yes\nNo New Artifacts: **no**\n" + dims, MEDGEN)
    assert got.status == "ok"
    assert got.scores["edit_in_target_region"] == 1.0 and got.scores["no_new_artifacts"] == 0.0
    assert "context_preserved" not in got.scores and "context_preserved" not in got.problems
    assert got.scores["overall"] == 8.0


def test_score_of_zero_is_a_value():
    f = [ScoreField("x", "Quality", 0, 10)]
    assert parse_answer("Quality: 0/10", f).scores == {"x": 0.0}
