import pytest

from medibench.judges import ScoreField, load_judge, parse_answer
from medibench.judges._parsing import rationale

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


def test_a_partial_answer_gives_no_score_at_all():
    # Was "missing one score keeps the others": that is the bug of issue 10 (item 1), the
    # scores are required together now.
    got = parse_answer("Editing Accuracy: 7/10\nVisual Quality: 6/10", MEDEBENCH)
    assert got.status == "unparsable" and got.scores == {}
    assert got.problems["contextual_preservation"].startswith("unparsable: no 'Contextual")
    assert "editing_accuracy parsed as 7 but is not used" in got.problems["editing_accuracy"]
    assert "lacks a valid contextual_preservation" in got.problems["visual_quality"]


def test_independent_fields_keep_each_valid_score():
    got = parse_answer("Editing Accuracy: 7/10\nVisual Quality: 6/10", MEDEBENCH, independent=True)
    assert got.status == "unparsable"
    assert got.scores == {"editing_accuracy": 7.0, "visual_quality": 6.0}
    assert set(got.problems) == {"contextual_preservation"}


def test_out_of_range_is_rejected_and_named():
    got = parse_answer(
        "Editing Accuracy: 11/10\nContextual Preservation: 8/10\nVisual Quality: -1/10", MEDEBENCH
    )
    assert got.status == "unparsable"
    assert got.scores == {}  # was {"contextual_preservation": 8.0}: all or nothing (issue 10)
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


@pytest.mark.parametrize(
    "text,status",
    [
        # the answers of issue 10: a format quote and a refusal that ends in a number
        (
            "The format is e.g. 'Editing Accuracy: [10]/10'. I cannot see the edited image",
            "refused",
        ),
        ("The format is e.g. 'Editing Accuracy: [10]/10'.", "unparsable"),
        ("I'm sorry, I cannot evaluate these medical images. Editing Accuracy: 0", "refused"),
        (
            "I'm sorry, but I can't assess this. Editing Accuracy: 0/10\n"
            "Contextual Preservation: 0/10\nVisual Quality: 0/10",
            "refused",
        ),
        (
            "Please answer as 'Editing Accuracy: [10]/10', 'Contextual Preservation: [10]/10', "
            "'Visual Quality: [10]/10'.",
            "unparsable",
        ),
        (
            'Use the format "Editing Accuracy: 10/10, Contextual Preservation: 10/10, Visual '
            'Quality: 10/10".',
            "unparsable",
        ),
        (
            "Scores should look like this: Editing Accuracy: [10]/10, for example: "
            "Contextual Preservation: [9]/10, e.g. Visual Quality: [8]/10",
            "unparsable",
        ),
        ("I am unable to view the attached images, so no score. Editing Accuracy: 5", "refused"),
        ("No image was provided. Editing Accuracy: 0/10", "refused"),
        (
            "Editing Accuracy 2 regions changed, Contextual Preservation 3 spots, Visual Quality 1",
            "unparsable",
        ),
    ],
)
def test_format_quotes_and_refusals_never_give_a_score(text, status):
    got = parse_answer(text, MEDEBENCH)
    assert got.status == status, got.problems
    assert got.scores == {}
    assert set(got.problems) == {"editing_accuracy", "contextual_preservation", "visual_quality"}
    if status == "refused":
        assert all(p.startswith("refused:") for p in got.problems.values())


@pytest.mark.parametrize(
    "text,want",
    [
        # real, varied correct answers: reasoning, apologies for bad edits, quotes of the image
        (
            "Step 1: The lesion's border is gone and the skin's texture is kept. I can't see any "
            "residual lesion in the edited image.\nStep 2:\nEditing Accuracy: [9]/10\n"
            "Contextual Preservation: [8]/10\nVisual Quality: [7]/10",
            (9, 8, 7),
        ),
        (
            "Sorry, but the edit failed: the model added a 'ghost' region.\n"
            "**Editing Accuracy:** 0/10\n**Contextual Preservation:** 3/10\n"
            "**Visual Quality:** 2/10",
            (0, 3, 2),
        ),
        (
            'The instruction said "remove the nodule". Following the requested format:\n'
            "Editing Accuracy: 6/10\nContextual Preservation: 7/10\nVisual Quality: 8/10",
            (6, 7, 8),
        ),
        (
            "Differences: the mass (e.g. at the left apex) shrank.\n- Editing Accuracy: [5]/10\n"
            "- Contextual Preservation: [5]/10\n- Visual Quality: [4]/10",
            (5, 5, 4),
        ),
        (
            'Here are the scores in the requested format: {"editing_accuracy": 3, '
            '"contextual_preservation": 10, "visual_quality": 9}',
            (3, 10, 9),
        ),
        (
            "Editing Accuracy = 8/10; Contextual Preservation = 8/10; Visual Quality = 10/10",
            (8, 8, 10),
        ),
    ],
)
def test_real_varied_answers_are_ok(text, want):
    got = parse_answer(text, MEDEBENCH)
    assert got.status == "ok", got.problems
    keys = ("editing_accuracy", "contextual_preservation", "visual_quality")
    assert got.scores == {k: float(v) for k, v in zip(keys, want, strict=True)}


@pytest.mark.parametrize(
    "text, fields, expected",
    [
        # MedEBench's two steps as text: step 1 stays, the three score lines go.
        (
            "Step 1:\n- The lesion is gone, as in REFERENCE.\n- The skin is smoother.\n\n"
            "**Editing Accuracy:** [7]/10\nContextual Preservation: 8/10\n"
            "- Visual Quality: 6/10 (a faint seam)",
            MEDEBENCH,
            "Step 1:\n- The lesion is gone, as in REFERENCE.\n- The skin is smoother.\n\n"
            "- (a faint seam)",
        ),
        ("The lesion is only half removed.\nRubric Score: [55]/100", RUBRIC,
         "The lesion is only half removed."),
        # A structured answer: its free text, fenced or not.
        ('```json\n{"reason": "Half removed.", "rubric": 55}\n```', RUBRIC, "Half removed."),
        (
            '{"differences": "the lesion is gone", "editing_accuracy": 7, '
            '"contextual_preservation": 8, "visual_quality": 6}',
            MEDEBENCH,
            "the lesion is gone",
        ),
        # Several texts are named, a list is one line per item, a field's own reason is named
        # after the field, and prose around the object is kept.
        (
            'Here it is:\n{"differences": ["lesion gone", "seam"], "scores": {"editing accuracy":'
            ' 7, "contextual preservation": 8, "visual quality": {"score": 6, "reason": "blur"}}}',
            MEDEBENCH,
            "Here it is:\ndifferences:\n- lesion gone\n- seam\nVisual Quality reason: blur",
        ),
        # A refusal is its own reason; a quoted format example is not a score statement.
        ("I'm sorry, I cannot evaluate these images.", MEDEBENCH,
         "I'm sorry, I cannot evaluate these images."),
        ("I follow 'Rubric Score: [90]/100' as asked.\nRubric Score: 40/100", RUBRIC,
         "I follow 'Rubric Score: [90]/100' as asked."),
        # Nothing but scores: no rationale.
        ("Edit In Target Region: yes\nContext Preserved: no\nAnatomical Accuracy: [7]/10\n"
         "Overall: 6/10", MEDGEN, ""),
        ("", RUBRIC, ""),
    ],
)  # fmt: skip
def test_the_rationale_is_the_answer_without_its_scores(text, fields, expected):
    assert rationale(text, fields) == expected
