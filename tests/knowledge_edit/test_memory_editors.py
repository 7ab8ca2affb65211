"""``balancedit`` and ``wise``: their versioned hyper-parameter files, their rules against hand
computed values (BalancEdit's radius and codebook, WISE's margins, scores, routing and TIES
merge), exact undo, single and sequential edits on the taught tiny LLaVA, their errors, and
the memory interface (``memory(model)``: ``query``, ``route_distance``, ``fires``) of both and
of ``grace@paper``."""

from __future__ import annotations

import dataclasses
import math

import pytest

from medibench.io import read_image
from medibench.knowledge_edit import (
    EDITOR_CONFIGS,
    BalancEditConfig,
    EditCase,
    EditError,
    TransformersAnswerer,
    WiseConfig,
    editor_config,
    load_editor,
)

torch = pytest.importorskip("torch")

MEMORY_EDITORS = ("balancedit", "wise")


def _cases(taskset, n):
    return [EditCase(r.edit_id, read_image(taskset.image_path(r.image), mode="rgb"), r.question,
                     r.target) for r in taskset.requests[:n]]  # fmt: skip


def _state(model):
    return {k: v.detach().clone() for k, v in model.model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(("name", "config"), [("balancedit", BalancEditConfig),
                                              ("wise", WiseConfig)])  # fmt: skip
def test_the_versioned_files_hold_every_option_and_the_defaults(name, config):
    assert EDITOR_CONFIGS[name] == f"{name}@1"
    values = editor_config(name)
    assert set(values) == {f.name for f in dataclasses.fields(config)}
    assert config(**values) == config()  # the file is the defaults, and load_editor reads it
    assert load_editor(name).config == config()
    assert load_editor(name, {"seed": 3}).config == dataclasses.replace(config(), seed=3)


# -- BalancEdit -----------------------------------------------------------------------------


def test_balanced_radius_weighs_the_negative_by_one_minus_alpha():
    from medibench.knowledge_edit._balancedit import balanced_radius

    assert balanced_radius(d_pos=1.0, d_neg=6.0, alpha=0.2) == pytest.approx(0.8 * 6 + 0.2 * 1)
    assert balanced_radius(1.0, 6.0, 0.0) == 6.0 and balanced_radius(1.0, 6.0, 1.0) == 1.0


class _Owner:
    teacher_prompt_length = None

    def __init__(self):
        self.model = torch.nn.Linear(1, 1)  # the watched model: any module
        self.model.config = type("C", (), {"hidden_act": "silu"})()


def _pooled():
    from medibench.knowledge_edit._balancedit import _pooled_class

    inner = torch.nn.Linear(4, 3)
    return _pooled_class(torch)(inner, _Owner(), "euclidean"), inner


def test_balancedit_codebook_new_key_split_and_same_answer():
    book, _ = _pooled()
    assert book.admit_balanced(torch.zeros(4), (5,), 3, 1.5, 0) == 0 and book.radii == [1.5]
    far = torch.tensor([4.0, 0, 0, 0])  # 4 > 1.5 + 1.0: a key of its own, its own radius
    assert book.admit_balanced(far, (6,), 3, 1.0, 0) == 1 and book.radii == [1.5, 1.0]
    near = torch.tensor([0, 2.0, 0, 0])  # 2 <= 1.5 + 0.8, another answer: both radii split
    assert book.admit_balanced(near, (7,), 3, 0.8, 0) == 2
    assert book.radii == pytest.approx([1.0 - 1e-5, 1.0, 0.8], abs=1e-12)  # 0.8 < 2 / 2 kept
    same = torch.tensor([0, 0, 1.2, 0])  # the origin's answer within reach: its radius grows
    assert book.admit_balanced(same, (5,), 3, 0.5, 0) == 0
    assert len(book.keys) == 3 and book.radii[0] == pytest.approx(1.2)


def test_balancedit_pools_each_rows_prompt_without_its_padding():
    book, inner = _pooled()
    book.admit_balanced(torch.tensor([1.0, 1, 0, 0]), (5,), 3, 0.5, 0)
    x = torch.zeros(2, 3, 4)
    x[0, 0] = torch.tensor([9.0, 9, 9, 9])  # row 0: a pad, then two tokens averaging the key
    x[0, 1], x[0, 2] = torch.tensor([2.0, 0, 0, 0]), torch.tensor([0.0, 2, 0, 0])
    x[1] = torch.tensor([1.0, 1, 0, 0])  # row 1: the key at every token, but padded far
    x[1, 0] = torch.tensor([-30.0, 0, 0, 0])
    book.watch.mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    with torch.no_grad():
        out, plain = book(x), inner(x)
    assert torch.equal(out[0, 2], book.values[0].detach())  # the prompt's last token only
    assert torch.equal(out[0, :2], plain[0, :2]) and torch.equal(out[1], plain[1])
    assert book.fires(torch.tensor([1.0, 1, 0, 0])) and not book.fires(torch.zeros(4))
    assert book.route_distance(torch.zeros(4)) == pytest.approx(math.sqrt(2))
    step = torch.tensor([[[1.0, 1, 0, 0]]])  # a generated token: not looked up
    with torch.no_grad():
        assert torch.equal(book(step), inner(step))


def test_balancedit_samples_are_seeded_noise_and_a_blank_image():
    import numpy as np

    from medibench.knowledge_edit._balancedit import _samples

    image = np.full((4, 4, 3), 100, dtype=np.uint8)
    positive, negative = _samples(image, BalancEditConfig())
    noise = np.random.default_rng(0).normal(0.0, 8.0, image.shape)
    assert np.array_equal(positive, np.clip(np.rint(100 + noise), 0, 255).astype(np.uint8))
    assert negative.dtype == np.uint8 and (negative == 255).all()


# -- WISE -----------------------------------------------------------------------------------


def test_wise_margin_loss_by_hand():
    from medibench.knowledge_edit._wise import margin_loss

    s_in, s_out = torch.tensor(12.0), torch.tensor(7.0)
    # relu(7 - 12 + 10) + relu(7 - 5) + relu(20 - 12) = 5 + 2 + 8
    assert float(margin_loss(torch, s_in, s_out, (5.0, 20.0, 10.0))) == 15.0
    assert float(margin_loss(torch, torch.tensor(40.0), torch.tensor(1.0), (5, 20, 10))) == 0.0


def test_ties_merge_by_hand():
    from medibench.knowledge_edit._wise import ties_merge

    base = torch.zeros(1, 4)
    a = torch.tensor([[3.0, -1.0, 0.5, 2.0]])
    b = torch.tensor([[1.0, 4.0, -0.2, -3.0]])
    # density 0.5 keeps each change's two largest entries: a -> [3, 0, 0, 2], b -> [0, 4, 0, -3]
    # weights 0.5 each: [1.5, 0, 0, 1] and [0, 2, 0, -1.5]; elected signs of the sums
    # [+, +, + (a sum of 0), -]; the entries of that sign (a zero has none) summed and divided
    # by their weights' sum: [1.5 / 0.5, 2 / 0.5, 0 (none: divisor 1), -1.5 / 0.5]
    merged = ties_merge(torch, base, [a, b], [0.5, 0.5], 0.5)
    assert torch.equal(merged, torch.tensor([[3.0, 4.0, 0.0, -3.0]]))


def _adapter(cfg=None, least=10.0):
    from medibench.knowledge_edit._wise import _adapter_class

    inner = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        inner.weight.copy_(torch.eye(2))
    adapter = _adapter_class(torch)(inner, _Owner(), cfg or WiseConfig())
    adapter.count, adapter.least = 1, least
    return adapter, inner


def test_wise_score_is_the_token_mean_or_beyond_100_tokens_the_maximum():
    adapter, _ = _adapter()
    original = torch.zeros(1, 3, 2)
    other = torch.zeros(1, 3, 2)
    other[0, :, 0] = torch.tensor([1.0, 2.0, 3.0])
    gaps = torch.nn.functional.silu(torch.tensor([1.0, 2.0, 3.0]))  # |silu(o) - silu(0)|
    weights = torch.tensor([[1.0, 1.0, 0.0]])  # the last token is padding
    mean = float(gaps[:2].mean())
    assert float(adapter.score(original, other, weights)[0]) == pytest.approx(mean)
    long = torch.zeros(1, 101, 2)
    longer = long.clone()
    longer[0, 5, 0], longer[0, 100, 0] = 4.0, 9.0
    mask = torch.ones(1, 101)
    mask[0, 100] = 0  # the maximum of the real tokens
    s = adapter.score(long, longer, mask)
    assert float(s[0]) == pytest.approx(float(torch.nn.functional.silu(torch.tensor(4.0))))
    assert float(adapter.score(long, longer, mask, infer=False)[0]) == pytest.approx(
        float(torch.nn.functional.silu(torch.tensor([4.0, 9.0]))[0]) / 100
    )


def test_wise_routes_each_row_to_the_original_the_side_memory_or_a_shard():
    adapter, inner = _adapter(least=10.0)  # threshold 0.4 * 10 = 4
    adapter.side = torch.diag(torch.tensor([1.0, 11.0]))  # moves x's second entry by 10 x[1]
    shard = torch.diag(torch.tensor([21.0, 1.0]))  # moves the first by 20 x[0]
    adapter.shards = [(shard, 5.0)]  # its threshold 2
    x = torch.tensor([[[0.0, 0.0]], [[0.0, 1.0]], [[1.0, 0.2]]])
    with torch.no_grad():
        out = adapter(x)
    assert torch.equal(out[0], inner(x[0]))  # all scores 0: the original
    assert torch.equal(out[1], x[1] @ adapter.side.T)  # side memory: 10 > 4, the shard 0
    assert torch.equal(out[2], x[2] @ shard.T)  # the shard's 20 beats the side's 2
    assert adapter.fires(x[1, 0]) and not adapter.fires(x[0, 0])
    silu = torch.nn.functional.silu
    assert adapter.route_distance(x[2, 0]) == pytest.approx(
        float(silu(torch.tensor(21.0)) - silu(torch.tensor(1.0)))
    )


def test_wise_saves_a_shard_every_save_freq_edits_and_merges_every_merge_freq(
    taught_path, synthetic
):
    model = TransformersAnswerer(taught_path, max_new_tokens=4)
    editor = load_editor("wise", {"save_freq": 1, "merge_freq": 2, "n_iter": 2})
    before = _state(model)
    handles = [editor.edit(model, c) for c in _cases(synthetic, 3)]
    adapter = editor.memory(model)
    # edit 1 saved, edit 2 saved and the two merged, edit 3 saved: two shards, one merge
    assert len(adapter.shards) == 2 and adapter.merges == 1 and adapter.count == 3
    assert torch.equal(adapter.side, adapter.inner.weight)  # a fresh side memory
    for h in reversed(handles):
        h.undo()
    assert editor.memory(model) is None and _same(before, _state(model))


# -- both, on the taught tiny LLaVA -----------------------------------------------------------


@pytest.mark.parametrize("name", MEMORY_EDITORS)
def test_edits_land_single_and_sequential_and_undo_is_exact(taught_path, synthetic, name):
    model = TransformersAnswerer(taught_path, max_new_tokens=4)
    cases = _cases(synthetic, 2)
    items = [(c.image, c.question) for c in cases]
    before, answers = _state(model), model.answer_batch(items)
    modules = [n for n, _ in model.model.named_modules()]
    editor = load_editor(name)
    assert editor.memory(model) is None
    first = editor.edit(model, cases[0])
    assert model.answer(cases[0].image, cases[0].question) == cases[0].target
    memory = editor.memory(model)
    assert memory.fires(memory.query(model, cases[0].image, cases[0].question))
    first.undo()
    assert [n for n, _ in model.model.named_modules()] == modules
    assert _same(before, _state(model)) and editor.memory(model) is None
    handles = [editor.edit(model, c) for c in cases]  # sequential: one memory, two edits
    assert model.answer_batch(items) == [c.target for c in cases]
    with pytest.raises(EditError, match="not the last edit"):
        handles[0].undo()
    for h in reversed(handles):
        h.undo()
    assert _same(before, _state(model)) and model.answer_batch(items) == answers
    assert [n for n, _ in model.model.named_modules()] == modules


def test_grace_paper_memory_fires_on_its_edit(taught_path, synthetic):
    model = TransformersAnswerer(taught_path, max_new_tokens=4)
    case, other = _cases(synthetic, 2)
    editor = load_editor("grace@paper")
    handle = editor.edit(model, case)
    memory = editor.memory(model)
    hidden = memory.query(model, case.image, case.question)
    assert memory.fires(hidden) and memory.route_distance(hidden) == pytest.approx(0, abs=1e-4)
    far = memory.query(model, other.image, other.question)
    assert memory.route_distance(far) == pytest.approx(
        float(torch.linalg.vector_norm(far - memory.keys[0])), rel=1e-6
    )
    handle.undo()
    assert editor.memory(model) is None


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("balancedit", {"alpha": 1.5}, r"balancedit: alpha must be in \[0, 1\], got 1.5"),
        ("balancedit", {"distance": "manhattan"}, "distance must be one of euclidean, cosine"),
        ("balancedit", {"positive_noise": -1}, "positive_noise must be at least 0"),
        ("balancedit", {"negative_fill": 300}, "negative_fill must be a grey level 0-255"),
        ("balancedit", {"n_iter": 0}, "n_iter must be at least 1"),
        ("wise", {"mask_ratio": 0}, r"wise: mask_ratio must be in \(0, 1\], got 0"),
        ("wise", {"act_margin": [1, 2]}, r"act_margin must be \[alpha, beta, gamma\]"),
        ("wise", {"merge_freq": 3, "save_freq": 2}, "merge_freq .3. must be a positive multiple"),
        ("wise", {"densities": 0}, r"densities must be in \(0, 1\]"),
        ("wise", {"locality_fill": -1}, "locality_fill must be a grey level 0-255"),
        ("wise", {"edit_lr": 1.0}, r"editor wise: unknown option\(s\) \['edit_lr'\]"),
    ],
)
def test_bad_options_are_refused(name, options, message):
    with pytest.raises(ValueError, match=message):
        load_editor(name, options)


@pytest.mark.parametrize("name", MEMORY_EDITORS)
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"module": "mlp.fc_out"}, "decoder layer -2 of .* has no module 'mlp.fc_out' .*`module`"),
        ({"layer": 5}, r"layer 5 out of range \(2 layers\)"),
    ],
)
def test_a_module_or_layer_the_model_lacks_is_a_clear_error(tiny, synthetic, name, options,
                                                            message):  # fmt: skip
    with pytest.raises(EditError, match=f"{name}: {message}"):
        load_editor(name, options).edit(tiny, _cases(synthetic, 1)[0])
    assert tiny.edits == []


def test_balancedit_refuses_a_model_that_generates_without_its_cache(tiny, synthetic):
    tiny.model.generation_config.use_cache = False
    try:
        with pytest.raises(EditError, match="balancedit: .* generates without its key-value"):
            load_editor("balancedit").edit(tiny, _cases(synthetic, 1)[0])
    finally:
        tiny.model.generation_config.use_cache = True
    assert tiny.edits == []


@pytest.mark.slow
@pytest.mark.parametrize("name", MEMORY_EDITORS)
def test_reliability_of_single_edits_on_the_readme_setting(synthetic24, taught24_path, name):
    model = TransformersAnswerer(taught24_path, max_new_tokens=4)
    editor, right = load_editor(name), 0
    for case in _cases(synthetic24, 24):
        handle = editor.edit(model, case)
        right += model.answer(case.image, case.question) == case.target
        handle.undo()
    assert right / 24 >= 0.9


def test_both_runs_are_stored_and_the_reports_section_shows_them(tmp_path, taught_path,
                                                                  synthetic):  # fmt: skip
    from medibench.knowledge_edit import make_matchers, run_edits
    from medibench.knowledge_edit._report import editing_tables
    from medibench.knowledge_edit._store import store_edit_run
    from medibench.runs import RunStore

    model = TransformersAnswerer(taught_path, max_new_tokens=4, batch_size=64)
    with RunStore(tmp_path / "run") as store:
        for name, sequential in (("balancedit", 0), ("wise", 2)):
            report = run_edits(synthetic, model, load_editor(name), sequential=sequential,
                               matchers=make_matchers(["exact"], model),
                               limit=sequential or 1)  # fmt: skip
            assert {e.error for e in report.edits} == {None} and model.edits == []
            store_edit_run(store, report, model="tiny", editor=name, sequential=sequential)
        titles = [t["title"] for t in editing_tables(store)]
    assert titles == ["tiny · balancedit · single", "tiny · wise · sequential-2"]
