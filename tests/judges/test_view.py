"""The judge's answers per output as the report reads them (medibench.judges._view), on the run
that tests/report/helpers.py judges with the real ``medibench judge``."""

import shutil
import sqlite3

from medibench.judges._view import ANSWER_ID_LENGTH, sample_judgements
from tests.report.helpers import JUDGES


def _copy_of_the_judged_runs_store(judged_report, tmp_path):
    copy = tmp_path / "run.sqlite"
    shutil.copyfile(judged_report.parent.parent / "run" / "run.sqlite", copy)
    return sqlite3.connect(copy)


def test_each_output_lists_its_judges_and_passes_in_order(judged_report, tmp_path):
    db = _copy_of_the_judged_runs_store(judged_report, tmp_path)
    got = sample_judgements(db)
    assert sorted(got["outputs"]) == [("m1", "s00", 0), ("m1", "s01", 0)]
    for (model, sid, k), groups in got["outputs"].items():
        assert [g["judge"] for g in groups] == sorted(JUDGES)
        for g in groups:
            rows = db.execute(
                "SELECT key FROM judgement_links WHERE model = ? AND sample_id = ? AND k = ? "
                "AND judge = ? ORDER BY pass_index",
                (model, sid, k, g["judge"]),
            )
            assert g["passes"] == [key[:ANSWER_ID_LENGTH] for (key,) in rows]
            assert [got["answers"][i]["pass"] for i in g["passes"]] == [0, 1]
    keys = [key for (key,) in db.execute("SELECT key FROM judgements")]
    assert len(got["answers"]) == len(keys) == 12


def test_a_judge_protocol_not_registered_here_is_shown_with_its_keys_and_a_note(
    judged_report, tmp_path
):
    db = _copy_of_the_judged_runs_store(judged_report, tmp_path)
    for table in ("judgements", "judgement_links"):
        db.execute(f"UPDATE {table} SET judge = 'retired-rubric@0' WHERE judge = 'miedb-rubric@1'")
    got = sample_judgements(db)
    assert got["judges"]["retired-rubric@0"] == {
        "description": "",
        "fields": [["rubric", "rubric", None, "number"]],
        "fills": [],
        "note": "judge protocol 'retired-rubric@0' is not registered in this medibench: its "
        "scores are shown by their keys, the metrics they fill are not known and the answer is "
        "shown whole (no rationale separated)",
    }
    group = next(g for g in got["outputs"][("m1", "s00", 0)] if g["judge"] == "retired-rubric@0")
    answer = got["answers"][group["passes"][1]]
    assert answer["rationale"] is None and answer["scores"] == {"rubric": 45.0}
    assert answer["answer"] == '{"reason": "Half of the lesion is left.", "rubric": 45}'


def test_two_outputs_that_share_a_judgement_share_its_answer(judged_report, tmp_path):
    db = _copy_of_the_judged_runs_store(judged_report, tmp_path)
    db.execute("INSERT INTO judgement_links SELECT 'm2', sample_id, k, judge, judge_model, "
               "endpoint, pass_index, key FROM judgement_links WHERE model = 'm1'")  # fmt: skip
    got = sample_judgements(db)
    assert got["outputs"][("m2", "s00", 0)] == got["outputs"][("m1", "s00", 0)]
    assert len(got["answers"]) == 12


def test_a_run_never_judged_has_nothing(tmp_path):
    db = sqlite3.connect(tmp_path / "run.sqlite")
    db.execute("CREATE TABLE samples (sample_id TEXT)")
    assert sample_judgements(db) == {"outputs": {}, "judges": {}, "answers": {}}
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert tables == {"samples"}  # read only: no judge table made
