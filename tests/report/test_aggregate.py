import csv
import math

import pytest

from medibench.protocols import Aggregation
from medibench.report import summarize, write_rows_csv
from medibench.samples import Sample, Score


def _sample(sid, perspective, region="r1", **meta):
    return Sample(
        sample_id=sid,
        benchmark="b",
        input="x.png",
        instruction="Do it.",
        perspective=perspective,
        region=region,
        metadata=meta,
    )


SAMPLES = {
    s.sample_id: s
    for s in [
        _sample("p1", "perception", "r1"),
        _sample("p2", "perception", "r1"),
        _sample("p3", "perception", "r2"),
        _sample("t1", "transformation", "r2"),
    ]
}


def _score(sid, k, model="a", status="ok", **metrics):
    return Score(
        sample_id=sid,
        model=model,
        k=k,
        protocol="x",
        protocol_version="1",
        metrics=metrics,
        status=status,
    )


def _missing(sid, k, names=("dice", "psnr")):
    return _score(sid, k, status="missing", **{n: None for n in names})


SCORES = [
    _score("p1", 0, dice=0.5, psnr=None),
    _score("p1", 1, dice=0.9, psnr=None),
    _missing("p2", 0),
    _score("p2", 1, dice=0.7, psnr=None),
    _missing("p3", 0),
    _missing("p3", 1),
    _score("t1", 0, dice=None, psnr=30.0),
    _score("t1", 1, dice=None, psnr=20.0),
]


def _rows(agg, **kw):
    rows = summarize(SCORES, SAMPLES, agg, metrics=["dice", "psnr"], **kw)
    return {(r["k_mode"], r["by"], r["group"]): r for r in rows}


def test_first_best_and_mean_over_k_with_skipped_missing():
    agg = Aggregation(
        k_modes=(("@1", "first"), ("@2", "best"), ("mean", "mean")), group_by=("perspective",)
    )
    rows = _rows(agg)
    p1 = rows[("@1", "perspective", "perception")]
    # @1: first AVAILABLE output: p1 -> k0 (0.5), p2 -> k1 (0.7); p3 has none and is skipped
    assert (p1["n"], p1["n_missing"], p1["dice"]) == (2, 1, pytest.approx(0.6))
    assert rows[("@2", "perspective", "perception")]["dice"] == pytest.approx(0.8)
    assert rows[("mean", "perspective", "perception")]["dice"] == pytest.approx((0.7 + 0.7) / 2)
    assert rows[("@2", "perspective", "transformation")]["psnr"] == 30.0
    overall = rows[("@1", "all", "micro")]
    assert (overall["n"], overall["n_missing"]) == (3, 1)
    assert overall["psnr"] == 30.0 and overall["dice"] == pytest.approx(0.6)


def test_zero_policy_zeroes_only_applicable_metrics_and_pass_rates_count_it_failing():
    agg = Aggregation(
        k_modes=(("@1", "first"),),
        missing="zero",
        group_by=("perspective",),
        pass_rates=(("acc", "dice", 0.6),),
    )
    rows = _rows(agg)
    per = rows[("@1", "perspective", "perception")]
    assert per["dice"] == pytest.approx((0.5 + 0.7 + 0.0) / 3)
    assert per["psnr"] is None  # psnr does not apply to perception: not zero-filled
    assert per["acc"] == pytest.approx(1 / 3)  # 0.5 fails, 0.7 passes, missing fails


def test_macro_over_a_hierarchy_differs_from_micro():
    agg = Aggregation(
        k_modes=(("@1", "first"),), missing="zero", group_by=("region",), macro_over=("region",)
    )
    rows = _rows(agg)
    assert rows[("@1", "region", "r1")]["dice"] == pytest.approx(0.6)
    assert rows[("@1", "region", "r2")]["dice"] == pytest.approx(0.0)
    assert rows[("@1", "all", "micro")]["dice"] == pytest.approx(1.2 / 3)
    assert rows[("@1", "all", "macro over region")]["dice"] == pytest.approx(0.3)


def test_metadata_fields_lower_is_better_and_infinities():
    samples = {
        "a": _sample("a", "modification", cat="x"),
        "b": _sample("b", "modification", cat="y"),
    }
    scores = [
        _score("a", 0, lpips=0.4, psnr=math.inf),
        _score("a", 1, lpips=0.2, psnr=10.0),
        _score("b", 0, lpips=0.8, psnr=20.0),
    ]
    agg = Aggregation(
        k_modes=(("best", "best"),),
        group_by=("metadata.cat",),
        lower_is_better=frozenset({"lpips"}),
        pass_rates=(("ok", "lpips", 0.6),),
    )
    rows = {
        (r["by"], r["group"]): r for r in summarize(scores, samples, agg, metrics=["lpips", "psnr"])
    }
    assert rows[("metadata.cat", "x")]["lpips"] == 0.2
    assert rows[("metadata.cat", "x")]["psnr"] == math.inf
    assert rows[("all", "micro")]["ok"] == 0.5
    assert rows[("all", "micro")]["psnr"] == math.inf


def test_rows_csv(tmp_path):
    agg = Aggregation(group_by=(), ci_resamples=0)
    rows = summarize(SCORES[:1], SAMPLES, agg, metrics=["dice"])
    path = write_rows_csv(rows, tmp_path / "r.csv")
    assert list(csv.DictReader(open(path))) == [
        {
            "model": "a",
            "k_mode": "@1",
            "by": "all",
            "group": "micro",
            "n": "1",
            "n_missing": "0",
            "dice": "0.5",
            "dice_n": "1",
        }
    ]
    with pytest.raises(ValueError, match="no rows"):
        write_rows_csv([], tmp_path / "e.csv")


def test_unknown_group_field_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot group by 'organ'"):
        summarize(SCORES, SAMPLES, Aggregation(group_by=("organ",)), metrics=["dice"])


def test_bootstrap_cis_match_the_stats_helpers():
    from medibench.report import bootstrap_ci, hierarchical_bootstrap_ci

    agg = Aggregation(
        k_modes=(("@1", "first"),),
        missing="zero",
        group_by=("region",),
        macro_over=("region",),
        ci_resamples=200,
        ci_seed=7,
    )
    rows = _rows(agg)
    micro = rows[("@1", "all", "micro")]
    assert (micro["dice_ci_low"], micro["dice_ci_high"]) == bootstrap_ci(
        [0.5, 0.7, 0.0], n_resamples=200, seed=7
    )
    macro = rows[("@1", "all", "macro over region")]
    assert (macro["dice_ci_low"], macro["dice_ci_high"]) == hierarchical_bootstrap_ci(
        [0.5, 0.7, 0.0], [("r1",), ("r1",), ("r2",)], n_resamples=200, seed=7
    )
    assert micro["psnr_ci_low"] is micro["psnr_ci_high"] is None  # one value: no interval
    assert rows[("@1", "region", "r1")]["psnr_ci_low"] is None  # no value


def test_applicable_metrics_decide_zero_fill_and_means():
    # every perception sample missing: without `applicable`, nothing would be zero-filled
    scores = [_missing("p1", 0), _missing("p2", 0), _score("t1", 0, dice=0.4, psnr=30.0)]

    def applicable(sample):
        return ("dice",) if sample.perspective.value == "perception" else ("psnr",)

    agg = Aggregation(missing="zero", group_by=("perspective",), ci_resamples=0)
    rows = summarize(scores, SAMPLES, agg, metrics=["dice", "psnr"], applicable=applicable)
    by = {(r["by"], r["group"]): r for r in rows}
    assert by[("perspective", "perception")]["dice"] == 0.0
    assert by[("perspective", "perception")]["psnr"] is None
    # t1's dice value does not describe a transformation sample: it is not counted
    assert by[("perspective", "transformation")]["dice"] is None
    assert by[("all", "micro")]["psnr"] == 30.0 and by[("all", "micro")]["dice_n"] == 2


def test_caps_bound_infinite_psnr_in_means_only():
    scores = [_score("t1", 0, psnr=math.inf), _score("p1", 0, psnr=20.0)]
    agg = Aggregation(group_by=(), caps=(("psnr", 100.0),), ci_resamples=0)
    (row,) = summarize(scores, SAMPLES, agg, metrics=["psnr"])
    assert row["psnr"] == 60.0  # (100 + 20) / 2, not inf
    (plain,) = summarize(
        scores, SAMPLES, Aggregation(group_by=(), ci_resamples=0), metrics=["psnr"]
    )
    assert plain["psnr"] == math.inf
    assert scores[0].metrics["psnr"] == math.inf  # the record itself is untouched
