"""Editors on a tiny random LLaVA: FT and LoRA reach their target, undo is bit-exact, a
non-converging edit is recorded, bad generations are refused."""

from __future__ import annotations

import pytest

from medibench.io import read_image
from medibench.knowledge_edit import (
    AnswererError,
    EditCase,
    EditError,
    FineTuneConfig,
    FineTuneEditor,
    GraceEditor,
    InContextEditor,
    LoraEditor,
    load_editor,
    make_matchers,
    run_edits,
    summarize,
)


def _cases(taskset, n=3):
    out = []
    for r in taskset.requests[:n]:
        image = read_image(taskset.image_path(r.image), mode="rgb")
        out.append(EditCase(r.edit_id, image, r.question, r.target))
    return out


def _probe_items(taskset):
    return [
        (read_image(taskset.image_path(p.image), mode="rgb"), p.question)
        for r in taskset.requests
        for p in r.probes
    ]


def _state(model):
    return {k: v.detach().clone() for k, v in model.model.state_dict().items()}


def _same_state(a, b):
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("editor", [FineTuneEditor(), LoraEditor()], ids=["ft", "lora"])
def test_edit_reaches_its_target_and_undo_is_exact(tiny, synthetic, editor):
    items = _probe_items(synthetic)
    before_answers = tiny.answer_batch(items)
    before = _state(tiny)
    modules = [n for n, _ in tiny.model.named_modules()]
    for case in _cases(synthetic):
        assert tiny.answer(case.image, case.question) != case.target  # wrong before
        handle = editor.edit(tiny, case)
        assert handle.converged and handle.loss is not None and handle.loss <= 0.1
        assert tiny.answer(case.image, case.question) == case.target
        assert tiny.token_accuracy(case.image, case.question, case.target) == 1.0
        assert not _same_state(before, _state(tiny))  # the weights did change
        handle.undo()
        assert _same_state(before, _state(tiny))  # bit for bit
        assert [n for n, _ in tiny.model.named_modules()] == modules
    assert tiny.answer_batch(items) == before_answers


def test_grace_and_in_context_undo_restore_outputs(tiny, synthetic):
    items = _probe_items(synthetic)
    before_answers = tiny.answer_batch(items)
    before = _state(tiny)
    case = _cases(synthetic, 1)[0]
    grace = GraceEditor().edit(tiny, case)
    assert grace.steps > 0 and grace.loss is not None
    # the weights are never trained: under the codebook wrapper they are the same tensors
    wrapped = {k.replace(".mlp.inner.", ".mlp."): v for k, v in _state(tiny).items()}
    assert any(".mlp.inner." in k for k in _state(tiny))
    assert _same_state(before, wrapped)
    grace.undo()
    assert _same_state(before, _state(tiny))
    ic = InContextEditor().edit(tiny, case)
    assert tiny.context == [f'New fact: the answer to "{case.question}" is {case.target}.']
    ic.undo()
    assert tiny.context == []
    assert tiny.answer_batch(items) == before_answers


def test_grace_reaches_the_target_of_a_converged_edit(tiny, synthetic):
    reached = 0
    for case in _cases(synthetic, 6):
        h = GraceEditor().edit(tiny, case)
        if h.converged:
            assert tiny.answer(case.image, case.question) == case.target
            reached += 1
        h.undo()
    assert reached >= 1


def test_undo_is_last_in_first_out(tiny, synthetic):
    a, b = _cases(synthetic, 2)
    ed = FineTuneEditor()
    first, second = ed.edit(tiny, a), ed.edit(tiny, b)
    with pytest.raises(EditError, match="not the last edit"):
        first.undo()
    second.undo()
    first.undo()
    with pytest.raises(EditError, match="already undone"):
        first.undo()


def test_non_converging_editor_is_recorded_and_the_run_goes_on(tiny, synthetic):
    before = _state(tiny)
    stuck = FineTuneEditor(FineTuneConfig(lr=0.0, max_steps=3))
    report = run_edits(synthetic, tiny, stuck, limit=3)
    assert [e.converged for e in report.edits] == [False, False, False]
    assert all(e.loss is not None and e.loss > 0.1 and e.steps == 3 for e in report.edits)
    assert {x.edit_id for x in report.lines} == {e.edit_id for e in report.edits}
    assert all(x.extra["converged"] is False and x.extra["edit_loss"] > 0.1 for x in report.lines)
    assert summarize(report.lines)["reliability"] == 0.0  # lr 0: nothing learned
    assert _same_state(before, _state(tiny))


def test_single_edits_reach_reliability_one(tiny, synthetic):
    for name in ("ft", "lora"):
        report = run_edits(
            synthetic,
            tiny,
            load_editor(name),
            matchers=make_matchers(["exact", "token_accuracy"], tiny),
        )
        s = summarize(report.lines)
        assert s["reliability"] == 1.0 and s["n_edits"] == len(synthetic)
        assert s["by_matcher"]["token_accuracy"]["reliability"] == 1.0
        pre = {x.probe_id: x.extra["pre_answer"] for x in report.lines}
        again = run_edits(synthetic, tiny, InContextEditor(), limit=1).lines
        assert all(pre[x.probe_id] == x.extra["pre_answer"] for x in again)  # model restored


def test_generation_that_returns_the_prompt_is_refused(tiny, synthetic):
    import torch

    real = tiny.model.generate

    def echo(**enc):
        ids = enc["input_ids"]
        return torch.cat([ids, ids], dim=1)  # "answers" with the prompt tokens

    tiny.model.generate = echo
    (item,) = _probe_items(synthetic)[:1]
    with pytest.raises(AnswererError, match="returned the prompt tokens as its answer"):
        tiny.answer(*item)
    tiny.model.generate = lambda **enc: torch.zeros((1, 3), dtype=torch.long)
    with pytest.raises(AnswererError, match="did not return the prompt followed by new tokens"):
        tiny.answer(*item)
    tiny.model.generate = real
    assert isinstance(tiny.answer(*item), str)


def test_trained_editors_refuse_a_model_they_cannot_train(synthetic):
    from medibench.knowledge_edit import CallableAnswerer

    model = CallableAnswerer(lambda image, q: "yes")
    with pytest.raises(EditError, match="needs a local transformers model"):
        FineTuneEditor().edit(model, _cases(synthetic, 1)[0])
    h = InContextEditor().edit(model, _cases(synthetic, 1)[0])
    assert model.answer(None, "q") == "yes"
    h.undo()


def test_easyedit_absent_is_a_clear_error():
    pytest.importorskip("torch")
    try:
        import easyeditor  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("EasyEdit is installed here")
    with pytest.raises(ImportError, match="needs EasyEdit .*pip install easyeditor"):
        load_editor("easyedit", {"alg": "LoRA", "hparams": "x.yaml"})


def test_editor_options_are_checked():
    with pytest.raises(ValueError, match="unknown option.*'learning_rate'"):
        load_editor("ft", {"learning_rate": 1.0})
    with pytest.raises(ValueError, match="unknown editor 'rome'"):
        load_editor("rome")
    assert load_editor("lora", {"rank": 2, "layers": [0, 1]}).config.layers == (0, 1)


@pytest.mark.parametrize("sequential", [0, 3])
def test_locality_on_a_taught_tiny_model(taught_path, synthetic, sequential):
    from medibench.knowledge_edit import TransformersAnswerer

    model = TransformersAnswerer(taught_path, max_new_tokens=4)
    report = run_edits(synthetic, model, load_editor("ft"), sequential=sequential)
    s = summarize(report.lines)
    assert s["reliability"] == 1.0
    assert s["n_undefined"]["locality"] < len(synthetic)  # the taught model is right before
    assert 0.0 <= s["locality"] <= 1.0
    # recompute each defined edit's locality from its lines
    from medibench.knowledge_edit import edit_values

    imm = [x for x in report.lines if x.stage == "immediate" and x.matcher == "exact"]
    values = edit_values(imm)
    checked = 0
    for e in values:
        mine = [x for x in imm if x.edit_id == e and x.kind == "locality" and x.pre_correct]
        if mine:
            assert values[e]["locality"].value == sum(x.post_correct for x in mine) / len(mine)
            checked += 1
        else:
            assert values[e]["locality"].value is None
    assert checked == len(synthetic) - s["n_undefined"]["locality"]
    assert set(s["by_task_type"]) == {"T0", "T1", "T2", "T3", "T4", "T5"}
    if sequential:
        assert s["by_stage"]["final"]["n_edits"] == len(synthetic)


@pytest.mark.parametrize("name", ["ft", "lora", "grace-tokens", "grace@paper", "balancedit",
                                  "wise"])  # fmt: skip
def test_an_edit_that_fails_midway_leaves_the_model_as_it_was(tiny, synthetic, monkeypatch, name):
    from medibench.knowledge_edit import _editors, _grace, _grace_paper, _wise

    real, real_steps, real_margin = _editors.train, _grace_paper.train_steps, _wise.margin_loss
    calls = []

    def failing_margin(*args):
        calls.append(1)
        if len(calls) % 2 == 0:  # each edit's side memory has taken a step: then it fails
            raise RuntimeError("out of memory (scripted)")
        return real_margin(*args)

    def failing(m, request, params, cfg):
        real(m, request, params, cfg)  # the weights (or adapters) have moved: then it fails
        raise RuntimeError("out of memory (scripted)")

    def failing_steps(m, batch, n, params, **options):
        real_steps(m, batch, n, params, **options)  # the value has moved: then it fails
        raise RuntimeError("out of memory (scripted)")

    monkeypatch.setattr(_editors, "train", failing)
    monkeypatch.setattr(_grace, "train", failing)
    monkeypatch.setattr(_grace_paper, "train_steps", failing_steps)
    monkeypatch.setattr(_wise, "margin_loss", failing_margin)
    before = _state(tiny)
    modules = [n for n, _ in tiny.model.named_modules()]
    grads = [p.requires_grad for p in tiny.model.parameters()]
    report = run_edits(synthetic, tiny, load_editor(name), limit=2)
    assert [p.requires_grad for p in tiny.model.parameters()] == grads
    assert [e.error for e in report.edits] == ["RuntimeError: out of memory (scripted)"] * 2
    assert report.lines == [] and tiny.edits == []
    assert _same_state(before, _state(tiny))
    assert [n for n, _ in tiny.model.named_modules()] == modules
