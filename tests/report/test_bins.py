"""--by-bins: per-bin rows against numpy and the bootstrap computed directly, the trend rows
against scipy, the notes for what enters no bin, the bad inputs' errors, and the report's
table."""

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from medibench.cli import app
from medibench.datasets.properties import PropertyError
from medibench.protocols import Aggregation
from medibench.report._bins import BinSpec, bin_matrix, bin_tables, check_specs, parse_bins
from medibench.report._plots import bin_lines
from medibench.samples import Sample, Score
from medibench.stats import bootstrap_ci

runner = CliRunner()
SIZES = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 9.5, 10.0, 12.0, None]
AGG = Aggregation(group_by=("task",), ci_resamples=500, ci_seed=7)


def _sample(sid, benchmark="native", **fields):
    return Sample(sample_id=sid, benchmark=benchmark, input="x.png", instruction="x",
                  perspective="modification", **fields)  # fmt: skip


def _score(sid, model, metrics, protocol="p", **fields):
    return Score(sample_id=sid, model=model, protocol=protocol, protocol_version="1",
                 metrics=metrics, **fields)  # fmt: skip


def _data(missing=()):
    """12 samples (metadata.size as SIZES; the last has none) and two models' scores; ``missing``
    samples have no output of model 'b'."""
    rng = np.random.default_rng(1)
    samples, scores = {}, []
    for i, size in enumerate(SIZES):
        sid = f"s{i:02d}"
        meta = {} if size is None else {"size": size}
        samples[sid] = _sample(sid, task="t", metadata=meta)
        for model, slope in (("a", -0.05), ("b", 0.01)):
            value = 0.9 + slope * (size or 0) + float(rng.normal(0, 0.05))
            if model == "b" and sid in missing:
                scores.append(_score(sid, model, {"m": None}, status="missing", error="no output"))
            else:
                scores.append(_score(sid, model, {"m": value}))
    return samples, scores


def _value(scores, model, sid):
    return next(s.metrics["m"] for s in scores if (s.model, s.sample_id) == (model, sid))


def test_bin_rows_are_the_numpy_means_with_the_protocols_bootstrap():
    samples, scores = _data()
    edges = (0.0, 2.0, 8.0, 10.0)
    (table,) = bin_tables(
        scores, samples, AGG, metrics=["m"], specs=[BinSpec("metadata.size", edges)]
    )
    assert table.labels == ["[0, 2)", "[2, 8)", "[8, 10]"]
    members = [["s00", "s01", "s02"], ["s03", "s04", "s05", "s06"], ["s07", "s08", "s09"]]
    assert table.counts == [3, 4, 3]
    for model in ("a", "b"):
        rows = [r for r in table.rows if r["model"] == model]
        for row, sids in zip(rows, members, strict=True):
            vals = [_value(scores, model, s) for s in sids]
            assert row["by"] == "metadata.size" and row["n"] == len(sids)
            assert row["m"] == pytest.approx(float(np.mean(vals)), abs=1e-15)
            low, high = bootstrap_ci(vals, n_resamples=500, seed=7)
            assert (row["m_ci_low"], row["m_ci_high"]) == (low, high)
        (trend,) = [t for t in table.trend if t["model"] == model]
        binned = [s for sids in members for s in sids]
        ref = stats.spearmanr(
            [samples[s].metadata["size"] for s in binned],
            [_value(scores, model, s) for s in binned],
        )
        assert trend["test"] == "spearman" and trend["n"] == 10
        assert abs(trend["rho"] - ref.statistic) < 1e-12 and abs(trend["p"] - ref.pvalue) < 1e-12


def test_what_enters_no_bin_is_counted_in_a_note():
    samples, scores = _data()
    edges = (0.0, 2.0, 8.0, 10.0)
    (table,) = bin_tables(
        scores, samples, AGG, metrics=["m"], specs=[BinSpec("metadata.size", edges)]
    )
    assert table.notes == [
        "metadata.size: 1 of 12 samples have no value (the numeric metadata field 'size') and "
        "enter no bin: s11",
        "metadata.size: 1 sample(s) lie outside the edges [0, 10] and enter no bin nor the trend "
        "test: s10",
    ]


def test_a_bin_of_one_value_has_no_interval():
    samples, scores = _data()
    (table,) = bin_tables(
        scores, samples, AGG, metrics=["m"], specs=[BinSpec("metadata.size", (0.0, 0.9, 12.0))]
    )
    first = [r for r in table.rows if r["group"] == "[0, 0.9)"]
    assert all(r["n"] == 1 and r["m_ci_low"] is None and r["m_ci_high"] is None for r in first)
    columns, rows = bin_matrix(table)
    assert columns == ["model", "metric", "[0, 0.9) (n=1)", "[0.9, 12] (n=10)", "rho", "p"]
    assert rows[0][2] == f"{_value(scores, 'a', 's00'):.3f} (n=1)"


def test_missing_outputs_follow_the_protocols_missing_policy():
    samples, scores = _data(missing=("s00",))
    spec = [BinSpec("metadata.size", (0.0, 2.0, 12.0))]
    for how, expected_n in (("skip", 2), ("zero", 3)):
        agg = Aggregation(missing=how, ci_resamples=0)
        (table,) = bin_tables(scores, samples, agg, metrics=["m"], specs=spec)
        row = next(r for r in table.rows if r["model"] == "b" and r["bin"] == 0)
        kept = [_value(scores, "b", s) for s in ("s01", "s02")] + ([0.0] if how == "zero" else [])
        assert (row["n"], row["n_missing"], row["m_n"]) == (2, 1, expected_n)
        assert row["m"] == pytest.approx(float(np.mean(kept)), abs=1e-15)


def test_a_categorical_property_groups_by_its_levels_in_order():
    samples, scores = {}, []
    conditions = ["baseline", "nonstandard", "baseline", "nonstandard", "striped", "baseline"]
    values = [0.9, 0.2, 0.8, 0.4, 0.5, 0.7]
    for i, (cond, v) in enumerate(zip(conditions, values, strict=True)):
        sid = f"p{i}"
        samples[sid] = _sample(sid, "paintbench", task="recolor",
                               metadata={"visual_condition": cond})  # fmt: skip
        scores.append(_score(sid, "a", {"iou": v}, protocol="paintbench"))
    agg = Aggregation(ci_resamples=0)
    (table,) = bin_tables(scores, samples, agg, metrics=["iou"], specs=[BinSpec("color_scheme")])
    assert table.labels == ["standard", "nonstandard"] and table.counts == [3, 2]
    means = [r["iou"] for r in table.rows]
    assert means == pytest.approx([0.8, 0.3], abs=1e-15)
    ref = stats.spearmanr([0, 1, 0, 1, 0], [0.9, 0.2, 0.8, 0.4, 0.7])
    assert abs(table.trend[0]["rho"] - ref.statistic) < 1e-12
    assert "1 of 6 samples have no value" in table.notes[0]


def test_the_protocols_set_apart_samples_enter_no_bin():
    samples, scores = _data()
    agg = Aggregation(ci_resamples=0, outside=(("metadata.size", "0.5"),))
    (table,) = bin_tables(
        scores, samples, agg, metrics=["m"], specs=[BinSpec("metadata.size", (0.0, 12.0))]
    )
    assert table.counts == [10]
    assert table.notes[0] == (
        "metadata.size: 1 sample(s) of metadata.size=0.5 are left out, as the protocol reports "
        "them on their own"
    )


def test_an_undefined_trend_says_why():
    samples, scores = _data()
    (table,) = bin_tables(
        scores, samples, AGG, metrics=["m"], specs=[BinSpec("metadata.size", (0.0, 1.2))]
    )
    assert {(t["rho"], t["note"]) for t in table.trend} == {(None, "needs at least 3 pairs, got 2")}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("=0,1", "give PROP=EDGES"),
        ("mask_fraction=0,small,1", "edge 'small' is not a number"),
        ("mask_fraction=0,0.5,0.2", "edges must increase strictly, but 0.2 follows 0.5"),
        ("mask_fraction=0.5", "at least two edges"),
    ],
)
def test_malformed_bins_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_bins(text)


def test_parse_bins_reads_edges_and_categories():
    assert parse_bins("mask_fraction=0, 0.01,1") == BinSpec("mask_fraction", (0.0, 0.01, 1.0))
    assert parse_bins("color_scheme") == BinSpec("color_scheme")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (BinSpec("color_scheme", (0.0, 1.0)), "color_scheme is categorical .*without edges"),
        (BinSpec("object_count"), "object_count is numeric: give its bin edges"),
        (BinSpec("lesion"), "unknown sample property 'lesion'.*mask_fraction"),
    ],
)
def test_a_property_given_the_wrong_kind_of_bins_is_refused(spec, message):
    sample = _sample("a", "paintbench")
    with pytest.raises(PropertyError, match=message):
        check_specs([spec], [sample])


def test_bin_lines_draws_a_panel_per_metric(tmp_path):
    rows = [
        {"model": "a", "bin": b, "m": v, "m_ci_low": v - 0.1, "m_ci_high": v + 0.1}
        for b, v in enumerate([0.9, 0.5, 0.2])
    ]
    paths = bin_lines(rows, ["m"], ["[0, 1)", "[1, 2)", "[2, 3]"], "m by x", tmp_path / "b")
    assert [p.name for p in paths] == ["b.png", "b.svg"] and all(p.stat().st_size for p in paths)
    assert "[1, 2)" in paths[1].read_text(encoding="utf-8")


def test_score_refuses_bad_bins_before_scoring(tmp_path):
    from tests.report.helpers import make_dataset

    data = make_dataset(tmp_path / "data", n=2)
    (tmp_path / "preds").mkdir()
    base = [
        "score",
        "--dataset",
        f"native:{data}",
        "--predictions",
        str(tmp_path / "preds"),
        "--out",
        str(tmp_path / "s.jsonl"),
    ]
    for bins, message in (
        ("mask_fraction=0,x", "edge 'x' is not a number"),
        ("lesion_size=0,1", "unknown sample property 'lesion_size'"),
        ("mask_fraction", "mask_fraction is numeric: give its bin edges"),
    ):
        for kept in ([], ["--run", str(tmp_path / "s.run")]):  # scored in a run folder, too
            res = runner.invoke(app, [*base, *kept, "--by-bins", bins])
            assert res.exit_code == 2 and message in res.output, res.output
            assert not (tmp_path / "s.jsonl").exists() and not (tmp_path / "s.run").exists()


def test_a_property_binned_twice_is_refused(tmp_path):
    res = runner.invoke(app, ["report", str(tmp_path), "--by-bins", "mask_fraction=0,1",
                              "--by-bins", "mask_fraction=0,0.5,1"])  # fmt: skip
    assert res.exit_code == 2
    assert "--by-bins: mask_fraction given more than once" in res.output


def test_report_writes_the_breakdown_table(tiny_run, tmp_path):
    out = tmp_path / "report"
    res = runner.invoke(
        app,
        [
            "report",
            str(tiny_run),
            "--out",
            str(out),
            "--no-plots",
            "--no-progress",
            "--by-bins",
            "mask_fraction=0,0.05,0.1",
        ],
    )
    assert res.exit_code == 0, res.output
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "Diagnostics by factor" in page and "native@1 by mask_fraction" in page
    assert "[0.05, 0.1] (n=9)" in page and "x is constant" not in page  # no value: "-"
    table = json.loads((out / "tables" / "native@1" / "bins_mask_fraction.json").read_text())
    rows = [r for r in table["rows"] if r["group"] == "[0.05, 0.1]"]
    assert {r["model"] for r in rows} == {"identity", "classical"}
    assert all(r["n"] == 9 and r["bin_low"] == 0.05 for r in rows)  # every mask: 144 of 2304
    trend = [r for r in table["rows"] if r["group"] == "trend"]
    assert trend and all(
        r["rho"] is None and r["note"] == "x is constant, so the coefficient is undefined"
        for r in trend
    )


def test_report_refuses_an_unknown_property(tiny_run, tmp_path):
    res = runner.invoke(
        app,
        [
            "report",
            str(tiny_run),
            "--out",
            str(tmp_path / "r"),
            "--no-plots",
            "--no-progress",
            "--by-bins",
            "lesion=0,1",
        ],
    )
    assert res.exit_code == 2
    assert "unknown sample property 'lesion'" in res.output and "mask_fraction" in res.output
