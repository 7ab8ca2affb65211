"""In-context demonstrations in a run: the leakage rules on a dataset built to tempt them, the
seeded choice, each selection, the refusals, and whole runs with a local editor."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from medibench.datasets import load_dataset
from medibench.runs import RunConfig, RunError, RunStore, run
from medibench.runs._demos import read_demonstrations
from medibench.runs._icl import DemonstrationError, TooFewDemonstrations, plan_icl
from tests.report.helpers import browser_data

from .icl_data import TEMPTING, pixels, write_dataset


def _plan(root, ks=(4,), select="random", seed=0, pool=None, options=None, embedding="thumbnail"):
    ds = load_dataset(f"native:{root}")
    return plan_icl(
        ks,
        pool=pool,
        select=select,
        embedding=embedding,
        dataset=f"native:{root}",
        dataset_options=options or {},
        samples=list(ds),
        loaded=ds,
        seed=seed,
    ), {s.sample_id: s for s in ds}


@pytest.fixture
def tempting(tmp_path):
    return write_dataset(tmp_path / "tempt", TEMPTING)


def test_leakage_rules_hold_on_a_dataset_built_to_tempt_them(tempting):
    plan, by_id = _plan(tempting)
    ids = lambda samples: sorted(s.sample_id for s in samples)  # noqa: E731
    # a0: a1 shares its patient, a2 its source image, a3 its input bytes, a9 its case page
    # (source.url); a4 has no target
    assert ids(plan.allowed(by_id["a0"], "target")) == ["a5", "a6", "a7", "a8"]
    assert ids(plan.allowed(by_id["a1"], "target")) == ["a2", "a3", "a5", "a6", "a7", "a8", "a9"]
    assert ids(plan.allowed(by_id["a3"], "target")) == ["a1", "a2", "a5", "a6", "a7", "a8", "a9"]
    assert "a0" not in ids(plan.allowed(by_id["a9"], "target"))
    # a8 records neither patient nor image: only itself and the target-less a4 are out
    assert ids(plan.allowed(by_id["a8"], "target")) == [
        "a0", "a1", "a2", "a3", "a5", "a6", "a7", "a9",
    ]  # fmt: skip
    # every draw of every sample, asking for all that is allowed: never a leak
    for q in by_id.values():
        n = len(plan.allowed(q, "target"))
        for draw in range(3):
            chosen = plan.choose(q, draw, n, "target")
            assert q.sample_id not in {c.sample_id for c in chosen}
            for c in chosen:
                assert c.target is not None
                for key in ("patient", "image", "url"):
                    if q.source.get(key):
                        assert c.source.get(key) != q.source[key]
                assert open(c.input, "rb").read() != open(q.input, "rb").read()
    with pytest.raises(DemonstrationError, match=r"'a0': 4 demonstration\(s\) allowed, 5 asked"):
        plan.choose(by_id["a0"], 0, 5, "target")


def test_a_named_split_and_another_pool_keep_the_evaluated_split_out(tmp_path, tempting):
    pool = write_dataset(
        tmp_path / "pool",
        {
            "a0": ("Q0", "J0", "denoise", "CT", "train", True, None),  # the query's id
            "t1": ("Q1", "J1", "denoise", "CT", "test", True, None),  # the evaluated split
            "t2": ("Q2", "J2", "denoise", "CT", "train", True, None),
            "t3": ("P1", "J3", "denoise", "CT", "train", True, None),  # a0's patient
        },
        offset=50,
    )
    plan, by_id = _plan(tempting, pool=f"native:{pool}")
    assert plan.excluded_splits == {"test"}
    assert [s.sample_id for s in plan.allowed(by_id["a0"], "target")] == ["t2"]
    assert [s.sample_id for s in plan.allowed(by_id["a5"], "target")] == ["a0", "t2", "t3"]
    # the run names its split (--dataset-option split=test): the default pool is the same
    # dataset read without it, every split but the evaluated one
    mixed = write_dataset(
        tmp_path / "mixed",
        {
            "m0": ("Q0", "J0", "t", "CT", "test", True, None),
            "m1": ("Q1", "J1", "t", "CT", "test", True, None),
            "m2": ("Q2", "J2", "t", "CT", "train", True, None),
            "m3": ("Q3", "J3", "t", "CT", "val", True, None),
        },
    )
    plan, by_id = _plan(mixed, options={"split": "test"})
    assert plan.excluded_splits == {"test"} and "every split" in plan.pool_label
    assert [s.sample_id for s in plan.allowed(by_id["m0"], "target")] == ["m2", "m3"]


def test_choice_is_seeded_per_sample_and_draw_nested_over_k(tempting):
    a, by_id = _plan(tempting, ks=(1, 2, 4), seed=0)
    b, _ = _plan(tempting, ks=(1, 2, 4), seed=0)
    q = by_id["a8"]
    four = a.choose(q, 0, 4, "target")
    assert four == b.choose(q, 0, 4, "target")  # same seed: same demonstrations
    assert a.choose(q, 0, 2, "target") == four[:2] and a.choose(q, 0, 1, "target") == four[:1]
    draws = {tuple(s.sample_id for s in a.choose(q, d, 4, "target")) for d in range(6)}
    seeds = {
        tuple(s.sample_id for s in _plan(tempting, seed=sd)[0].choose(q, 0, 4, "target"))
        for sd in range(6)
    }
    assert len(draws) > 1 and len(seeds) > 1  # they change with the draw and the run seed


def test_same_task_same_modality_and_nearest(tempting, tmp_path):
    plan, by_id = _plan(tempting, select="same-task")
    assert sorted(s.sample_id for s in plan.choose(by_id["a0"], 0, 2, "target")) == ["a5", "a8"]
    plan, by_id = _plan(tempting, select="same-modality")
    assert sorted(s.sample_id for s in plan.choose(by_id["a0"], 0, 2, "target")) == ["a6", "a8"]
    with pytest.raises(DemonstrationError, match="of the same modality"):
        plan.choose(by_id["a0"], 0, 3, "target")
    # nearest (thumbnail embedding): n2 is the query plus faint noise, the others unrelated
    root = write_dataset(
        tmp_path / "near",
        {f"n{i}": (f"P{i}", f"I{i}", "t", "CT", "test", True, None) for i in range(5)},
    )
    query = np.asarray(Image.open(root / "img" / "n0.png"))
    near = np.clip(query.astype(int) + pixels(7)[..., :1] % 5, 0, 255).astype(np.uint8)
    Image.fromarray(near).save(root / "img" / "n2.png")
    plan, by_id = _plan(root, select="nearest")
    assert plan.choose(by_id["n0"], 0, 1, "target")[0].sample_id == "n2"
    # a declared embedding: mean colour; n4 made the same colour as the query
    Image.fromarray(np.full_like(query, 200)).save(root / "img" / "n0.png")
    Image.fromarray(np.full_like(query, 198)).save(root / "img" / "n4.png")
    plan, by_id = _plan(root, select="nearest", embedding="tests.runs.icl_data:mean_colour")
    assert plan.choose(by_id["n0"], 0, 1, "target")[0].sample_id == "n4"


def _config(data, out, models, **kw):
    return RunConfig(dataset=f"native:{data}", models=models, out=out, stage="generate", **kw)


def test_k0_equals_a_run_without_the_option_and_k_entries_are_their_own_models(tempting, tmp_path):
    with run(_config(tempting, tmp_path / "plain", ("classical",)), progress=False) as store:
        plain = {(p.sample_id, p.k): p for p in store.predictions()}
    mean = "tests.runs.icl_data:make_mean"
    with run(
        _config(tempting, tmp_path / "icl", ("classical",), icl_k=(0,)), progress=False
    ) as store:
        zero = {(p.sample_id, p.k): p for p in store.predictions("classical@icl-0")}
        assert {p.model for p in store.predictions()} == {"classical@icl-0"}
        assert not read_demonstrations(store)  # nothing shown at K = 0
    assert zero.keys() == plain.keys()
    for key, p in plain.items():
        assert zero[key].seed == p.seed and zero[key].status == p.status
        a = np.asarray(Image.open(tmp_path / "plain" / p.path))
        assert np.array_equal(a, np.asarray(Image.open(tmp_path / "icl" / zero[key].path)))
    out = tmp_path / "mean"
    with run(_config(tempting, out, (mean,), icl_k=(0, 2)), progress=False) as store:
        preds = {(p.model, p.sample_id): p for p in store.predictions()}
        shown = read_demonstrations(store)
        specs = store.get_meta("model_specs_by_name")
        assert store.get_meta("config")["icl"]["ks"] == [0, 2]
    assert {m for m, _ in preds} == {"mean-of-examples@icl-0", "mean-of-examples@icl-2"}
    row = shown[("mean-of-examples@icl-2", "a0", 0)]
    assert row["icl_k"] == 2 and row["images_sent"] == 5 and row["template"] == "icl@1"
    assert set(row["demo_ids"]) <= {"a5", "a6", "a7", "a8"}
    assert specs["mean-of-examples@icl-2"]["icl"]["k"] == 2
    # the editor got exactly those examples: its output is the mean of their targets
    targets = [np.asarray(Image.open(tempting / "img" / f"{d}_t.png")) for d in row["demo_ids"]]
    expect = np.round(np.mean(np.stack(targets).astype(float), axis=0)).astype(np.uint8)
    got = np.asarray(Image.open(out / preds[("mean-of-examples@icl-2", "a0")].path))
    assert np.array_equal(got, expect)


def test_refused_models_are_refused_before_anything_runs(tempting, tmp_path):
    out = tmp_path / "run"
    mean = "tests.runs.icl_data:make_mean"  # takes examples
    refused_models = (
        ("classical", "classical"),
        ("ip2p:/no/weights", "ip2p"),  # a diffusers pipeline: refused before its weights load
        ("identity", "identity"),
        ("http:http://127.0.0.1:9/edit", "http"),  # a JSON endpoint takes one image
    )
    for refused, name in refused_models:
        with pytest.raises(RunError, match=f"model '{name}' .*cannot take in-context"):
            run(_config(tempting, out, (mean, refused), icl_k=(0, 1)), progress=False)
        with RunStore(out) as store:
            assert store.predictions() == []  # the model listed first never ran
    # a module:callable function's model is known once built: refused then, before it runs
    plain = "tests.runs.icl_data:make_plain"
    with pytest.raises(RunError, match="model 'plain' .*cannot take in-context"):
        run(_config(tempting, tmp_path / "fn", (plain,), icl_k=(1,)), progress=False)
    with RunStore(tmp_path / "fn") as store:
        assert store.predictions() == []
    # K = 0 only: nothing is shown, so any model runs
    with run(_config(tempting, tmp_path / "k0", ("identity",), icl_k=(0,)), progress=False) as st:
        assert {p.model for p in st.predictions(status="ok")} == {"identity@icl-0"}
    bad = _config(tempting, out, ("identity",), icl_k=(1,), icl_pool=f"native:{tmp_path}/none")
    with pytest.raises(RunError, match="none does not exist"):  # the pool is read first
        run(bad, progress=False)


def test_too_few_demonstrations_fail_that_item_and_the_spec_is_kept(tempting, tmp_path):
    out = tmp_path / "run"
    cfg = _config(tempting, out, ("tests.runs.icl_data:make_mean",), icl_k=(5,))
    with run(cfg, progress=False) as store:
        by_id = {p.sample_id: p for p in store.predictions()}
    assert by_id["a0"].status == "too-few-demonstrations"  # 4 allowed
    assert "TooFewDemonstrations" in by_id["a0"].error and "4 demonstration(s) allowed, 5" in (
        by_id["a0"].error
    )
    assert by_id["a8"].status == "ok"  # 8 allowed
    other = _config(
        tempting, out, ("tests.runs.icl_data:make_mean",), icl_k=(5,), icl_select="same-task"
    )
    with pytest.raises(RunError, match="holds model 'mean-of-examples@icl-5' made with spec"):
        run(other, progress=False)


def test_a_fallback_for_too_few_eligible_demonstrations(tempting):
    """a0 has 2 same-task candidates (a5, a8) of the 4 the leakage rules allow."""
    kinds = {}
    for fallback in ("refuse", "random", "fewer"):
        plan, by_id = _plan(tempting, select="same-task")
        plan.fallback = fallback
        kinds[fallback] = plan
    a0 = by_id["a0"]
    with pytest.raises(TooFewDemonstrations, match=r"2 demonstration\(s\) allowed, 3 asked"):
        kinds["refuse"].choose_with_fallback(a0, 0, 3, "target")
    two, how = kinds["random"].choose_with_fallback(a0, 0, 2, "target")
    assert how is None and sorted(s.sample_id for s in two) == ["a5", "a8"]
    three, how = kinds["random"].choose_with_fallback(a0, 0, 3, "target")
    four, _ = kinds["random"].choose_with_fallback(a0, 0, 4, "target")
    assert how == "random" and three[:2] == two and four[:3] == three  # nested over K
    assert {s.sample_id for s in four} == {"a5", "a6", "a7", "a8"}  # the leakage rules kept
    with pytest.raises(TooFewDemonstrations, match="4 with the rest drawn from the whole pool"):
        kinds["random"].choose_with_fallback(a0, 0, 5, "target")
    assert kinds["fewer"].choose_with_fallback(a0, 0, 3, "target") == (two, "fewer")
    assert "fallback" not in kinds["refuse"].describe(3)  # the default: the specs of old runs
    assert kinds["random"].describe(3)["fallback"] == "random"


def test_the_run_names_and_counts_items_short_of_demonstrations(tempting, tmp_path):
    from typer.testing import CliRunner

    from medibench.cli import app

    args = ["run", "--dataset", f"native:{tempting}", "--stage", "generate", "--no-progress",
            "--model", "tests.runs.icl_data:make_mean", "--icl-k", "2", "--icl-select",
            "same-task"]  # fmt: skip
    plan, by_id = _plan(tempting, select="same-task")
    short = sorted(s for s, q in by_id.items() if len(plan.allowed(q, "target")) < 2)
    assert short == ["a6", "a7"]  # sharpen: one other each
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "refuse")])
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "8 done, 0 already done, 0 failed, 2 too-few-demonstrations" in said
    assert "2 with fewer eligible demonstrations than K = 2: not made" in said
    with RunStore(tmp_path / "refuse") as store:
        status = {p.sample_id: p.status for p in store.predictions()}
    assert sorted(s for s, st in status.items() if st == "too-few-demonstrations") == short
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "random"), "--icl-fallback",
                                   "random"])  # fmt: skip
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "10 done" in said, res.output
    assert "2 with fewer eligible demonstrations than K = 2: the rest drawn at random" in said
    with RunStore(tmp_path / "random") as store:
        shown = read_demonstrations(store)
        assert store.get_meta("config")["icl"]["fallback"] == "random"
    took = {sid: row["fallback"] for (_, sid, _), row in shown.items()}
    assert sorted(s for s, f in took.items() if f == "random") == short
    assert {took[s] for s in took if s not in short} == {None}
    bad = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "x"), "--icl-fallback", "no"])
    assert bad.exit_code == 2 and "--icl-fallback must be one of refuse, random, fewer" in " ".join(
        bad.output.split()
    )


def test_bad_settings_are_clear_errors(tempting, tmp_path):
    with pytest.raises(ValueError, match="icl_select must be one of random, same-task"):
        _config(tempting, tmp_path, ("identity",), icl_k=(1,), icl_select="closest")
    with pytest.raises(ValueError, match="distinct and >= 0"):
        _config(tempting, tmp_path, ("identity",), icl_k=(1, 1))
    assert json.loads(json.dumps(list(_config(tempting, tmp_path, ("x",), icl_k=2).icl_k))) == [2]


def test_report_compares_each_k_against_k0_and_shows_the_demonstrations(tempting, tmp_path):
    from medibench.report import build_report
    from medibench.report._tables import comparisons

    out = tmp_path / "run"
    cfg = RunConfig(
        dataset=f"native:{tempting}",
        models=("tests.runs.icl_data:make_mean",),
        out=out,
        icl_k=(0, 1, 2),
        protocols=("native@1",),
    )
    run(cfg, progress=False).close()
    index = build_report(out, plots=False, workers=1)
    page = index.read_text()
    blob = browser_data(index)
    models = blob["models"]
    a0 = next(s for s in blob["samples"] if s["id"] == "a0")
    demos = {m: r["demos"] for m, r in zip(models, a0["runs"], strict=True)}
    with RunStore(out) as store:
        shown = read_demonstrations(store)
        scores = store.scores()
    assert demos["mean-of-examples@icl-0"] == []
    assert demos["mean-of-examples@icl-2"] == shown[("mean-of-examples@icl-2", "a0", 0)]["demo_ids"]
    assert demos["mean-of-examples@icl-1"] == demos["mean-of-examples@icl-2"][:1]  # nested
    # comparisons: K against K = 0 first, A - B = icl-K - icl-0 with its CI
    from medibench.protocols import load_protocol
    from medibench.report._aggregate import per_model_values

    proto = load_protocol("native@1")
    samples = {s.sample_id: s for s in load_dataset(f"native:{tempting}")}
    values = per_model_values(scores, samples, proto.aggregation, proto.metric_names)
    metric = next(
        m for m in proto.metric_names if any(s.metrics.get(m) is not None for s in scores)
    )
    label = proto.aggregation.k_modes[0][0]
    rows = [
        r for r in comparisons(values, metrics=[metric], n_resamples=200) if r["k_mode"] == label
    ]
    pairs = [(r["model_a"], r["model_b"]) for r in rows]
    assert pairs[:2] == [
        ("mean-of-examples@icl-1", "mean-of-examples@icl-0"),
        ("mean-of-examples@icl-2", "mean-of-examples@icl-0"),
    ]
    assert pairs[2] == ("mean-of-examples@icl-1", "mean-of-examples@icl-2")
    per = {
        m: {s: v.get(metric) for s, (_, v) in vals.items()}
        for (m, lab), vals in values.items()
        if lab == label
    }
    k2, k0 = per["mean-of-examples@icl-2"], per["mean-of-examples@icl-0"]
    both = [s for s in k2 if k2[s] is not None and k0.get(s) is not None]
    assert rows[1]["mean_diff"] == pytest.approx(np.mean([k2[s] - k0[s] for s in both]))
    assert rows[1]["diff_ci_low"] <= rows[1]["mean_diff"] <= rows[1]["diff_ci_high"]
    assert "mean-of-examples@icl-2" in page


def test_cli_options(tempting, tmp_path):
    from typer.testing import CliRunner

    from medibench.cli import app

    runner = CliRunner()
    args = ["run", "--dataset", f"native:{tempting}", "--stage", "generate", "--no-progress"]
    mean = ["--model", "tests.runs.icl_data:make_mean"]
    res = runner.invoke(app, [*args, *mean, "--out", str(tmp_path / "a"), "--icl-k", "0",
                              "--icl-k", "1", "--icl-select", "same-modality"])  # fmt: skip
    assert res.exit_code == 0, res.output
    with RunStore(tmp_path / "a") as store:
        assert store.get_meta("config")["icl"]["select"] == "same-modality"
        models = {p.model for p in store.predictions()}
    assert models == {"mean-of-examples@icl-0", "mean-of-examples@icl-1"}
    res = runner.invoke(app, [*args, *mean, "--out", str(tmp_path / "b"), "--icl-k", "1",
                              "--icl-select", "closest"])  # fmt: skip
    said = " ".join(res.output.split())  # whatever the terminal width
    assert res.exit_code != 0 and "--icl-select must be one of random, same-task" in said
    res = runner.invoke(app, [*args, "--model", "identity", "--out", str(tmp_path / "c"),
                              "--icl-k", "2"])  # fmt: skip
    said = " ".join(res.output.split())
    assert res.exit_code != 0 and "'identity'" in said and "cannot take in-context" in said


def test_shards_choose_from_the_whole_dataset_and_merge_their_demonstrations(tempting, tmp_path):
    from medibench.runs._shard import merge

    mean = ("tests.runs.icl_data:make_mean",)
    whole = tmp_path / "whole"
    with run(_config(tempting, whole, mean, icl_k=(2,)), progress=False) as store:
        expect = read_demonstrations(store)
    parts = []
    for i in range(2):
        parts.append(tmp_path / f"part{i}")
        run(_config(tempting, parts[-1], mean, icl_k=(2,), shard=f"{i}/2"), progress=False).close()
    merge(parts, tmp_path / "merged")
    with RunStore(tmp_path / "merged") as store:
        merged = read_demonstrations(store)
    assert {k: v["demo_ids"] for k, v in merged.items()} == {
        k: v["demo_ids"] for k, v in expect.items()
    }  # a shard's samples get the demonstrations the whole run gives them
