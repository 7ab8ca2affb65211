"""``medibench compare`` and ``merge --rename``: runs of same-named models in one table, paired
against the first run, and merged apart under new names."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from medibench._identity import output_folder
from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.runs import RunStore, RunStoreError
from medibench.runs._compare import compare_runs, compared_panel
from medibench.runs._shard import merge
from medibench.samples import Prediction, Score
from tests.runs.conftest import make_native

runner = CliRunner()


def _run(run_dir, samples, values, *, checkpoint, model="ip2p", seed=0, extra=(), icl=None):
    """A run folder of model ``model`` (an ``ip2p`` spec at ``checkpoint``): one output per
    sample of ``values`` (``{sample_id: acc}``) scored ``acc`` under an unregistered protocol
    (plain means), and ``extra`` models with the same values."""
    with RunStore(run_dir) as st:
        names = [model, *extra]
        specs = {
            n: {"model": "ip2p", "options": {"checkpoint": checkpoint, "name": n}} for n in names
        }
        if icl is not None:
            specs = {n: {**spec, "icl": icl} for n, spec in specs.items()}
        config = {"dataset": "native:data", "seed": seed, "k": 1, "models": names}
        st.set_meta("config", config)
        st.set_meta("model_specs_by_name", specs)
        st.put_samples(samples)
        for name in names:
            for sid, acc in values.items():
                path = f"outputs/{output_folder(name)}/{sid}_0.png"
                (st.run_dir / path).parent.mkdir(parents=True, exist_ok=True)
                (st.run_dir / path).write_bytes(f"{checkpoint} {sid}".encode())
                st.put_prediction(Prediction(sample_id=sid, model=name, k=0, path=path, seed=1))
                st.put_score(
                    Score(
                        sample_id=sid,
                        model=name,
                        protocol="toy",
                        protocol_version="1",
                        metrics={"acc": acc},
                    )  # fmt: skip
                )
    return run_dir


@pytest.fixture
def two_runs(tmp_path):
    samples = list(load_dataset(f"native:{make_native(tmp_path / 'data', n=4)}"))
    base = _run(tmp_path / "base", samples, {"s000": 1.0, "s001": 2.0, "s002": 3.0, "s003": 4.0},
                checkpoint="base.ckpt")  # fmt: skip
    ft = _run(tmp_path / "ft", samples[:3], {"s000": 2.0, "s001": 2.0, "s002": 5.0},
              checkpoint="ft.ckpt")  # fmt: skip
    return base, ft


def test_compare_means_settings_and_paired_differences_by_hand(two_runs):
    base, ft = two_runs
    res = compare_runs([base, ft], labels=[f"{ft}=tuned"])
    assert res.labels == ["base", "tuned"] and res.metrics == ["acc"]
    assert res.settings == ["spec", "checkpoint"]  # the name option and the same config: hidden
    (a, b) = res.rows
    assert (a["label"], a["model"], a["n"], a["acc"], a["checkpoint"]) == (
        "base",
        "ip2p",
        4,
        2.5,
        "base.ckpt",
    )  # (1 + 2 + 3 + 4) / 4
    assert (b["label"], b["n"], b["acc"], b["checkpoint"]) == ("tuned", 3, 3.0, "ft.ckpt")
    assert a["spec"] != b["spec"]
    (pair,) = res.paired
    # shared s000..s002: differences 1, 0, 2; exact sign flips: |sum| >= 3 for 4 of 8 vectors
    assert (pair["label"], pair["against"], pair["metric"], pair["n"]) == (
        "tuned",
        "base/ip2p",
        "acc",
        3,
    )
    assert pair["mean_diff"] == pytest.approx(1.0)
    assert pair["permutation_p"] == pytest.approx(0.5)
    assert pair["ci_low"] <= 1.0 <= pair["ci_high"]
    assert res.renames == [f"{base}:ip2p=ip2p-base", f"{ft}:ip2p=ip2p-tuned"]


def test_compare_cli_writes_the_table_and_merges_the_runs_apart(two_runs, tmp_path):
    base, ft = two_runs
    out, csv, js = tmp_path / "both", tmp_path / "t.csv", tmp_path / "t.json"
    res = runner.invoke(app, ["compare", str(base), str(ft), "--label", f"{ft}=tuned",
                              "--out", str(out), "--csv", str(csv), "--json", str(js)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "paired differences against base" in res.output
    assert "ip2p-tuned" in res.output
    lines = csv.read_text().splitlines()
    assert lines[0] == "label,run,model,spec,checkpoint,n,acc"
    assert lines[1].endswith(",base.ckpt,4,2.5") and lines[2].endswith(",ft.ckpt,3,3.0")
    data = json.loads(js.read_text())
    assert data["paired"][0]["n"] == 3 and data["paired"][0]["mean_diff"] == pytest.approx(1.0)
    with RunStore.open_existing(out) as st:
        specs = st.get_meta("model_specs_by_name")
        assert specs["ip2p-tuned"]["renamed_from"] == "ip2p"
        assert specs["ip2p-tuned"]["options"] == {"checkpoint": "ft.ckpt", "name": "ip2p"}
        assert sorted(st.get_meta("config")["models"]) == ["ip2p-base", "ip2p-tuned"]
        preds = {(p.model, p.sample_id): p for p in st.predictions()}
        assert len(preds) == 7 and len(st.scores()) == 7
        moved = preds[("ip2p-tuned", "s000")].path
        assert moved == f"outputs/{output_folder('ip2p-tuned')}/s000_0.png"
        assert (out / moved).read_bytes() == b"ft.ckpt s000"
        panel = compared_panel(st, out)  # the report's "Runs compared" section
    table, pairs = panel["tables"]
    assert table["columns"] == ["label", "model", "merged as", "spec", "checkpoint", "n", "acc"]
    assert [r[:3] for r in table["rows"]] == [["base", "ip2p", "ip2p-base"],
                                              ["tuned", "ip2p", "ip2p-tuned"]]  # fmt: skip
    assert table["rows"][1][4:] == ["ft.ckpt", "3", "3"] and pairs["rows"][0][4:6] == ["3", "1"]


def test_merge_rename_one_run_and_every_run(two_runs, tmp_path):
    base, ft = two_runs
    with pytest.raises(RunStoreError, match="model 'ip2p' has spec"):
        merge([base, ft], tmp_path / "refused")
    rep = merge([base, ft], tmp_path / "a", [f"{ft}:ip2p=ip2p-ft"])
    assert rep.predictions == 7
    with RunStore.open_existing(tmp_path / "a") as st:
        assert {p.model for p in st.predictions()} == {"ip2p", "ip2p-ft"}
        assert {s.model for s in st.scores()} == {"ip2p", "ip2p-ft"}
    res = runner.invoke(app, ["merge", str(base), "--out", str(tmp_path / "b"),
                              "--rename", "ip2p=base"])  # fmt: skip
    assert res.exit_code == 0, res.output
    with RunStore.open_existing(tmp_path / "b") as st:
        assert {p.model for p in st.predictions()} == {"base"}


@pytest.mark.parametrize(
    ("rename", "message"),
    [
        ("ip2p", "expected OLD=NEW"),
        ("sd=x", "holds no model 'sd'"),
        ("nowhere:ip2p=x", "is not one of the runs"),
        ("{base}:ip2p=x", None),  # fine alone; paired with the next it is ambiguous
    ],
)
def test_merge_rename_errors_name_the_run_and_the_model(two_runs, tmp_path, rename, message):
    base, ft = two_runs
    text = rename.format(base=base)
    if message is None:
        with pytest.raises(RunStoreError, match="already renamed to 'x'"):
            merge([base, ft], tmp_path / "out", [text, "ip2p=y"])
        return
    res = runner.invoke(app, ["merge", str(base), str(ft), "--out", str(tmp_path / "out"),
                              "--rename", text])  # fmt: skip
    assert res.exit_code == 2 and message in res.output.replace("\n", " "), res.output


def test_rename_onto_a_name_the_run_holds_and_labels_that_clash(tmp_path):
    samples = list(load_dataset(f"native:{make_native(tmp_path / 'data', n=2)}"))
    run = _run(tmp_path / "r", samples, {"s000": 1.0}, checkpoint="c", extra=("sd",))
    with pytest.raises(RunStoreError, match="two models named 'sd'"):
        merge([run], tmp_path / "out", ["ip2p=sd"])
    other = _run(tmp_path / "x" / "r", samples, {"s000": 1.0}, checkpoint="c")
    with pytest.raises(RunStoreError, match="two runs are labelled 'r'"):
        compare_runs([run, other])
    with pytest.raises(RunStoreError, match="no run has it"):
        compare_runs([run], metrics=["ssim"])


def test_compare_two_runs_of_the_classical_model_with_another_option(tmp_path):
    data = make_native(tmp_path / "data", n=3)
    for out, extra in (("a", ["--model", "identity"]), ("b", ["--model-option", "dilate_px=3"])):
        args = ["run", "--dataset", f"native:{data}", "--model", "classical", *extra]
        res = runner.invoke(app, [*args, "--out", str(tmp_path / out), "--no-progress"])
        assert res.exit_code == 0, res.output
    res = compare_runs([tmp_path / "a", tmp_path / "b"], metrics=["ssim", "roi_ssim"])
    assert res.settings == ["spec", "dilate_px"]  # identity's spec has no dilate_px to differ
    rows = {(r["label"], r["model"]): r for r in res.rows}
    assert set(rows) == {("a", "classical"), ("a", "identity"), ("b", "classical")}
    assert rows[("b", "classical")]["dilate_px"] == 3 and rows[("a", "classical")]["n"] == 3
    by_metric = {p["metric"]: p for p in res.paired}  # b's classical against a's, 3 shared
    for m in ("ssim", "roi_ssim"):
        assert by_metric[m]["n"] == 3 and by_metric[m]["against"] == "a/classical"
        want = rows[("b", "classical")][m] - rows[("a", "classical")][m]
        assert by_metric[m]["mean_diff"] == pytest.approx(want)


def test_a_k_sweep_pairs_each_run_with_the_first_runs_only_model(tmp_path):
    samples = list(load_dataset(f"native:{make_native(tmp_path / 'data', n=2)}"))
    runs = [
        _run(tmp_path / f"k{k}", samples, {"s000": 1.0 + k, "s001": 2.0 * k}, checkpoint="c",
             model=f"ip2p@icl-{k}", icl={"k": k, "select": "random"})
        for k in (1, 2, 4)
    ]  # fmt: skip
    res = compare_runs(runs)
    assert res.settings == ["spec", "icl.k"]  # the pool selection is the same: hidden
    assert [(r["model"], r["icl.k"], r["acc"]) for r in res.rows] == [
        ("ip2p@icl-1", 1, 2.0), ("ip2p@icl-2", 2, 3.5), ("ip2p@icl-4", 4, 6.5)
    ]  # fmt: skip
    assert [(p["against"], p["n"], p["mean_diff"]) for p in res.paired] == [
        ("k1/ip2p@icl-1", 2, 1.5), ("k1/ip2p@icl-1", 2, 4.5)
    ]  # fmt: skip
    assert res.renames == []  # three names: merged as they are


def test_a_training_folder_stands_for_its_last_evaluation(tmp_path):
    """Training folders (``medibench train --out DIR``: ``train.jsonl``, ``eval/step-N/``)
    compared as their last evaluated checkpoint, labelled by the folder, merged with --out."""
    samples = list(load_dataset(f"native:{make_native(tmp_path / 'data', n=3)}"))
    trainings = {}
    for name, values in (("p-only", (1.0, 2.0, 3.0)), ("all", (2.0, 4.0, 6.0))):
        folder = tmp_path / "runs" / name
        _run(folder / "eval" / "step-2", samples, {"s000": 0.0}, checkpoint=f"{name}/ckpt-2")
        last = dict(zip(("s000", "s001", "s002"), values, strict=True))
        _run(folder / "eval" / "step-10", samples, last, checkpoint=f"{name}/ckpt-10")
        (folder / "eval" / "step-10.tmp").mkdir()  # not an evaluation
        (folder / "train.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
        trainings[name] = folder
    p_only, everything = trainings["p-only"], trainings["all"]
    res = compare_runs([p_only, everything])
    assert res.labels == ["p-only", "all"] and res.runs == [
        p_only / "eval" / "step-10",
        everything / "eval" / "step-10",
    ]
    assert [(r["label"], r["n"], r["acc"], r["checkpoint"]) for r in res.rows] == [
        ("p-only", 3, 2.0, "p-only/ckpt-10"),
        ("all", 3, 4.0, "all/ckpt-10"),
    ]
    assert "step" not in res.settings  # the same step: not a column
    assert res.paired[0]["mean_diff"] == pytest.approx(2.0)
    out = tmp_path / "both"
    cli = runner.invoke(app, ["compare", str(p_only), str(everything), "--out", str(out)])
    assert cli.exit_code == 0, cli.output
    with RunStore.open_existing(out) as st:
        assert sorted(st.get_meta("config")["models"]) == ["ip2p-all", "ip2p-p-only"]
    # a plain run beside a training folder: the step is a setting that differs
    mixed = compare_runs(
        [p_only / "eval" / "step-2", everything], labels=[f"{p_only}/eval/step-2=early"]
    )
    assert "step" in mixed.settings and [r["step"] for r in mixed.rows] == [None, 10]
    untrained = tmp_path / "runs" / "untrained"
    (untrained / "eval").mkdir(parents=True)
    with pytest.raises(RunStoreError, match=r"untrained: a training folder with no evaluated"):
        compare_runs([p_only, untrained])
