import math

import numpy as np
import pytest
from scipy import stats

from medibench.judges.agreement import (
    agreement_table,
    icc_2_1,
    kendall,
    load_ratings_csv,
    pearson,
    per_sample_rank_spearman,
    spearman,
)

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges; published ICC(2,1) = .29.
SHROUT_FLEISS = [
    [9, 2, 5, 8],
    [6, 1, 3, 2],
    [8, 4, 6, 8],
    [7, 1, 2, 6],
    [10, 5, 6, 9],
    [6, 2, 4, 7],
]


def test_icc_2_1_hand_computed():
    # rows (1,2),(2,3),(3,4): MSR = 2, MSC = 1.5, MSE = 0 -> 2 / (2 + 0 + 2 * 1.5 / 3) = 2/3
    assert icc_2_1([[1, 2], [2, 3], [3, 4]]) == pytest.approx(2 / 3)
    # identical raters: perfect agreement; MSR = 1, MSE = MSC = 0
    assert icc_2_1([[1, 1], [2, 2], [3, 3]]) == pytest.approx(1.0)
    # SSR = 61.875 ... worked by hand: MSR 11.2417, MSC 32.4861, MSE 1.0194 (n 6, k 4)
    msr, msc, mse = 56.2083 / 5, 97.4583 / 3, 15.2917 / 15
    expected = (msr - mse) / (msr + 3 * mse + 4 * (msc - mse) / 6)
    assert icc_2_1(SHROUT_FLEISS) == pytest.approx(expected, abs=1e-4)
    assert round(icc_2_1(SHROUT_FLEISS), 2) == 0.29


def test_icc_rejects_bad_tables():
    with pytest.raises(ValueError):
        icc_2_1([[1, 2]])
    with pytest.raises(ValueError, match="missing"):
        icc_2_1([[1, 2], [np.nan, 3]])


def test_correlations_match_scipy_and_are_nan_when_undefined():
    rng = np.random.default_rng(1)
    x, y = rng.random(30), rng.random(30)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])
    assert kendall(x, y) == pytest.approx(stats.kendalltau(x, y)[0])
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_per_sample_rank_spearman():
    a = {(m, "s1", "ea"): v for m, v in zip("ABC", [0.9, 0.5, 0.1], strict=True)}
    a |= {(m, "s2", "ea"): v for m, v in zip("ABC", [0.2, 0.5, 0.8], strict=True)}
    ranks = {
        (m, "s1", "ea"): r for m, r in zip("ABC", [1, 2, 3], strict=True)
    }  # human ranks, 1 = best
    ranks |= {(m, "s2", "ea"): r for m, r in zip("ABC", [2, 1, 3], strict=True)}
    # s1: perfectly reversed (-1); s2: values (.2,.5,.8) vs ranks (2,1,3): rho = 0.5
    assert per_sample_rank_spearman(a, ranks, "ea") == pytest.approx([-1.0, 0.5])


def test_table_with_seeded_bootstrap_cis():
    rng = np.random.default_rng(0)
    a, b = {}, {}
    for m in "ABCD":
        for s in range(15):
            v = rng.random()
            a[(m, f"s{s}", "ea")] = v
            b[(m, f"s{s}", "ea")] = v + 0.2 * rng.random()
    b[("A", "extra", "ea")] = 1.0  # rated by one side only: left out
    (row,) = agreement_table(a, b, n_resamples=200, seed=3)
    again = agreement_table(a, b, n_resamples=200, seed=3)[0]
    assert row == again and row.n == 60 and row.n_rank_samples == 15
    keys = sorted(set(a) & set(b))
    x, y = [a[k] for k in keys], [b[k] for k in keys]
    assert row.spearman.value == pytest.approx(stats.spearmanr(x, y)[0])
    assert row.icc.value == pytest.approx(icc_2_1(np.column_stack([x, y])))
    for est in (row.pearson, row.spearman, row.kendall, row.icc, row.rank_spearman):
        assert est.low <= est.value <= est.high
    # p-values: scipy's default tests on the same pairs; none for ICC or the rank statistic
    for est, ref in (
        (row.pearson, stats.pearsonr(x, y)),
        (row.spearman, stats.spearmanr(x, y)),
        (row.kendall, stats.kendalltau(x, y)),
    ):
        assert est.pvalue == pytest.approx(ref.pvalue, abs=1e-12)
    assert math.isnan(row.icc.pvalue) and math.isnan(row.rank_spearman.pvalue)


def test_undefined_or_too_few_pairs_have_no_pvalue():
    a = {("A", "s1", "ea"): 0.5, ("B", "s1", "ea"): 0.7}
    (row,) = agreement_table(a, dict(a), n_resamples=20)
    assert math.isnan(row.spearman.pvalue)  # two pairs
    a |= {("C", "s1", "ea"): 0.6}
    const = {key: 1.0 for key in a}
    (row,) = agreement_table(a, const, n_resamples=20)
    assert math.isnan(row.pearson.value) and math.isnan(row.pearson.pvalue)


def test_ratings_from_a_score_jsonl(tmp_path):
    from medibench.judges.agreement import load_ratings
    from medibench.samples import Score

    rows = [
        Score(sample_id="s1", model="A", k=1, protocol="p", protocol_version="1", metrics={"m": 2}),
        Score(sample_id="s1", model="A", k=0, protocol="p", protocol_version="1", metrics={"m": 1}),
        Score(sample_id="s1", model="A", protocol="q", protocol_version="1", metrics={"m": 9}),
    ]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(r.to_json() + "\n" for r in rows))
    assert load_ratings(path, protocol="p") == {("A", "s1", "m"): 1.0}  # the lowest k
    path.write_text("not json\n")
    with pytest.raises(ValueError, match="line 1: not a score record"):
        load_ratings(path)


def test_ratings_csv_long_and_wide(tmp_path):
    long = tmp_path / "long.csv"
    long.write_text("sample_id,model,metric,value\ns1,A,ea,0.5\ns1,A,vq,\ns2,A,ea,1\n")
    assert load_ratings_csv(long) == {("A", "s1", "ea"): 0.5, ("A", "s2", "ea"): 1.0}
    wide = tmp_path / "wide.csv"
    wide.write_text("sample_id,model,ea,vq\ns1,A,0.5,0.25\ns2,B,,1\n")
    assert load_ratings_csv(wide) == {
        ("A", "s1", "ea"): 0.5,
        ("A", "s1", "vq"): 0.25,
        ("B", "s2", "vq"): 1.0,
    }
    bad = tmp_path / "bad.csv"
    bad.write_text("sample_id,model,ea\ns1,A,good\n")
    with pytest.raises(ValueError, match="line 2: ea = 'good' is not a number"):
        load_ratings_csv(bad)
    with pytest.raises(ValueError, match="sample_id and model"):
        (tmp_path / "x.csv").write_text("id,ea\n1,2\n")
        load_ratings_csv(tmp_path / "x.csv")
