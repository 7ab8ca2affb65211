"""Model editing (``medibench edit run`` with ft, lora, grace@paper, grace-tokens, balancedit,
wise, mend and in-context) on the families of :data:`tests.conformance._matrix.EDITED`, and each
editor's undo, bit for bit. ``mend`` edits with a hypernetwork trained on the family's model
first (24 steps of ``edit train-mend``'s training on the cells' three synthetic edits, cached per
family).

``grace@paper``, ``balancedit`` and ``wise`` train on the answer's tokens alone (as EasyEdit
does): the end of the answer is the model's own, and a random-weight model keeps talking after
it. Their cells are held to the answer's tokens (teacher-forced token accuracy, EasyEdit's
reading, and the answer's first word), not to an exact free-generated answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conformance._matrix import EDITED, EDITING
from tests.conformance.conftest import QUESTION, TARGET, image

pytestmark = pytest.mark.filterwarnings("ignore")
#: the editors trained on the answer's tokens without the end of turn
ANSWER_TOKENS = ("grace@paper", "balancedit", "wise")
#: wise@1's 10 SGD steps on a fifth of the side memory's entries are EasyEdit's settings for 7B
#: models; on the random-weight tiny families (measured: 100 such steps still miss PaliGemma's and
#: Idefics3's answers) the cells train every entry for 30 steps
OPTIONS = {"wise": {"n_iter": 30, "mask_ratio": 1.0}}


@pytest.fixture(scope="session")
def tasks(tmp_path_factory):
    from medibench.knowledge_edit._synthetic import synthetic_taskset

    root = tmp_path_factory.mktemp("edit-tasks")
    synthetic_taskset(root / "tasks", 3, seed=0)
    return root / "tasks"


@pytest.fixture(scope="session")
def mend_folder(family_folder, tasks):
    """``mend_folder(family) -> Path``: a MEND hypernetwork trained on the family's model and the
    cells' task set (24 steps of mend@1's training; built once, read-only)."""
    from medibench.knowledge_edit._mend_train import read_mend_config, train_mend
    from tests._cache import cached, digest

    def get(family: str) -> Path:
        model = family_folder(family)

        def build(folder: Path) -> None:
            settings = read_mend_config(max_steps=24, checkpoint_every=24)
            train_mend(tasks, model, folder, settings)

        sources = ("medibench.knowledge_edit._mend", "medibench.knowledge_edit._mend_train")
        salt = f"{model.name} {digest(tasks)}"
        return cached(f"vlm-mend-{family}", build, sources=sources, salt=salt)

    return get


@pytest.mark.parametrize("editor", EDITING)
@pytest.mark.parametrize("family", EDITED)
def test_edit_run_reaches_each_edit_and_scores_it(family, editor, family_folder, tasks,
                                                  mend_folder, tmp_path):  # fmt: skip
    from medibench.cli import app

    run = tmp_path / "run"
    matcher = "token_accuracy" if editor in ANSWER_TOKENS else "exact"
    spec = f"mend:{mend_folder(family)}" if editor == "mend" else editor
    args = ["edit", "run", "--tasks", str(tasks), "--model", str(family_folder(family)),
            "--editor", spec, "--limit", "2", "--matcher", matcher, "--max-new-tokens", "4",
            "--run", str(run), "--json", str(tmp_path / "scores.json")]  # fmt: skip
    if editor in OPTIONS:
        (tmp_path / "editor.json").write_text(json.dumps(OPTIONS[editor]))
        args += ["--config", str(tmp_path / "editor.json")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "0 failed" in " ".join(result.output.split())
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["n_edits"] == 2
    if editor != "in-context":  # a random model does not read facts; trained editors must land
        assert scores["reliability"] == 1.0
    from medibench.knowledge_edit import read_taskset

    lines = (run / "edit_results.jsonl").read_text().splitlines()
    probes = sum(len(r.probes) for r in read_taskset(tasks).requests[:2])
    assert len(lines) == probes  # one line per probe of the two edits, each scored


@pytest.mark.parametrize("editor", ["ft", "lora", "grace@paper", "grace-tokens", "balancedit",
                                    "wise"])  # fmt: skip
@pytest.mark.parametrize("family", EDITED)
def test_an_edit_lands_and_undo_restores_the_model_bit_for_bit(family, editor, family_folder):
    import torch

    from medibench.knowledge_edit import TransformersAnswerer, load_editor
    from medibench.knowledge_edit._editors import EditCase

    model = TransformersAnswerer(family_folder(family), max_new_tokens=4)
    before = {k: v.clone() for k, v in model.model.state_dict().items()}
    answer_before = model.answer(image(), QUESTION)
    edit = EditCase("e", image(), QUESTION, TARGET)
    handle = load_editor(editor, OPTIONS.get(editor)).edit(model, edit)
    if editor in ANSWER_TOKENS:  # the answer's tokens are the edit's; what follows, the model's
        assert model.token_accuracy(image(), QUESTION, TARGET) == 1.0
        assert model.answer(image(), QUESTION).startswith(TARGET)
    else:
        assert model.answer(image(), QUESTION) == TARGET
    handle.undo()
    after = model.model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert model.answer(image(), QUESTION) == answer_before


@pytest.mark.parametrize("family", EDITED)
def test_a_mend_edit_lands_and_undo_restores_the_model_bit_for_bit(family, family_folder, tasks,
                                                                   mend_folder):  # fmt: skip
    import torch

    from medibench.io import read_image
    from medibench.knowledge_edit import TransformersAnswerer, load_editor, read_taskset
    from medibench.knowledge_edit._editors import EditCase

    model = TransformersAnswerer(family_folder(family), max_new_tokens=4)
    ts = read_taskset(tasks)
    r = ts.requests[0]
    case = EditCase(r.edit_id, read_image(ts.image_path(r.image), mode="rgb"), r.question,
                    r.target)  # fmt: skip
    before = {k: v.clone() for k, v in model.model.state_dict().items()}
    answer_before = model.answer(case.image, case.question)
    handle = load_editor(f"mend:{mend_folder(family)}").edit(model, case)
    assert model.answer(case.image, case.question) == case.target != answer_before
    handle.undo()
    after = model.model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert model.answer(case.image, case.question) == answer_before


@pytest.mark.parametrize("family", ["llava", "qwen2_vl", "gemma3", "paligemma"])
def test_grace_converges_with_a_codebook_key_per_edit(family, family_folder):
    from medibench.knowledge_edit import TransformersAnswerer, load_editor
    from medibench.knowledge_edit._editors import EditCase, decoder_layers

    model = TransformersAnswerer(family_folder(family), max_new_tokens=4)
    editor = load_editor("grace-tokens", {"max_steps": 200})
    first = editor.edit(model, EditCase("a", image(), QUESTION, TARGET))
    second = editor.edit(model, EditCase("b", image(7), "which organ is shown ?", "heart"))
    assert first.converged and second.converged
    assert first.loss <= editor.config.tol and second.loss <= editor.config.tol
    codebook = decoder_layers(model)[editor.config.layer].mlp
    assert len(codebook.keys) == 2  # one key per edit, at the chosen layer
    assert model.answer_batch([(image(), QUESTION), (image(7), "which organ is shown ?")]) == [
        TARGET, "heart"]  # fmt: skip
    second.undo()
    first.undo()
    assert not hasattr(decoder_layers(model)[editor.config.layer].mlp, "keys")


def test_gemma3_batched_edit_answers_equal_single_answers(family_folder):
    from medibench.knowledge_edit import TransformersAnswerer

    model = TransformersAnswerer(family_folder("gemma3"), max_new_tokens=3, batch_size=8)
    items = [(image(i, (16 + i, 20)), q) for i in range(4)
             for q in (QUESTION, "which organ is shown ?")]  # fmt: skip
    assert len(items) == 8
    assert model.answer_batch(items) == [model.answer(im, q) for im, q in items]
