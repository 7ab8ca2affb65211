"""``medibench edit analyze``: hidden states before and after each edit on the taught tiny LLaVA,
their statistics checked against restatements (distances, cosine, CKA against the states it
saved, AUROC against scikit-learn, fire rates against a count), the memory interface of
grace@paper and of a memory editor of another kind, and the errors it names."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app

runner = CliRunner()


def cli(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_line(text: str) -> str:
    return " ".join(text.split())


# a tol no edit reaches: each trains its 5 steps (the taught model knows some targets already)
CONFIGS = {
    "ft": {"max_steps": 5, "lr": 0.05, "tol": 1e-6},
    "lora": {"max_steps": 5, "tol": 1e-6},
    "grace@paper": {"n_iter": 5},
    "wise": {"n_iter": 5},
}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, synthetic, taught_path):
    """One run folder with ft, lora, grace@paper and wise (2 edits each), analysed once."""
    root = tmp_path_factory.mktemp("analyze")
    run = root / "run"
    for editor, config in CONFIGS.items():
        path = root / f"{editor}.json"
        path.write_text(json.dumps(config))
        r = cli(
            "edit",
            "run",
            "--tasks",
            synthetic.root,
            "--model",
            taught_path,
            "--editor",
            editor,
            "--config",
            path,
            "--limit",
            2,
            "--matcher",
            "exact",
            "--out",
            run,
        )
        assert r.exit_code == 0, r.output
    r = cli("edit", "analyze", run, "--resamples", 50)
    assert r.exit_code == 0, r.output
    return run, run / "edit_analysis", r.output


def _items(out):
    with (out / "items.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_every_editor_is_analysed_and_the_report_files_are_written(analysed):
    run, out, output = analysed
    data = json.loads((out / "analysis.json").read_text())
    assert [e["editor"] for e in data["editors"]] == ["ft", "lora", "grace@paper", "wise"]
    for e in data["editors"]:
        assert e["n_edits"] == 2 and e["layers"] == [0, 1] and not e["failed"]
    # ft/lora: -1, grace@paper and wise: -2
    assert [e["key_layer"] for e in data["editors"]] == [1, 1, 0, 0]
    for name in (
        "layers.csv",
        "memory.csv",
        "task_types.csv",
        "items.csv",
        "states.npz",
        "shift.png",
        "shift.svg",
        "pca_ft.png",
        "pca_lora.svg",
        "pca_grace_paper.png",
    ):
        assert (out / name).is_file(), name
    text = one_line(output)
    assert "Memory fires" in text and "grace@paper" in text and "analysis ->" in text
    wise = next(e for e in data["editors"] if e["editor"] == "wise")["memory"]
    assert wise["site"] == "layer -2 mlp.down_proj"  # its router, read through EditMemory
    loc = wise["fires"]["locality"]
    assert loc["n"] > 0 and wise["false_fire_rate"] == pytest.approx(loc["fired"] / loc["n"])


def test_distances_and_cosines_restate_from_the_saved_states(analysed):
    _, out, _ = analysed
    states = np.load(out / "states.npz")
    rows = [r for r in _items(out) if r["editor"] == "lora" and r["layer"] == "1"]
    pre, post = states["lora__pre__1"], states["lora__post__1"]
    key = {r["edit_id"]: i for i, r in enumerate(rows) if r["kind"] == "request"}
    for i, r in enumerate(rows):
        k = key[r["edit_id"]]
        assert float(r["distance_pre"]) == pytest.approx(np.linalg.norm(pre[i] - pre[k]))
        assert float(r["distance_post"]) == pytest.approx(np.linalg.norm(post[i] - post[k]))
        cos = pre[i] @ post[i] / (np.linalg.norm(pre[i]) * np.linalg.norm(post[i]))
        assert float(r["cosine"]) == pytest.approx(cos)


def test_ft_leaves_the_layers_below_its_own_unmoved(analysed):
    _, out, _ = analysed
    data = json.loads((out / "analysis.json").read_text())
    ft = next(e for e in data["editors"] if e["editor"] == "ft")
    below, edited = ft["by_layer"]
    assert below["cosine"] == pytest.approx(1.0, abs=1e-12)  # layer 0: before its MLP
    assert below["cka"] == pytest.approx(1.0, abs=1e-9)
    assert edited["cosine"] < 1.0


def test_cka_and_auroc_agree_with_restatements(analysed):
    from sklearn.metrics import roc_auc_score

    from medibench.stats import linear_cka

    _, out, _ = analysed
    data = json.loads((out / "analysis.json").read_text())
    states = np.load(out / "states.npz")
    items = _items(out)
    for e in data["editors"]:
        slug = e["editor"].replace("@", "_")
        for row in e["by_layer"]:
            layer = row["layer"]
            pre, post = states[f"{slug}__pre__{layer}"], states[f"{slug}__post__{layer}"]
            xc, yc = pre - pre.mean(0), post - post.mean(0)
            cka = np.linalg.norm(yc.T @ xc) ** 2 / (
                np.linalg.norm(xc.T @ xc) * np.linalg.norm(yc.T @ yc))  # fmt: skip
            assert row["cka"] == pytest.approx(cka, abs=1e-9)
            assert row["cka"] == pytest.approx(linear_cka(pre, post), abs=1e-12)
            mine = [r for r in items if r["editor"] == e["editor"] and r["layer"] == str(layer)
                    and r["kind"] in ("generality", "locality")]  # fmt: skip
            labels = [r["kind"] == "generality" for r in mine]
            near = [-float(r["distance_pre"]) for r in mine]
            assert row["auroc_pre"] == pytest.approx(roc_auc_score(labels, near))


def test_grace_fires_on_its_own_key_and_its_locality_fires_are_counted(analysed):
    _, out, _ = analysed
    data = json.loads((out / "analysis.json").read_text())
    grace = next(e for e in data["editors"] if e["editor"] == "grace@paper")
    assert grace["memory"]["site"].endswith("layers.0.mlp.down_proj")
    assert [e["editor"] for e in data["editors"] if e["memory"] is not None] == [
        "grace@paper",
        "wise",
    ]
    rows = [r for r in _items(out) if r["editor"] == "grace@paper" and r["layer"] == "0"]
    requests = [r for r in rows if r["kind"] == "request"]
    assert requests and all(r["fired"] == "True" for r in requests)
    assert all(float(r["memory_distance"]) < 1e-4 for r in requests)  # the key itself
    for kind in ("reliability", "generality", "locality"):
        mine = [r for r in rows if r["kind"] == kind]
        fired = [r for r in mine if r["fired"] == "True"]
        # one key of radius eps (1.0) per single edit: fires exactly within that distance
        assert {r["fired"] == "True" for r in mine} == {
            float(r["memory_distance"]) <= 1.0 for r in mine} or not mine  # fmt: skip
        assert grace["memory"]["fires"][kind]["n"] == len(mine)
        assert grace["memory"]["fires"][kind]["fired"] == len(fired)
    loc = grace["memory"]["fires"]["locality"]
    assert grace["memory"]["false_fire_rate"] == pytest.approx(loc["fired"] / loc["n"])


def test_the_report_has_a_latent_geometry_section(analysed):
    from medibench.knowledge_edit._report import geometry_panel
    from medibench.runs import RunStore

    run, _, _ = analysed
    with RunStore(run) as store:
        panel = geometry_panel(store, run)
    assert panel["title"] == "Model editing: latent-space geometry"
    titles = [t["title"] for t in panel["tables"]]
    assert "Representation shift and separability per layer" in titles
    assert "Memory fires" in titles
    assert {f["title"] for f in panel["figures"]} >= {
        "representation shift per layer",
        "grace@paper: PCA at decoder layer 0",
    }
    assert all(f["svg"].startswith("<svg") for f in panel["figures"])
    data = json.loads((run / "edit_analysis" / "analysis.json").read_text())
    fires = next(e for e in data["editors"] if e["editor"] == "grace@paper")["memory"]["fires"]
    row = next(t for t in panel["tables"] if t["title"] == "Memory fires")["rows"][0]
    n, k = fires["generality"]["n"], fires["generality"]["fired"]
    assert row[3].startswith(f"{(n - k) / n:.3f} ({n - k}/{n}) ")  # misses: not fired
    n, k = fires["locality"]["n"], fires["locality"]["fired"]
    assert row[2].startswith(f"{k / n:.3f} ({k}/{n}) ")  # false fires


def test_a_memory_editor_of_another_kind_plugs_in(tiny, synthetic):
    """Any editor with ``memory_site`` and ``fires`` is analysed as a memory (wise, balancedit
    plug in so): here an in-context editor with a one-key memory on layer 0's down_proj."""
    from medibench.io import read_image
    from medibench.knowledge_edit import InContextEditor
    from medibench.knowledge_edit._editing import decoder_layers
    from medibench.knowledge_edit._latent import PreStates, record_editor
    from medibench.knowledge_edit._latent_stats import summarize_recording
    from medibench.knowledge_edit._memory import MemoryEditor, MemoryLookup

    class Router(InContextEditor):
        name = "router"

        def memory_site(self, model):
            return decoder_layers(model)[0].mlp.down_proj

        def fires(self, model, queries):
            q = queries.double().cpu().numpy()
            distance = np.linalg.norm(q - q[0], axis=1)  # the request's own query first
            return MemoryLookup(distance <= 0.0, distance)

    editor = Router()
    assert isinstance(editor, MemoryEditor)
    requests = synthetic.requests[:1]

    def image(rel):
        return read_image(synthetic.image_path(rel), mode="rgb")

    rec = record_editor(tiny, editor, requests, image, (0, 1), PreStates())
    assert rec.memory["site"] == "model.language_model.layers.0.mlp.down_proj"
    assert rec.memory["fired"][0] and rec.memory["distance"][0] == 0.0
    summary = summarize_recording(rec, 0, n_resamples=20)
    assert summary["memory"]["fires"]["request"] == {"rate": 1.0, "fired": 1, "n": 1, "ci": None}
    assert tiny.context == [] and tiny.edits == []  # undone


@pytest.mark.parametrize("name", ["wise", "balancedit"])
def test_wise_and_balancedit_are_read_through_their_router(tiny, synthetic, name):
    """An editor whose ``memory(model)`` is an EditMemory (wise, balancedit) is analysed as a
    memory: per prompt, what its router reads (``query``), whether it fires and its reading
    (WISE's activation score negated: "distance" is lower-is-nearer for every editor)."""
    from medibench.io import read_image
    from medibench.knowledge_edit import load_editor
    from medibench.knowledge_edit._editing import EditCase
    from medibench.knowledge_edit._latent import PreStates, record_editor
    from medibench.knowledge_edit._latent_stats import summarize_recording

    editor = load_editor(name, {"n_iter": 2})
    requests = synthetic.requests[:1]

    def image(rel):
        return read_image(synthetic.image_path(rel), mode="rgb")

    rec = record_editor(tiny, editor, requests, image, (0, 1), PreStates())
    prompts = [(requests[0].image, requests[0].question)]
    prompts += [(p.image, p.question) for p in requests[0].probes]
    assert len(rec.memory["fired"]) == len(rec.memory["distance"]) == len(prompts)
    assert rec.memory["site"] == f"layer {editor.config.layer} {editor.config.module}"
    # the same readings, asked of the router in the edited model by hand
    req = requests[0]
    handle = editor.edit(tiny, EditCase(req.edit_id, image(req.image), req.question, req.target))
    try:
        router = editor.memory(tiny)
        sign = -1.0 if name == "wise" else 1.0
        for j, (rel, question) in enumerate(prompts):
            hidden = router.query(tiny, image(rel), question)
            assert bool(rec.memory["fired"][j]) == router.fires(hidden)
            assert rec.memory["distance"][j] == pytest.approx(
                sign * router.route_distance(hidden), rel=1e-6, abs=1e-9
            )
    finally:
        handle.undo()
    summary = summarize_recording(rec, 0, n_resamples=20)
    fires = summary["memory"]["fires"]
    assert fires["request"]["n"] == 1
    n_loc = sum(p.kind == "locality" for p in req.probes)
    if n_loc:
        assert fires["locality"]["n"] == n_loc
    assert tiny.edits == []  # undone


def test_analyze_names_what_it_cannot_use(tmp_path, analysed):
    run, _, _ = analysed
    r = cli("edit", "analyze", tmp_path)
    assert r.exit_code != 0 and f"{tmp_path} is not a run folder" in one_line(r.output)
    r = cli("edit", "analyze", run, "--layers", "0,7", "--out", tmp_path / "a")
    assert r.exit_code != 0
    assert "--layers 7: out of range; the model" in one_line(r.output)
    assert "has 2 decoder layers" in one_line(r.output)
    r = cli("edit", "analyze", run, "--layers", "zero", "--out", tmp_path / "a")
    assert r.exit_code != 0 and "--layers 'zero': expected whole numbers" in one_line(r.output)
    from medibench.runs import RunStore

    empty = tmp_path / "empty"
    with RunStore(empty):
        pass
    r = cli("edit", "analyze", empty)
    assert r.exit_code != 0 and f"{empty} holds no edit results" in one_line(r.output)


def test_a_task_set_no_longer_there_is_named(tmp_path, analysed):
    import shutil

    from medibench.knowledge_edit._store import spec_key
    from medibench.runs import RunStore

    run, _, _ = analysed
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".lock", "edit_analysis"))
    with RunStore(copy) as store:
        model, editor, setting = next(iter(store.connection.execute(
            "SELECT model, editor, setting FROM edit_results LIMIT 1")))  # fmt: skip
        spec = store.get_meta(spec_key(model, editor, setting))
        store.set_meta(spec_key(model, editor, setting), {**spec, "tasks": str(tmp_path / "gone")})
    r = cli("edit", "analyze", copy)
    assert r.exit_code != 0
    assert f"{copy}: the task set it was run on cannot be read again: {tmp_path / 'gone'}" in (
        one_line(r.output))  # fmt: skip


def test_grace_fires_exactly_where_its_codebook_replaces_the_output(tiny, synthetic):
    """``fires`` agrees with the codebook's own forward pass: the wrapped module's output at the
    prompt's last token is the key's value exactly for the queries it says fire."""
    from medibench.io import read_image
    from medibench.knowledge_edit import EditCase, GracePaperConfig, GracePaperEditor
    from medibench.knowledge_edit._latent import _capture

    editor = GracePaperEditor(GracePaperConfig(n_iter=2, eps=3.0))

    def image(rel):
        return read_image(synthetic.image_path(rel), mode="rgb")

    request = synthetic.requests[0]
    before = editor.fires(tiny, tiny.torch.zeros((2, 4)))
    assert not before.fired.any() and np.isnan(before.distance).all()  # no codebook yet
    handle = editor.edit(tiny, EditCase(request.edit_id, image(request.image), request.question,
                                        request.target))  # fmt: skip
    try:
        site = editor.memory_site(tiny)
        codebook = tiny.model.get_decoder().layers[-2].mlp.down_proj
        assert codebook is not site and codebook.inner is site
        outputs = []
        hook = codebook.register_forward_hook(lambda _m, _a, out: outputs.append(out[:, -1]))
        prompts = [(p.image, p.question) for p in synthetic.requests[0].probes]
        prompts += [(p.image, p.question) for p in synthetic.requests[1].probes]
        try:
            _, queries = _capture(tiny, prompts, image, (0,), site)
        finally:
            hook.remove()
        lookup = editor.fires(tiny, queries)
        value = codebook.values[0].detach()
        replaced = [bool(tiny.torch.equal(row, value)) for row in tiny.torch.cat(outputs)]
        assert replaced == list(lookup.fired)
        assert lookup.fired.any() and not lookup.fired.all()
    finally:
        handle.undo()


def test_layers_and_limit_choose_what_is_recorded(tmp_path, analysed):
    run, _, _ = analysed
    out = tmp_path / "one"
    r = cli("edit", "analyze", run, "--layers", "-1", "--limit", 1, "--resamples", 20, "--out", out)
    assert r.exit_code == 0, r.output
    data = json.loads((out / "analysis.json").read_text())
    assert [(e["n_edits"], e["layers"]) for e in data["editors"]] == [(1, [1])] * 4
    # grace@paper and wise edit layer -2 (0), not recorded: their key layer is the last recorded
    assert [e["key_layer"] for e in data["editors"]] == [1, 1, 1, 1]
    states = np.load(out / "states.npz")
    editors = ("ft", "lora", "grace_paper", "wise")
    assert sorted(states.files) == sorted(f"{e}__{w}__1" for e in editors for w in ("pre", "post"))
