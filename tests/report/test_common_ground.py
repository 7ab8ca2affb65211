"""Leaderboards on common ground (issue 40): when models have outputs for different samples, the
headline rows compare them on the samples they all have (one n), a model's other samples sit in
their own ``unpaired`` row, and every table lists one group's models together."""

from __future__ import annotations

from rich.console import Console

from medibench.protocols import Aggregation
from medibench.report import summarize
from medibench.report._build import ProtocolSection
from medibench.report._console import summary_tables
from medibench.report._html import _section
from medibench.report._tables import leaderboard
from tests.report.test_aggregate import SAMPLES, _missing, _score

AGG = Aggregation(k_modes=(("@1", "first"),), group_by=("region",), ci_resamples=0)
# a: outputs for p1, p2, p3; b: p1 and p2 only (p3 missing): a's p3 is not common ground
SCORES = [
    _score("p1", 0, dice=0.5), _score("p2", 0, dice=0.7), _score("p3", 0, dice=0.9),
    _score("p1", 0, model="b", dice=0.4), _score("p2", 0, model="b", dice=0.6),
    _missing("p3", 0, names=("dice",)).model_copy(update={"model": "b"}),
]  # fmt: skip


def _rows(**kw):
    rows = summarize(SCORES, SAMPLES, AGG, metrics=["dice"], **kw)
    return {(r["model"], r["by"], r["group"]): r for r in rows}


def test_common_rows_share_one_n_and_the_extra_samples_are_apart():
    rows = _rows()
    assert rows[("a", "all", "common")]["n"] == rows[("b", "all", "common")]["n"] == 2
    assert rows[("a", "all", "common")]["dice"] == (0.5 + 0.7) / 2
    assert rows[("b", "all", "common")]["dice"] == (0.4 + 0.6) / 2
    assert (
        rows[("a", "all", "unpaired")]["n"] == 1 and rows[("a", "all", "unpaired")]["dice"] == 0.9
    )
    assert ("b", "all", "unpaired") not in rows
    assert rows[("a", "all", "micro")]["dice"] == (0.5 + 0.7 + 0.9) / 3  # its own samples
    one = [s for s in SCORES if s.model == "a"]
    alone = summarize(one, SAMPLES, AGG, metrics=["dice"])
    assert not [r for r in alone if r["group"] in ("common", "unpaired")]  # one model: no need


def test_tables_list_a_groups_models_together_common_first():
    rows = leaderboard(SCORES, SAMPLES, AGG, metrics=["dice"], by=("region",))
    keys = [(r["by"], r["group"], r["model"]) for r in rows]
    assert keys == [
        ("region", "r1", "a"), ("region", "r1", "b"), ("region", "r2", "a"), ("region", "r2", "b"),
        ("all", "common", "a"), ("all", "common", "b"), ("all", "micro", "a"),
        ("all", "micro", "b"), ("all", "unpaired", "a"),
    ]  # fmt: skip
    console = Console(width=200, record=True)
    for table in summary_tables(rows, label="t", aggregation=AGG, metrics=["dice"]):
        console.print(table)
    text = console.export_text()
    overall = text[text.index("t overall") :]
    lines = [line for line in overall.splitlines() if line.startswith("│ ")]
    assert [line.split("│")[2].strip() for line in lines[:5]] == [
        "common", "common", "micro", "micro", "unpaired"]  # fmt: skip
    assert "common = the samples every model has an output for" in " ".join(text.split())


def test_the_page_names_the_common_set_and_one_test_per_comparison(tmp_path):
    from medibench.report._tables import comparisons, per_model_values

    sec = ProtocolSection("p", "1", "", AGG, ["dice"], [], SCORES)
    sec.values = per_model_values(SCORES, SAMPLES, AGG, ["dice"])
    sec.rows = leaderboard(SCORES, SAMPLES, AGG, metrics=["dice"], values=sec.values)
    sec.shown_metrics = ["dice"]
    sec.compare = comparisons(sec.values, metrics=["dice"], n_resamples=20, seed=1, level=0.95)
    page = _section(sec, tmp_path)
    assert page["common_n"] == 2
    assert [c["key"] for c in page["compare_columns"]][-2:] == ["rank_biserial", "permutation_p"]
    assert [c["key"] for c in page["wilcoxon_columns"]][-1] == "wilcoxon_p"
    assert len(page["wilcoxon"]) == len(page["compare"]) == 1


def test_paired_comparisons_per_task_follow_the_overall_one():
    from medibench.report._tables import comparisons, per_model_values
    from medibench.stats import compare_models

    values = per_model_values(SCORES, SAMPLES, AGG, ["dice"])
    tasks = {"p1": "t-a", "p2": "t-a", "p3": "t-b", "t1": "t-b"}
    rows = comparisons(values, metrics=["dice"], n_resamples=20, seed=1, groups=tasks)
    assert [r["group"] for r in rows] == ["all", "t-a"]  # t-b: b has no value there
    alone = compare_models({"a": {"p1": 0.5, "p2": 0.7}, "b": {"p1": 0.4, "p2": 0.6}},
                           metric="dice", n_resamples=20, seed=1)  # fmt: skip
    assert rows[1] == {"k_mode": "@1", "group": "t-a", **alone[0]}
