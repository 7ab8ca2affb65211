import pytest

from medibench.protocols import Aggregation
from medibench.report import comparisons, leaderboard, per_model_values
from medibench.report._tables import breakdowns
from medibench.samples import Sample, Score


def _sample(sid, region, task="t1"):
    return Sample(
        sample_id=sid,
        benchmark="b",
        input="x.png",
        instruction="Do it.",
        perspective="modification",
        region=region,
        task=task,
    )


SAMPLES = {
    s.sample_id: s
    for s in [
        _sample("a", "r1"),
        _sample("b", "r1"),
        _sample("c", "r2", "t2"),
        _sample("d", "r2", "t2"),
    ]
}


def _score(sid, model, status="ok", **metrics):
    return Score(
        sample_id=sid,
        model=model,
        k=0,
        protocol="p",
        protocol_version="1",
        metrics=metrics,
        status=status,
    )


SCORES = [
    _score("a", "m1", ssim=0.5, ea=0.9),
    _score("b", "m1", ssim=0.7, ea=None),  # not judged yet
    _score("c", "m1", status="missing", ssim=None, ea=None),
    # d: no score record at all for m1 (unscored)
    _score("a", "m2", ssim=0.4, ea=0.8),
    _score("b", "m2", ssim=0.6, ea=0.7),
    _score("c", "m2", ssim=0.2, ea=0.1),
    _score("d", "m2", ssim=0.3, ea=None),
]
AGG = Aggregation(group_by=("region",), macro_over=("region",), ci_resamples=200, ci_seed=0)


def _row(rows, model, by, group):
    (row,) = [r for r in rows if (r["model"], r["by"], r["group"]) == (model, by, group)]
    return row


def test_breakdowns_add_fields_that_vary():
    assert breakdowns(SAMPLES.values(), AGG) == ("region", "task")


def test_leaderboard_counts_missing_unscored_and_unjudged():
    rows = leaderboard(SCORES, SAMPLES, AGG, metrics=["ssim", "ea"], judged=["ea"])
    m1 = _row(rows, "m1", "all", "micro")
    assert (m1["n"], m1["n_missing"], m1["n_unscored"], m1["n_unjudged"]) == (2, 1, 1, 1)
    assert m1["ssim"] == pytest.approx(0.6) and m1["ea"] == pytest.approx(0.9)
    r2 = _row(rows, "m1", "region", "r2")
    assert (r2["n"], r2["n_missing"], r2["n_unscored"]) == (0, 1, 1)
    m2 = _row(rows, "m2", "task", "t2")
    assert (m2["n"], m2["n_unscored"], m2["n_unjudged"]) == (2, 0, 1)
    macro = _row(rows, "m2", "all", "macro over region")
    assert macro["ssim"] == pytest.approx((0.5 + 0.25) / 2)


def test_leaderboard_intervals_bracket_the_mean():
    rows = leaderboard(SCORES, SAMPLES, AGG, metrics=["ssim"], judged=[])
    for r in rows:
        if r["ssim"] is not None and r["ssim_n"] > 1:
            assert r["ssim_ci_low"] <= r["ssim"] <= r["ssim_ci_high"]
    micro = _row(rows, "m2", "all", "micro")
    assert micro["ssim_ci_low"] < micro["ssim_ci_high"]


def test_comparisons_pair_models_on_common_samples():
    values = per_model_values(SCORES, SAMPLES, AGG, ["ssim", "ea"])
    rows = comparisons(values, metrics=["ssim", "ea"], n_resamples=100, seed=0)
    by_metric = {r["metric"]: r for r in rows}
    assert by_metric["ssim"]["n"] == 2  # a and b: m1 has no value for c and d
    assert by_metric["ssim"]["mean_diff"] == pytest.approx(0.1)
    assert by_metric["ea"]["n"] == 1 and by_metric["ea"]["k_mode"] == "@1"
