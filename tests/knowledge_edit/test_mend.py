"""MEND (``edit train-mend``, ``--editor mend:DIR``): the gradient factors against autograd, the
hypernetwork's identity start and running statistics against numpy, the README setting's
reliability, exact undo, sequential runs, resume after SIGKILL, and every bad input's one line."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

from tests._cache import cached, digest
from tests._cli import error_line
from tests._cli import invoke as _invoke
from tests._kill import ROOT, kill_mid_write

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from medibench.knowledge_edit import (  # noqa: E402
    TransformersAnswerer,
    load_editor,
    make_matchers,
    run_edits,
    summarize,
)
from medibench.knowledge_edit._editing import EditCase, EditError  # noqa: E402
from medibench.knowledge_edit._mend import (  # noqa: E402
    HYPERNETWORK_FILE,
    MendEditor,
    edited_weights,
    factors,
    hypernetwork,
    transformed_updates,
)
from medibench.knowledge_edit._mend_train import (  # noqa: E402
    CONFIG_FILE,
    MendTrainConfig,
    MendTrainError,
    read_mend_config,
    train_mend,
)

_SOURCES = ("medibench.knowledge_edit.tiny_llava", "medibench.knowledge_edit._mend",
            "medibench.knowledge_edit._mend_train")  # fmt: skip


@pytest.fixture(scope="session")
def mend24_path(synthetic24, taught24_path):
    """The hypernetwork ``edit train-mend`` trains with mend@1's settings on the README's 24
    synthetic edits and its taught tiny LLaVA (built once, read-only)."""

    def build(folder):
        train_mend(synthetic24.root, taught24_path, folder, read_mend_config())

    salt = f"{taught24_path.name} {digest(synthetic24.root)} {CONFIG_FILE.read_text()}"
    return cached("mend-taught24", build, sources=_SOURCES, salt=salt)


def _case(ts, request):
    from medibench.io import read_image

    return EditCase(request.edit_id, read_image(ts.image_path(request.image), mode="rgb"),
                    request.question, request.target)  # fmt: skip


def _error(res) -> str:
    assert res.exit_code == 2, res.output
    return error_line(res)


def _train_args(tasks, model, out, *more):
    return ["edit", "train-mend", "--tasks", tasks, "--model", model, "--out", out, *more]


# -- the algorithm ----------------------------------------------------------------------------


def test_the_factors_outer_products_sum_to_autograds_weight_gradient(tiny, synthetic):
    settings = dataclasses.asdict(MendTrainConfig())
    weights = edited_weights(tiny, settings)
    assert [n.partition(".layers.")[2] for n in weights] == [  # the last two of two layers
        "0.mlp.up_proj.weight", "0.mlp.down_proj.weight",
        "1.mlp.up_proj.weight", "1.mlp.down_proj.weight",
    ]  # fmt: skip
    batch, n = tiny.teacher_batch(*_case(synthetic, synthetic.requests[0])[1:])
    found = factors(tiny, batch, n, weights)
    for p in tiny.model.parameters():
        p.requires_grad_(False)
    for p in weights.values():
        p.requires_grad_(True)
    tiny.forward(batch, n).loss.backward()
    for name, (x, delta) in found.items():
        assert x.shape[1] == weights[name].shape[1] and delta.shape[1] == weights[name].shape[0]
        torch.testing.assert_close(delta.T @ x, weights[name].grad, rtol=1e-5, atol=1e-7)


def test_an_untrained_hypernetwork_is_the_normalised_outer_product():
    rng = np.random.default_rng(0)
    x, d = rng.normal(size=(7, 3)), rng.normal(size=(7, 2))
    w = torch.nn.Parameter(torch.zeros(2, 3))
    settings = {**dataclasses.asdict(MendTrainConfig()), "edit_lr": 0.5}
    net = hypernetwork(torch, {"w": w}, settings).train()
    found = {"w": (torch.tensor(x, dtype=torch.float32), torch.tensor(d, dtype=torch.float32))}
    update = transformed_updates(net, found)["w"]
    z = np.concatenate([x, d], axis=1)
    h = (z - z.mean(0)) / (z.std(0, ddof=1) + 1e-7)  # u is zero: every layer is the identity
    expected = 0.5 * h[:, 3:].T @ h[:, :3]
    np.testing.assert_allclose(update.detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_the_running_statistics_are_numpys_over_every_row_seen():
    rng = np.random.default_rng(1)
    w = torch.nn.Parameter(torch.zeros(2, 3))
    net = hypernetwork(torch, {"w": w}, dataclasses.asdict(MendTrainConfig())).train()
    rows = [rng.normal(size=(k, 5)) * 3 + 1 for k in (4, 1, 9)]
    for z in rows:
        t = torch.tensor(z, dtype=torch.float32)
        transformed_updates(net, {"w": (t[:, :3], t[:, 3:])})
    every = np.concatenate(rows)
    transform = net.transforms["3x2"]
    assert int(transform.count) == 14
    np.testing.assert_allclose(transform.mean.numpy(), every.mean(0), rtol=1e-5)
    np.testing.assert_allclose((transform.m2 / 13).numpy(), every.var(0, ddof=1), rtol=1e-4)
    net.eval()  # editing: the statistics stay as they are
    transformed_updates(net, {"w": (t[:, :3], t[:, 3:])})
    assert int(transform.count) == 14


def test_the_shipped_config_is_the_versioned_defaults():
    shipped = yaml.safe_load(CONFIG_FILE.read_text())
    assert shipped.pop("version") == "mend@1"
    defaults = {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(MendTrainConfig()).items()}  # fmt: skip
    assert shipped == defaults
    assert read_mend_config() == MendTrainConfig()


# -- on the README's setting ------------------------------------------------------------------


def test_single_edits_of_the_readme_setting_are_reliable(synthetic24, taught24_path, mend24_path):
    model = TransformersAnswerer(taught24_path, max_new_tokens=4)
    report = run_edits(synthetic24, model, load_editor(f"mend:{mend24_path}"),
                       matchers=make_matchers(["exact"], model))  # fmt: skip
    s = summarize(report.lines)
    assert s["n_edits"] == 24 and not [e for e in report.edits if e.error]
    assert s["reliability"] >= 0.9
    assert all(e.steps == 1 for e in report.edits)  # one step per edit


def test_a_single_edit_lands_and_undo_restores_every_weight_bit_for_bit(
    synthetic24, taught24_path, mend24_path
):
    model = TransformersAnswerer(taught24_path, max_new_tokens=4)
    before = {k: v.clone() for k, v in model.model.state_dict().items()}
    case = _case(synthetic24, synthetic24.requests[0])
    handle = MendEditor(mend24_path).edit(model, case)
    assert model.answer(case.image, case.question) == case.target
    after = model.model.state_dict()
    changed = sorted(k for k in before if not torch.equal(after[k], before[k]))
    assert changed == sorted(
        w["name"] for w in json.loads((mend24_path / "mend.json").read_text())["weights"]
    )
    handle.undo()
    after = model.model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], v) for k, v in before.items())


@pytest.mark.slow
def test_24_sequential_edits_complete_and_are_undone(synthetic24, taught24_path, mend24_path):
    model = TransformersAnswerer(taught24_path, max_new_tokens=4)
    before = {k: v.clone() for k, v in model.model.state_dict().items()}
    report = run_edits(synthetic24, model, MendEditor(mend24_path), sequential=24,
                       matchers=make_matchers(["exact"], model))  # fmt: skip
    assert len(report.edits) == 24 and not [e for e in report.edits if e.error]
    assert {x.stage for x in report.lines} == {"immediate", "final"}
    assert all(torch.equal(model.model.state_dict()[k], v) for k, v in before.items())


# -- train-mend: resume, lock, bad inputs -----------------------------------------------------


@pytest.mark.slow
def test_a_training_killed_mid_checkpoint_resumes_to_the_same_hypernetwork(
    tiny_path, synthetic, tmp_path, monkeypatch
):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    more = ["--max-steps", 6, "--checkpoint-every", 2]
    killed, whole = tmp_path / "b" / "mend", tmp_path / "a" / "mend"
    # renames into the folder: mend.json, checkpoints at steps 2, 4, 6, the log, the weights
    kill_mid_write(_train_args(synthetic.root, tiny_path, killed, *more), killed, hang_at=2)
    assert not (killed / HYPERNETWORK_FILE).exists()
    assert torch.load(killed / "checkpoint.pt", weights_only=False)["step"] == 2
    resumed = _invoke(_train_args(synthetic.root, tiny_path, killed, *more))
    assert resumed.exit_code == 0, resumed.output
    assert "resumed at step 2, trained to step 6" in " ".join(resumed.output.split())
    assert _invoke(_train_args(synthetic.root, tiny_path, whole, *more)).exit_code == 0
    for name in (HYPERNETWORK_FILE, "train.jsonl"):
        assert (killed / name).read_bytes() == (whole / name).read_bytes()
    assert len((whole / "train.jsonl").read_text().splitlines()) == 6
    again = _invoke(_train_args(synthetic.root, tiny_path, whole, *more))
    assert "already trained (6 steps)" in " ".join(again.output.split())
    assert (killed / HYPERNETWORK_FILE).read_bytes() == (whole / HYPERNETWORK_FILE).read_bytes()


def test_a_second_training_on_the_same_folder_exits_3(tiny_path, synthetic, tmp_path):
    out = tmp_path / "mend"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom medibench.runs import run_folder_lock\n"
         "with run_folder_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)",
         str(out)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        res = _invoke(_train_args(synthetic.root, tiny_path, out, "--max-steps", 1))
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert res.exit_code == 3
    assert f"run folder {out} is in use by process {holder.pid}" in " ".join(res.output.split())


def test_train_mend_bad_inputs_are_one_line_and_exit_2(tiny_path, synthetic, tmp_path):
    ok = (synthetic.root, tiny_path, tmp_path / "out")
    line = _error(_invoke(_train_args(tmp_path / "nope", *ok[1:])))
    assert f"{tmp_path / 'nope'}" in line and "not an edit task set" in line
    line = _error(_invoke(_train_args(ok[0], tmp_path / "no-model", ok[2])))
    assert f"--model {tmp_path / 'no-model'}: not a folder" in line
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    line = _error(_invoke(_train_args(*ok[:2], other)))
    assert f"--out {other} holds files that are not a MEND training (notes.txt)" in line
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]  # nothing written there
    line = _error(_invoke(_train_args(*ok, "--max-steps", 0)))
    assert "--max-steps must be at least 1, got 0" in line
    bad = tmp_path / "bad.yaml"
    bad.write_text("lr: 0.1\nlayer: [-1]\n")
    line = _error(_invoke(_train_args(*ok, "--config", bad)))
    assert f"--config {bad}: unknown option(s) ['layer']" in line
    bad.write_text("modules: [mlp.nope]\n")
    line = _error(_invoke(_train_args(*ok, "--config", bad)))
    assert f"--model {tiny_path}: mend: decoder layer -2 has no linear module 'mlp.nope'" in line
    line = _error(_invoke(_train_args(*ok, "--config", tmp_path / "none.yaml")))
    assert f"--config {tmp_path / 'none.yaml'} does not exist" in line


def test_a_folder_trained_with_other_settings_is_not_resumed(tiny_path, synthetic, tmp_path):
    out = tmp_path / "mend"
    assert _invoke(_train_args(synthetic.root, tiny_path, out, "--max-steps", 1)).exit_code == 0
    line = _error(_invoke(_train_args(synthetic.root, tiny_path, out, "--max-steps", 2,
                                      "--seed", 3)))  # fmt: skip
    assert f"{out} was trained with other settings or files" in line and "--overwrite" in line
    res = _invoke(_train_args(synthetic.root, tiny_path, out, "--max-steps", 2, "--overwrite"))
    assert res.exit_code == 0 and "trained 2 steps" in " ".join(res.output.split())


def test_the_mend_editor_needs_a_finished_training(tmp_path):
    with pytest.raises(ValueError, match=r"--editor mend:DIR \(medibench edit train-mend"):
        load_editor("mend")
    with pytest.raises(ValueError, match="no such folder"):
        load_editor(f"mend:{tmp_path / 'none'}")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "mend.json").write_text("{}")
    with pytest.raises(ValueError, match="its training has not finished"):
        load_editor(f"mend:{tmp_path / 'half'}")
    with pytest.raises(MendTrainError):
        read_mend_config(tmp_path / "none.yaml")


def test_the_mend_editor_takes_no_options_and_refuses_other_weights(tiny, mend24_path):
    with pytest.raises(ValueError, match=r"takes no options, got \['lr'\]"):
        load_editor(f"mend:{mend24_path}", {"lr": 1.0})
    editor = MendEditor(mend24_path)
    editor.record = {**editor.record, "weights": [{"name": "x.weight", "shape": [2, 2]}]}
    with pytest.raises(EditError, match="its hypernetwork was trained for the weights"):
        editor.edit(tiny, EditCase("e", np.zeros((32, 32, 3), np.uint8), "how many ?", "two"))


def test_edit_run_with_mend_is_stored_reported_and_kept_apart_from_another_hypernetwork(
    tiny_path, synthetic, tmp_path
):
    from medibench.io import sha256_file
    from medibench.knowledge_edit._report import editing_tables
    from medibench.runs import RunStore

    nets = [tmp_path / f"mend{seed}" for seed in (0, 1)]
    for seed, out in enumerate(nets):
        trained = _invoke(_train_args(synthetic.root, tiny_path, out, "--max-steps", 1,
                                      "--seed", seed))  # fmt: skip
        assert trained.exit_code == 0, trained.output
    run = tmp_path / "run"
    args = ["edit", "run", "--tasks", synthetic.root, "--model", tiny_path, "--limit", 1,
            "--matcher", "exact", "--max-new-tokens", 4, "--out", run]  # fmt: skip
    res = _invoke([*args, "--editor", f"mend:{nets[0]}"])
    assert res.exit_code == 0 and "1 edits (single, mend)" in " ".join(res.output.split())
    with RunStore(run) as store:
        spec = store.get_meta(f"knowledge_edit/{tiny_path}/mend/single")
        titles = [t["title"] for t in editing_tables(store)]
    assert spec["editor"]["hypernetwork"] == str(nets[0])
    assert spec["editor"]["hypernetwork_sha256"] == sha256_file(nets[0] / HYPERNETWORK_FILE)
    assert titles == [f"{tiny_path} · mend · single"]  # the report's Model editing section
    line = _error(_invoke([*args, "--editor", f"mend:{nets[1]}"]))
    assert "made with another hypernetwork" in line and f"now {nets[1]}, sha256" in line
    assert _invoke([*args, "--editor", f"mend:{nets[1]}", "--overwrite"]).exit_code == 0
    config = tmp_path / "c.yaml"
    config.write_text("lr: 1.0\n")
    line = _error(_invoke([*args, "--editor", f"mend:{nets[1]}", "--config", config]))
    assert f"editor config {config}: editor mend: its settings are those of its training" in line
    line = _error(_invoke([*args, "--editor", "mend"]))
    assert "the mend editor needs its trained hypernetwork: --editor mend:DIR" in line
