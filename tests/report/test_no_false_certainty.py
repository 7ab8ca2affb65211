"""No interval of zero width from fewer than two values (issue 40): the summary rows, the
paired comparisons, MedGEN's pairing sensitivity and model editing keep ``None``; every table
shows "n=1" where the interval would have been ``[x, x]``."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from medibench.benchmarks.medgen.controls import DeltaRow, sensitivity_table
from medibench.protocols import Aggregation
from medibench.report import summarize
from medibench.report._console import summary_tables
from medibench.stats import compare_models, interval_text
from tests.report.test_aggregate import SAMPLES, _score

ZERO_WIDTH = re.compile(r"\[(-?[\d.]+), \1\]")


@pytest.mark.parametrize(
    ("args", "text"),
    [((0.1, 0.3, 5), "[0.100, 0.300]"), ((0.2, 0.2, 1), "n=1"), ((None, None, 0), "n=0"),
     ((None, None, None), "-"), ((0.25, 0.5, None, ".2f"), "[0.25, 0.50]")],
)  # fmt: skip
def test_interval_text(args, text):
    assert interval_text(*args) == text


def test_a_one_value_row_has_no_interval_and_the_console_says_n_1():
    agg = Aggregation(k_modes=(("@1", "first"),), group_by=("region",), ci_resamples=50)
    scores = [_score("p1", 0, dice=0.5, psnr=30.0), _score("p2", 0, dice=0.7)]
    rows = summarize(scores, SAMPLES, agg, metrics=["dice", "psnr"])
    micro = next(r for r in rows if r["group"] == "micro")
    assert micro["psnr_n"] == 1 and micro["psnr_ci_low"] is micro["psnr_ci_high"] is None
    assert micro["dice_ci_low"] < micro["dice_ci_high"]
    console = Console(width=200, record=True)
    for table in summary_tables(rows, label="t", aggregation=agg, metrics=["dice", "psnr"]):
        console.print(table)
    text = console.export_text()
    psnr = [line for line in text.splitlines() if " psnr " in line and "micro" in line]
    assert len(psnr) == 1 and "n=1" in psnr[0]
    assert not ZERO_WIDTH.search(text)


def test_one_pair_has_no_paired_interval():
    one = compare_models({"a": {"s1": 0.5}, "b": {"s1": 0.25}}, metric="m", n_resamples=50)
    assert one[0]["n"] == 1 and one[0]["mean_diff"] == 0.25
    assert one[0]["diff_ci_low"] is one[0]["diff_ci_high"] is None
    two = compare_models({"a": {"s1": 0.5, "s2": 0.1}, "b": {"s1": 0.25, "s2": 0.3}},
                         metric="m", n_resamples=50)  # fmt: skip
    assert two[0]["diff_ci_low"] < two[0]["diff_ci_high"]


def test_pairing_sensitivity_of_one_pair_says_n_1():
    rows = [DeltaRow("blank", "m", "psnr", 1, 20.0, 15.0, 5.0, None, None),
            DeltaRow("blank", "n", "psnr", 3, 20.0, 15.0, 5.0, 4.0, 6.0)]  # fmt: skip
    table = sensitivity_table(rows)
    assert "| blank | m | psnr | 1 | 20.000 | 15.000 | 5.000 | n=1 |" in table
    assert "| 5.000 | [4.000, 6.000] |" in table


def test_values_that_are_all_equal_have_no_interval():
    # identity's context preservation is 1 on every sample (medibench demo): no spread to resample
    agg = Aggregation(k_modes=(("@1", "first"),), group_by=("region",), ci_resamples=50)
    scores = [_score("p1", 0, dice=1.0, psnr=30.0), _score("p2", 0, dice=1.0, psnr=32.0)]
    rows = summarize(scores, SAMPLES, agg, metrics=["dice", "psnr"])
    micro = next(r for r in rows if r["group"] == "micro")
    assert micro["dice"] == 1.0 and micro["dice_n"] == 2
    assert micro["dice_ci_low"] is micro["dice_ci_high"] is None
    assert micro["psnr_ci_low"] < micro["psnr_ci_high"]


def test_an_interval_narrower_than_three_decimals_shows_more():
    from medibench.report._formats import interval_ends, markdown_table
    from medibench.report._html import _cell

    assert interval_ends(4.074744276, 4.074765799) == ("4.0747", "4.0748")
    assert interval_ends(0.25, 0.75) == ("0.250", "0.750")
    row = {"mean_diff": 4.0747550, "n": 2, "diff_ci_low": 4.074744276, "diff_ci_high": 4.074765799}
    assert _cell(row, "mean_diff", ("diff_ci_low", "diff_ci_high"))["ci"] == "[4.0747, 4.0748]"
    table = markdown_table([row], ["mean_diff"], ci={"mean_diff": ("diff_ci_low", "diff_ci_high")})
    assert "4.075 [4.0747, 4.0748]" in table and not ZERO_WIDTH.search(table)
