"""Reliability, generality and locality on hand-made cohorts, and the results format."""

from __future__ import annotations

import json

import pytest

from medibench.knowledge_edit import (
    ResultLine,
    ResultsFormatError,
    edit_values,
    read_results,
    summarize,
    write_results,
)
from medibench.stats import bootstrap_ci


def line(edit, probe, kind, pre, post, *, tt="T0", stage="immediate", matcher="exact"):
    return ResultLine(edit, probe, kind, tt, stage, pre, post, matcher)


# Edit A: 2 reliability probes (1 right after), generality: 3 wrong before (2 fixed) + 1 right
# before (ignored), locality: 2 right before (1 kept) + 1 wrong before (ignored).
A = [
    line("A", "r0", "reliability", False, True),
    line("A", "r1", "reliability", False, False),
    line("A", "g0", "generality", False, True, tt="T1"),
    line("A", "g1", "generality", False, True, tt="T1"),
    line("A", "g2", "generality", False, False, tt="T2"),
    line("A", "g3", "generality", True, False, tt="T2"),
    line("A", "l0", "locality", True, True, tt="T4"),
    line("A", "l1", "locality", True, False, tt="T4"),
    line("A", "l2", "locality", False, True, tt="T4"),
]
# Edit B: generality undefined (its only probe was right before), locality undefined (its only
# probe was wrong before), reliability 1.
B = [
    line("B", "r0", "reliability", False, True),
    line("B", "g0", "generality", True, True, tt="T1"),
    line("B", "l0", "locality", False, False, tt="T4"),
]
# Edit C: no generality or locality probe at all.
C = [line("C", "r0", "reliability", True, True)]


def test_per_edit_values_and_reasons():
    v = edit_values(A + B + C)
    assert v["A"]["reliability"].value == 0.5
    assert v["A"]["generality"].value == pytest.approx(2 / 3)
    assert (v["A"]["generality"].n, v["A"]["generality"].hits) == (3, 2)
    assert v["A"]["locality"].value == 0.5
    assert v["B"]["reliability"].value == 1.0
    assert v["B"]["generality"].value is None
    assert v["B"]["generality"].reason == "no generality probe was wrong before the edit"
    assert v["B"]["locality"].value is None
    assert v["B"]["locality"].reason == "no locality probe was right before the edit"
    assert v["C"]["generality"].reason == "no generality probe"
    assert v["C"]["locality"].reason == "no locality probe"


def test_macro_micro_undefined_and_ci():
    s = summarize(A + B + C, n_resamples=200, seed=3)
    assert s["n_edits"] == 3
    assert s["reliability"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert s["generality"] == pytest.approx(2 / 3)  # only A defines it
    assert s["locality"] == pytest.approx(0.5)
    assert s["n_undefined"] == {"reliability": 0, "generality": 2, "locality": 2}
    # micro pools probes: reliability 3 right of 4, generality 2 of 3, locality 1 of 2
    assert s["micro"] == {"reliability": 0.75, "generality": pytest.approx(2 / 3), "locality": 0.5}
    lo, hi = bootstrap_ci([0.5, 1.0, 1.0], n_resamples=200, seed=3)
    assert s["ci95"]["reliability"] == [lo, hi]
    assert s["ci95"]["generality"] is None  # one edit defines it: no interval, never [v, v]
    assert s["undefined_reasons"]["generality"] == {
        "no generality probe was wrong before the edit": 1,
        "no generality probe": 1,
    }


def test_by_task_type_and_stage():
    final = [
        line("A", "r0", "reliability", False, False, stage="final"),
        line("A", "l0", "locality", True, True, tt="T4", stage="final"),
    ]
    s = summarize(A + B + C + final)
    t1, t2, t4 = (s["by_task_type"][t] for t in ("T1", "T2", "T4"))
    assert t1["generality"] == 1.0 and t1["n_undefined"]["generality"] == 1  # A: 2/2, B: undefined
    assert t2["generality"] == 0.0 and t2["n_edits"] == 1
    assert t4["locality"] == 0.5 and t4["n_undefined"]["locality"] == 1
    assert s["by_task_type"]["T0"]["reliability"] == s["reliability"]
    assert set(s["by_stage"]) == {"immediate", "final"}
    assert s["by_stage"]["final"]["reliability"] == 0.0
    assert s["by_stage"]["final"]["locality"] == 1.0
    assert s["by_stage"]["final"]["n_edits"] == 1
    assert s["by_stage"]["immediate"]["reliability"] == s["reliability"]


def test_missing_matcher_decisions_are_left_out_and_counted():
    lines = [
        line("A", "r0", "reliability", False, None),
        line("A", "r1", "reliability", False, True),
        line("B", "r0", "reliability", None, None),
    ]
    s = summarize(lines)
    assert s["reliability"] == 1.0  # A: 1/1 decided; B: undefined
    assert s["n_missing"]["reliability"] == 2
    assert s["n_undefined"]["reliability"] == 1
    assert "missing" in next(iter(s["undefined_reasons"]["reliability"]))


def test_matchers_side_by_side():
    lines = A + [
        ResultLine(x.edit_id, x.probe_id, x.kind, x.task_type, x.stage, True, True, "fuzzy")
        for x in A
    ]
    s = summarize(lines)
    assert s["matcher"] == "exact"
    assert s["by_matcher"]["fuzzy"]["reliability"] == 1.0
    assert s["by_matcher"]["exact"]["reliability"] == 0.5
    assert summarize(lines, matcher="fuzzy")["reliability"] == 1.0
    with pytest.raises(ValueError, match="judge.*found: exact, fuzzy"):
        summarize(lines, matcher="judge")


def test_results_round_trip(tmp_path):
    path = write_results(tmp_path / "r.jsonl", A)
    back = read_results(path)
    assert back == A
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {
        "edit_id",
        "probe_id",
        "kind",
        "task_type",
        "stage",
        "pre_correct",
        "post_correct",
        "matcher",
    }


def test_unknown_kind_is_an_error_naming_the_line(tmp_path):
    path = write_results(tmp_path / "r.jsonl", A[:2])
    bad = {**A[0].to_dict(), "kind": "portability"}
    with path.open("a") as fh:
        fh.write(json.dumps(bad) + "\n")
    with pytest.raises(ResultsFormatError, match=r"r\.jsonl line 3: unknown kind 'portability'"):
        read_results(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stage": "later"}, "unknown stage"),
        ({"task_type": "T9"}, "unknown task_type"),
        ({"post_correct": "yes"}, "post_correct must be"),
        ({"edit_id": ""}, "edit_id must be"),
    ],
)
def test_other_bad_lines(tmp_path, change, message):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({**A[0].to_dict(), **change}) + "\n")
    with pytest.raises(ResultsFormatError, match=message):
        read_results(path)
