"""``medibench analyze correlate``: model-level statistics of runs, score files and CSVs, checked
against scipy.stats on the per-model means."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from medibench import stats as stats_lib
from medibench.cli.analyze import analyze_app
from medibench.judges.correlate import correlate, human_source, load_source, parse_source
from medibench.runs import RunStore
from medibench.samples import Score

TOL = 1e-12
LONG = "a-model-whose-name-is-longer-than-half-of-eighty-columns"
MODELS = [LONG, "beta", "gamma", "delta", "eps"]
PER_SAMPLE = {  # model -> ssim of samples s0..s2
    LONG: [0.9, 0.8, 0.85],
    "beta": [0.7, 0.75, 0.6],
    "gamma": [0.5, 0.65, 0.7],
    "delta": [0.4, 0.3, 0.5],
    "eps": [0.2, 0.35, 0.3],
}
BENCH = {LONG: 0.171, "beta": 0.12, "gamma": 0.13, "delta": 0.05, "eps": 0.031}
RANKS = {LONG: 1, "beta": 3, "gamma": 2, "delta": 4, "eps": 5}


def _scores() -> list[Score]:
    return [
        Score(
            sample_id=f"s{i}",
            model=m,
            protocol="p",
            protocol_version="1",
            metrics={"ssim": v, "psnr": 10 * v},
        )
        for m, vs in PER_SAMPLE.items()
        for i, v in enumerate(vs)
    ]


@pytest.fixture
def files(tmp_path):
    run = tmp_path / "run"
    with RunStore(run) as store:
        for s in _scores():
            store.put_score(s)
    jsonl = tmp_path / "scores.jsonl"
    jsonl.write_text("".join(s.to_json() + "\n" for s in _scores()))
    bench = tmp_path / "bench.csv"
    bench.write_text("model,miou\n" + "".join(f"{m},{v}\n" for m, v in BENCH.items()))
    human = tmp_path / "human.csv"
    human.write_text("model,rank\n" + "".join(f"{m},{r}\n" for m, r in RANKS.items()))
    return run, jsonl, bench, human


def test_source_syntax():
    assert parse_source("runs/a") == (None, "runs/a", None)
    assert parse_source("paint=runs/a:ssim") == ("paint", "runs/a", "ssim")
    assert parse_source("runs/a#Qwen/Qwen3-VL:ea") == (None, "runs/a#Qwen/Qwen3-VL", "ea")
    assert parse_source("x=model_level.csv") == ("x", "model_level.csv", None)


def test_statistics_of_model_means_match_scipy(files):
    run, jsonl, bench, human = files
    sources = [
        load_source(f"{run}:ssim"),
        load_source(str(bench), label="bench"),
        human_source(human),
    ]
    means = np.array([np.mean(PER_SAMPLE[m]) for m in sorted(MODELS)])
    bench_v = np.array([BENCH[m] for m in sorted(MODELS)])
    assert [sources[0].values[m] for m in sorted(MODELS)] == pytest.approx(means, abs=TOL)
    res = correlate(sources, n_resamples=100, seed=1)
    assert [(p.a, p.b) for p in res.pairs] == [
        ("run", "bench"),
        ("run", "human"),
        ("bench", "human"),
    ]
    pair = res.pairs[0]
    for method, fn in (
        ("spearman", stats.spearmanr),
        ("kendall", stats.kendalltau),
        ("pearson", stats.pearsonr),
    ):
        ref = fn(means, bench_v)
        c = pair.correlations[method]
        assert (c.statistic, c.pvalue) == pytest.approx((ref.statistic, ref.pvalue), abs=TOL)
        assert c.ci_low <= c.ci_high and pair.samples_ci[method][0] <= pair.samples_ci[method][1]
    fit = stats.linregress(means, bench_v)
    assert (pair.fit.slope, pair.fit.r_squared, pair.fit.pvalue) == pytest.approx(
        (fit.slope, fit.rvalue**2, fit.pvalue), abs=TOL
    )
    # a ranking (1 = best) against scores: a negative rho, as MieDB-100k's -0.905
    human_rho = res.pairs[1].correlations["spearman"].statistic
    ranks = [RANKS[m] for m in sorted(MODELS)]
    assert human_rho < 0 and human_rho == pytest.approx(
        stats.spearmanr(means, ranks).statistic, abs=TOL
    )
    assert "bench" not in res.pairs[2].samples_ci and not res.pairs[2].samples_ci


def test_a_score_file_reads_as_the_run(files):
    run, jsonl, _, _ = files
    a, b = load_source(f"{run}:psnr"), load_source(str(jsonl), metric="psnr")
    assert a.values == b.values and a.samples == b.samples and b.label == "scores"


def test_bad_sources_are_named(files, tmp_path):
    run, jsonl, bench, human = files
    with pytest.raises(ValueError, match="name one as .*:METRIC .*psnr, ssim"):
        load_source(str(run))
    with pytest.raises(ValueError, match="has no metric 'lpips'"):
        load_source(f"{run}:lpips")
    short = tmp_path / "short.csv"
    short.write_text(f"model,score\n{LONG},1\nbeta,2\ngamma,3\ndelta,4\n")
    sources = [load_source(f"{run}:ssim"), load_source(str(short))]
    with pytest.raises(ValueError, match=r"source 'short' .* no score value for model\(s\) eps"):
        correlate(sources)
    with pytest.raises(ValueError, match="at least 3 models"):
        correlate(sources, models=["beta", "gamma"])
    with pytest.raises(ValueError, match="share a label"):
        correlate([sources[0], sources[0]])
    nan = tmp_path / "nan.csv"
    nan.write_text("model,score\nbeta,nan\n")
    with pytest.raises(ValueError, match="line 2: score = 'nan'"):
        load_source(str(nan))


def test_cli_table_json_and_csv(files, tmp_path, monkeypatch):
    run, _, bench, human = files
    monkeypatch.setenv("COLUMNS", "80")
    out_json, out_csv = tmp_path / "c.json", tmp_path / "c.csv"
    res = CliRunner().invoke(
        analyze_app,
        [
            "correlate",
            f"ours={run}:ssim",
            f"paint={bench}",
            "--human",
            str(human),
            "--method",
            "spearman",
            "--pvalue",
            "exact",
            "--resamples",
            "50",
            "--json",
            str(out_json),
            "--csv",
            str(out_csv),
        ],
    )
    assert res.exit_code == 0, res.output
    assert LONG in res.output  # never cut at 80 columns
    data = json.loads(out_json.read_text())
    assert [s["label"] for s in data["sources"]] == ["ours", "paint", "human"]
    row = next(r for r in data["statistics"] if (r["a"], r["b"]) == ("ours", "paint"))
    means = [np.mean(PER_SAMPLE[m]) for m in sorted(MODELS)]
    ref = stats.permutation_test(
        (np.array(means),),
        lambda a: stats.spearmanr(a, [BENCH[m] for m in sorted(MODELS)]).statistic,
        permutation_type="pairings",
        n_resamples=np.inf,
    )
    assert row["pvalue_method"] == "exact" and row["pvalue"] == pytest.approx(ref.pvalue, abs=TOL)
    assert row["fit_r_squared"] is not None and out_csv.read_text().startswith("a,b,method")
    bad = CliRunner().invoke(analyze_app, ["correlate", str(bench)])
    assert bad.exit_code == 2 and "at least two sources" in bad.output


def test_out_draws_each_pair_with_the_fit_and_its_band(files, tmp_path, monkeypatch):
    run, _, bench, _ = files
    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "fig"
    args = ["correlate", f"ours={run}:ssim", f"paint={bench}"]
    res = CliRunner().invoke(
        analyze_app, [*args, "--method", "spearman", "--resamples", "20", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "correlate.md",
        *(f"ours-vs-paint.{ext}" for ext in ("json", "png", "svg")),
    ]
    drawn = json.loads((out / "ours-vs-paint.json").read_text())
    models = sorted(MODELS)
    x = np.array([np.mean(PER_SAMPLE[m]) for m in models])
    y = np.array([BENCH[m] for m in models])
    assert list(drawn["points"]) == models
    assert np.array(list(drawn["points"].values())) == pytest.approx(np.c_[x, y], abs=TOL)
    # the line and band drawn are LinearFit's, which are scipy's least squares
    fit = stats.linregress(x, y)
    grid = np.array(drawn["line"]["x"])
    assert grid[0] == pytest.approx(x.min()) and grid[-1] == pytest.approx(x.max())
    assert drawn["line"]["y"] == pytest.approx(fit.intercept + fit.slope * grid, abs=TOL)
    band = stats_lib.linear_fit(x, y).band(grid, 0.95)
    assert drawn["line"]["low"] == pytest.approx(band[:, 0], abs=TOL)
    assert drawn["line"]["high"] == pytest.approx(band[:, 1], abs=TOL)
    # the band by hand at the mean of x: yhat -+ t s / sqrt(n)
    resid = y - (fit.intercept + fit.slope * x)
    half = stats.t.ppf(0.975, 3) * np.sqrt((resid**2).sum() / 3) / np.sqrt(5)
    centre = stats_lib.linear_fit(x, y).band([x.mean()])[0]
    assert centre[1] - centre[0] == pytest.approx(2 * half, abs=TOL)
    rho = stats.spearmanr(x, y)
    assert f"R^2 = {fit.rvalue**2:.3f}, p (slope) = {fit.pvalue:.3g}" in drawn["legend"]
    assert f"Spearman rho = {rho.statistic:.3f}, p = {rho.pvalue:.3g}" in drawn["legend"]
    assert drawn["title"] == "paint vs ours across 5 models"
    assert (out / "ours-vs-paint.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "correlate.md").read_text()
    assert "![paint vs ours across 5 models](ours-vs-paint.png)" in md
    assert f"| ours vs paint | {fit.slope:.4g} | {fit.intercept:.4g} | {fit.rvalue**2:.3f} |" in md
    assert res.output.count("figure -> ") == 1 and "tables -> " in res.output


def test_a_score_summary_gives_each_models_benchmark_number(tmp_path):
    """``medibench score --csv``'s summary: per model the overall row of the first k mode, the
    macro one where the protocol has one (PaintBench's mIoU), else the micro one."""
    head = (
        "protocol,protocol_version,model,k_mode,by,group,n,n_missing,iou,iou_n,iou_ci_low,notes\n"
    )
    rows = [  # a text column (notes) and an empty cell are no metric values
        "paintbench,1,{m},@1,metadata.category,color_change,2,0,0.9,2,0.1,",
        "paintbench,1,{m},@1,all,micro,6,1,{micro},6,0.1,resized 1",
        "paintbench,1,{m},@1,all,macro over metadata.category > task,6,1,{macro},6,0.1,",
        "paintbench,1,{m},@3,all,macro over metadata.category > task,6,1,0.99,6,0.1,",
    ]
    values = {"a": (0.5, 0.6), "b": (0.2, 0.1), "c": (0.3, 0.35), "d": (0.1, 0.05)}
    text = head + "".join(
        line.format(m=m, micro=mi, macro=ma) + "\n"
        for m, (mi, ma) in values.items()
        for line in rows
    )
    summary = tmp_path / "pb.csv"
    summary.write_text(text)
    src = load_source(f"pb={summary}")
    assert (src.label, src.metric, src.samples) == ("pb", "iou", None)
    assert src.values == {m: ma for m, (_, ma) in values.items()}
    micro_only = tmp_path / "micro.csv"
    micro_only.write_text("".join(ln for ln in text.splitlines(True) if "macro" not in ln))
    assert load_source(str(micro_only)).values == {m: mi for m, (mi, _) in values.items()}
    two = tmp_path / "two.csv"
    two.write_text(text + text.splitlines(True)[2].replace("paintbench,1,", "other,2,"))
    with pytest.raises(ValueError, match=r"two.csv: a summary of other@2, paintbench@1: choose"):
        load_source(str(two))
    assert load_source(str(two), protocol="paintbench@1").values == src.values
    with pytest.raises(ValueError, match="no rows of protocol 'nope'"):
        load_source(str(two), protocol="nope")
    groups = tmp_path / "groups.csv"
    groups.write_text(head + rows[0].format(m="a") + "\n")
    with pytest.raises(ValueError, match=r"groups.csv: no overall row \(by = all\)"):
        load_source(str(groups))
