"""``grace@paper`` (GRACE as EasyEdit implements it) against a reference written here from
EasyEdit's ``easyeditor/models/grace/GRACE.py``; its codebook rules; exact undo; its errors;
``grace`` as the alias of ``grace-tokens``."""

from __future__ import annotations

import re

import pytest

from medibench.io import read_image
from medibench.knowledge_edit import (
    EditCase,
    EditError,
    Editor,
    GracePaperConfig,
    GracePaperEditor,
    TransformersAnswerer,
    load_editor,
    make_matchers,
    run_edits,
    summarize,
)

torch = pytest.importorskip("torch")


class ReferenceGrace(Editor):
    """EasyEdit's GRACE for one edit on the original model, restated as a forward hook.

    The key is ``down_proj``'s input at the position before the first label (EasyEdit: the
    count of ``-100`` labels minus one); the value, 32 uniform draws, is trained by 20 Adam
    steps at learning rate 1.0 on the target's tokens (no end of turn); radius 1.0, Euclidean.
    Outside training, a pass looks up its last token (EasyEdit's ``generate`` sets
    ``key_id = -1``; each cached generation step holds one token) and writes the value there
    when within the radius (``replace_last``).
    """

    name = "reference-grace"

    def edit(self, model, request):
        from medibench.knowledge_edit._editing import decoder_layers

        target = decoder_layers(model)[-2].mlp.down_proj
        batch, _ = model.teacher_batch(request.image, request.question, request.target)
        first = int((batch["labels"][0] != -100).nonzero()[0])  # the answer's first token
        labels = batch["labels"].clone()
        labels[:, -1] = -100  # EasyEdit labels the target text's tokens alone
        batch["labels"] = labels
        state = {"at": first - 1}
        seen = {}

        def grab(_mod, args, _out):
            seen["key"] = args[0][0, first - 1].detach().float()

        probe = target.register_forward_hook(grab)
        with torch.no_grad():
            model.model(**{k: v for k, v in batch.items() if k != "labels"})
        probe.remove()
        start = torch.Generator().manual_seed(0)
        value = torch.nn.Parameter(torch.rand(target.out_features, generator=start))

        def replace(_mod, args, out):
            x = args[0]
            at = state["at"] if state["at"] is not None else x.shape[1] - 1
            near = torch.linalg.vector_norm(x[:, at].float() - seen["key"], dim=-1) <= 1.0
            out = out.clone()
            out[near, at] = value.to(out.dtype)
            return out

        hook = target.register_forward_hook(replace)
        opt = torch.optim.Adam([value], lr=1.0)
        for _ in range(20):
            loss = model.model(**batch).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        value.requires_grad_(False)
        state["at"] = None
        return self._applied(model, request, hook.remove)


def _scores(taskset, path, editor):
    model = TransformersAnswerer(path, max_new_tokens=4, batch_size=64)
    report = run_edits(taskset, model, editor, matchers=make_matchers(["exact"], model))
    s = summarize(report.lines)
    return {m: s[m] for m in ("reliability", "generality", "locality")}, report


@pytest.mark.slow
def test_grace_paper_matches_easyedits_algorithm_on_the_readme_setting(synthetic24, taught24_path):
    ours, report = _scores(synthetic24, taught24_path, load_editor("grace@paper"))
    reference, _ = _scores(synthetic24, taught24_path, ReferenceGrace())
    # the float32 model's teaching differs by CPU and code path (measured: reliability 1.0 and
    # locality >= 0.95 on an AMD EPYC; 0.958-1.0 and 0.784-0.972 on an Intel Xeon Sapphire
    # Rapids under default, avx2, avx512): the bounds hold on both, the reference decides
    assert ours["reliability"] >= 0.95 and ours["locality"] >= 0.75
    for metric, value in ours.items():
        assert value == pytest.approx(reference[metric], abs=0.05), metric
    assert all(e.steps == 20 and e.error is None for e in report.edits)


class _Owner:
    teacher_prompt_length = None


def _codebook(distance="euclidean"):
    from medibench.knowledge_edit._grace_paper import _codebook_class

    inner = torch.nn.Linear(4, 3)
    return _codebook_class(torch)(inner, _Owner(), distance), inner


def _start(width=3, seed=0):
    return torch.rand(width, generator=torch.Generator().manual_seed(seed))


def test_codebook_rules_new_key_split_and_coverage():
    book, _ = _codebook()
    cfg = GracePaperConfig()  # eps 1.0
    origin = torch.zeros(4)
    assert book.admit(origin, (5,), 3, cfg) == 0
    assert book.radii == [1.0] and torch.equal(book.values[0].detach(), _start())
    far = torch.tensor([3.0, 0, 0, 0])  # 3 > eps + radius 1
    assert book.admit(far, (6,), 3, cfg) == 1 and book.radii == [1.0, 1.0]
    near = torch.tensor([0, 1.5, 0, 0])  # within eps + radius of the origin, another answer
    assert book.admit(near, (7,), 3, cfg) == 2
    assert book.radii == pytest.approx([0.75 - 1e-5, 1.0, 0.75], abs=1e-12)
    same = torch.tensor([0, 0, 1.2, 0])  # the origin's answer: no new key, its radius grows
    saved = book.snapshot()
    assert book.admit(same, (5,), 3, cfg) == 0
    assert len(book.keys) == 3 and book.radii[0] == pytest.approx(1.2)
    with torch.no_grad():
        book.values[0].add_(1.0)  # trained in place
    book.restore(saved)
    assert book.radii == pytest.approx([0.75 - 1e-5, 1.0, 0.75], abs=1e-12)
    assert torch.equal(book.values[0].detach(), _start())


def test_lookup_replaces_the_last_token_of_rows_within_a_radius():
    book, inner = _codebook()
    book.admit(torch.tensor([1.0, 0, 0, 0]), (5,), 3, GracePaperConfig())
    x = torch.full((2, 3, 4), 5.0)  # far from the key everywhere but where set
    x[0, 2] = torch.tensor([1.0, 0.5, 0, 0])  # 0.5 from the key: within
    x[1, 2] = torch.tensor([1.0, 1.5, 0, 0])  # 1.5: outside
    with torch.no_grad():
        out, plain = book(x), inner(x)
    assert torch.equal(out[0, 2], _start())
    assert torch.equal(out[1], plain[1]) and torch.equal(out[0, :2], plain[0, :2])
    book.owner[0].teacher_prompt_length = 2  # a teacher-forced pass: the prompt's last token
    x[0, 1] = torch.tensor([1.0, 3.0, 0, 0])  # row 0's prompt ends far from the key
    x[1, 1] = torch.tensor([1.0, 0, 0, 0])
    with torch.no_grad():
        plain = inner(x)
    try:
        with torch.no_grad():
            out = book(x)
    finally:
        book.owner[0].teacher_prompt_length = None
    assert torch.equal(out[1, 1], _start()) and torch.equal(out[0], plain[0])


def test_cosine_distance_is_one_minus_the_cosine_similarity():
    from scipy.spatial.distance import cosine

    book, _ = _codebook("cosine")
    key, query = torch.tensor([1.0, 2, 0, 1]), torch.tensor([0.5, -1, 3, 2])
    book.admit(key, (5,), 3, GracePaperConfig(distance="cosine"))
    dist, idx = book.nearest(query[None])
    assert float(dist[0]) == pytest.approx(cosine(key.numpy(), query.numpy()), abs=1e-6)
    assert int(idx[0]) == 0


def _state(model):
    return {k: v.detach().clone() for k, v in model.model.state_dict().items()}


def test_edits_land_single_and_sequential_and_undo_is_exact(taught_path, synthetic):
    model = TransformersAnswerer(taught_path, max_new_tokens=4)
    cases = [EditCase(r.edit_id, read_image(synthetic.image_path(r.image), mode="rgb"),
                      r.question, r.target) for r in synthetic.requests[:2]]  # fmt: skip
    items = [(c.image, c.question) for c in cases]
    before, answers = _state(model), model.answer_batch(items)
    modules = [n for n, _ in model.model.named_modules()]
    editor = load_editor("grace@paper")
    first = editor.edit(model, cases[0])
    assert model.answer(cases[0].image, cases[0].question) == cases[0].target
    assert first.steps == 20 and first.loss is not None
    first.undo()
    assert [n for n, _ in model.model.named_modules()] == modules
    after = _state(model)
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
    handles = [editor.edit(model, c) for c in cases]  # sequential: two keys in one codebook
    assert len(model.model.get_decoder().layers[-2].mlp.down_proj.keys) == 2
    assert model.answer_batch(items) == [c.target for c in cases]
    with pytest.raises(EditError, match="not the last edit"):
        handles[0].undo()
    for h in reversed(handles):
        h.undo()
    after = _state(model)
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert model.answer_batch(items) == answers


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"distance": "manhattan"}, ValueError, "distance must be one of euclidean, cosine"),
        ({"eps": 0}, ValueError, "eps must be positive"),
        ({"n_iter": 0}, ValueError, "n_iter must be at least 1"),
        ({"edit_lr": 1.0}, ValueError, r"editor grace@paper: unknown option\(s\) \['edit_lr'\]"),
    ],
)
def test_bad_options_are_refused(options, error, message):
    with pytest.raises(error, match=message):
        load_editor("grace@paper", options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"module": "mlp.fc_out"}, "decoder layer -2 of .* has no module 'mlp.fc_out' .*`module`"),
        ({"layer": 5}, r"grace@paper: layer 5 out of range \(2 layers\)"),
    ],
)
def test_a_module_or_layer_the_model_lacks_is_a_clear_error(tiny, synthetic, options, message):
    r = synthetic.requests[0]
    case = EditCase(r.edit_id, read_image(synthetic.image_path(r.image)), r.question, r.target)
    with pytest.raises(EditError, match=message):
        load_editor("grace@paper", options).edit(tiny, case)
    assert tiny.edits == []


def test_a_model_that_generates_without_its_cache_is_refused(tiny, synthetic):
    r = synthetic.requests[0]
    case = EditCase(r.edit_id, read_image(synthetic.image_path(r.image)), r.question, r.target)
    tiny.model.generation_config.use_cache = False
    try:
        with pytest.raises(EditError, match="generates without its key-value cache"):
            load_editor("grace@paper").edit(tiny, case)
    finally:
        tiny.model.generation_config.use_cache = True
    assert tiny.edits == []


def test_grace_is_the_alias_of_grace_tokens():
    from medibench.knowledge_edit import EDITORS, GraceTokensEditor

    editor = load_editor("grace", {"layer": -1})
    assert isinstance(editor, GraceTokensEditor) and editor.name == "grace-tokens"
    assert "grace" not in EDITORS and {"grace@paper", "grace-tokens"} <= set(EDITORS)
    assert isinstance(load_editor("grace@paper"), GracePaperEditor)


def test_cli_editor_grace_runs_grace_tokens_with_a_note(tmp_path, tiny_path, synthetic):
    import json

    from typer.testing import CliRunner

    from medibench.cli import app

    run = tmp_path / "run"
    args = ["edit", "run", "--tasks", str(synthetic.root), "--model", str(tiny_path),
            "--editor", "grace", "--limit", "1", "--matcher", "exact", "--max-new-tokens", "2",
            "--out", str(run)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "--editor grace is the old name of grace-tokens" in said
    assert "GRACE as published is grace@paper" in said
    lines = [json.loads(x) for x in (run / "edit_results.jsonl").read_text().splitlines()]
    assert {x["editor"] for x in lines} == {"grace-tokens"}


class EasyEditGrace(Editor):
    """EasyEdit's own GRACE classes (``easyeditor.models.grace.GRACE``), unmodified, behind
    the editor interface: its ``GRACEMultimodal`` wraps ``down_proj`` of layer -2 and trains on
    the teacher-forced batch without the end of turn (its sequence ends with the target text);
    each generation first sets ``key_id = -1``, as its ``GRACE.generate`` does."""

    name = "easyedit-grace"

    def edit(self, model, request):
        from types import SimpleNamespace

        from easyeditor.models.grace.GRACE import GRACEMultimodal

        from medibench.knowledge_edit._editing import decoder_layers

        target = decoder_layers(model)[-2].mlp.down_proj
        name = next(n for n, mod in model.model.named_modules() if mod is target)
        name = re.sub(r"\.(\d+)", r"[\1]", name)  # its own spelling: layers[0]
        config = SimpleNamespace(
            inner_params=[f"{name}.weight"], edit_lr=1.0, n_iter=20, eps=1.0, dist_fn="euc",
            val_init="cold", val_train="sgd", replacement="replace_last",
            eps_expand="coverage", num_pert=8,
        )  # fmt: skip
        batch, _ = model.teacher_batch(request.image, request.question, request.target)
        length = batch["input_ids"].shape[1]  # EasyEdit's sequence ends with the target text:
        batch = {k: v[:, :-1] if k != "pixel_values" and v.ndim >= 2 and v.shape[1] == length
                 else v for k, v in batch.items()}  # fmt: skip
        torch.manual_seed(0)
        grace = GRACEMultimodal(config, model.model, "cpu")
        grace.edit(config, batch, request.target)
        adapter = next(m for m in model.model.modules() if type(m).__name__ == "GRACEAdapter")
        generate = model.model.generate

        def generate_from_the_last_token(*args, **kwargs):
            adapter.key_id = -1
            return generate(*args, **kwargs)

        model.model.generate = generate_from_the_last_token

        def restore():
            del model.model.generate
            grace.reset_layer()

        return self._applied(model, request, restore)


@pytest.mark.slow
def test_grace_paper_matches_easyedit_itself_where_installed(synthetic24, taught24_path):
    pytest.importorskip("easyeditor.models.grace.GRACE")
    ours, _ = _scores(synthetic24, taught24_path, load_editor("grace@paper"))
    theirs, _ = _scores(synthetic24, taught24_path, EasyEditGrace())
    for metric, value in ours.items():
        assert value == pytest.approx(theirs[metric], abs=0.05), metric
