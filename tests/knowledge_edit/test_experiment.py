"""The experiment loop: the sequential order, immediate and final stages, the run store, the
CLI (tasks, run, score)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.knowledge_edit import (
    CallableAnswerer,
    InContextEditor,
    make_matchers,
    read_results,
    run_edits,
    summarize,
)

FACT = re.compile(r'New fact: the answer to "(.*?)" is (.*?)\.')


def knower(known: dict[str, str]):
    """Answers from its in-context facts (an edited question gets its target; with any fact in
    context, every other question gets the last fact's target: edits that overgeneralise),
    else from ``known``."""

    def answer(image, text: str) -> str:
        facts = FACT.findall(text)
        question = FACT.sub("", text).strip()
        for q, t in facts:
            if q == question:
                return t
        if facts:
            return facts[-1][1]
        return known.get(question, "unknown")

    return answer


class Recording(InContextEditor):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def edit(self, model, request):
        self.log.append(("edit", request.edit_id))
        handle = super().edit(model, request)
        undo = handle.restore

        def restore():
            self.log.append(("undo", request.edit_id))
            undo()

        handle.restore = restore
        return handle


def test_sequential_order_and_stages(synthetic):
    log: list = []
    model = CallableAnswerer(knower({}))
    report = run_edits(synthetic, model, Recording(log), sequential=4)
    ids = [r.edit_id for r in synthetic.requests]
    assert [e.edit_id for e in report.edits] == ids
    assert [e.sequence for e in report.edits] == [0, 0, 0, 0, 1, 1]
    expected = [("edit", i) for i in ids[:4]] + [("undo", i) for i in reversed(ids[:4])]
    expected += [("edit", i) for i in ids[4:]] + [("undo", i) for i in reversed(ids[4:])]
    assert log == expected
    assert model.context == [] and model.edits == []
    stages = {(x.edit_id, x.stage) for x in report.lines}
    assert stages == {(i, s) for i in ids for s in ("immediate", "final")}
    s = summarize(report.lines)
    assert s["reliability"] == 1.0  # right after its own edit
    # after the sequence's last edit, every earlier question is answered by its own fact too
    assert s["by_stage"]["final"]["reliability"] == 1.0


def test_locality_and_generality_computed_from_a_scripted_model(synthetic):
    # Before any edit the model answers from `known` (a question's answer on the last image
    # that asked it); with the edit's fact in context it answers every question with the
    # edit's target. So a probe is right after the edit iff its gold answer is the target.
    known = {p.question: p.answer for r in synthetic.requests for p in r.probes}
    model = CallableAnswerer(knower(known))
    report = run_edits(
        synthetic, model, InContextEditor(), matchers=make_matchers(["exact"], model)
    )
    loc, gen = [], []
    for r in synthetic.requests:
        before = {p.probe_id: known[p.question] == p.answer for p in r.probes}
        right = [p for p in r.probes if p.kind == "locality" and before[p.probe_id]]
        wrong = [p for p in r.probes if p.kind == "generality" and not before[p.probe_id]]
        if right:
            loc.append(sum(p.answer == r.target for p in right) / len(right))
        if wrong:
            gen.append(1.0)  # generality probes' gold is the target: all fixed
    assert loc  # some locality values are defined
    s = summarize(report.lines)
    assert s["locality"] == pytest.approx(sum(loc) / len(loc))
    assert s["n_undefined"]["locality"] == len(synthetic) - len(loc)
    assert s["generality"] == (1.0 if gen else None)
    assert s["n_undefined"]["generality"] == len(synthetic) - len(gen)
    assert s["reliability"] == 1.0
    assert s["locality"] < 1.0


@pytest.fixture
def cli():
    return CliRunner()


def test_cli_tasks_run_score(tmp_path, cli, tiny_path):
    tasks = tmp_path / "tasks"
    r = cli.invoke(app, ["edit", "tasks", "--synthetic", "4", "--out", str(tasks)])
    assert r.exit_code == 0, r.output
    assert "4 edit requests" in r.output
    run = tmp_path / "run"
    for extra in ([], ["--sequential", "2"]):
        r = cli.invoke(
            app,
            [
                "edit",
                "run",
                "--tasks",
                str(tasks),
                "--model",
                str(tiny_path),
                "--editor",
                "ft",
                "--out",
                str(run),
                "--max-new-tokens",
                "4",
                "--matcher",
                "exact",
                "--matcher",
                "fuzzy",
                *extra,
            ],
        )
        assert r.exit_code == 0, r.output
    results = run / "edit_results.jsonl"
    lines = read_results(results)
    assert {x.extra["setting"] for x in lines} == {"single", "sequential-2"}
    r = cli.invoke(app, ["edit", "score", str(results)])
    assert r.exit_code == 2 and "holds 2 runs" in r.output
    out = tmp_path / "s.json"
    r = cli.invoke(
        app, ["edit", "score", str(results), "--setting", "sequential-2", "--json", str(out)]
    )
    assert r.exit_code == 0, r.output
    s = json.loads(out.read_text())
    for key in (
        "reliability",
        "generality",
        "locality",
        "n_edits",
        "n_undefined",
        "by_task_type",
        "by_stage",
    ):
        assert key in s
    assert s["reliability"] == 1.0 and s["n_edits"] == 4
    assert set(s["by_stage"]) == {"immediate", "final"}
    assert set(s["by_task_type"]) == {"T0", "T1", "T2", "T3", "T4", "T5"}
    assert set(s["by_matcher"]) == {"exact", "fuzzy"}
    from medibench.runs import RunStore

    with RunStore.open_existing(run) as store:
        names = {t.name for t in store.tables()}
        assert {"edit_requests", "edit_results"} <= names
        _, rows = store.table_rows("edit_requests")
        assert len(rows) == 8
        spec = store.get_meta(f"knowledge_edit/{tiny_path}/ft/sequential-2")
        assert spec["editor"]["name"] == "ft" and spec["editor"]["lr"] == 0.01
        assert spec["taskset"]["n_edits"] == 4 and spec["matchers"] == ["exact", "fuzzy"]
    from medibench.report import build_report

    page = build_report(run, plots=False).read_text()
    assert "Model editing" in page and "ft · sequential-2" in page and "ft · single" in page
    assert "T5: temporal progression" in page


def test_cli_score_refuses_an_unknown_kind(tmp_path, cli):
    path = tmp_path / "r.jsonl"
    good = {
        "edit_id": "e",
        "probe_id": "p",
        "kind": "reliability",
        "task_type": "T0",
        "stage": "immediate",
        "pre_correct": False,
        "post_correct": True,
    }
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "kind": "portability"}) + "\n")
    r = cli.invoke(app, ["edit", "score", str(path)])
    assert r.exit_code == 2
    assert "line 2: unknown kind 'portability'" in r.output


def test_cli_tasks_needs_a_source(tmp_path, cli):
    r = cli.invoke(app, ["edit", "tasks", "--out", str(tmp_path / "t")])
    assert r.exit_code == 2 and "--synthetic N" in r.output


def test_cli_tasks_from_slake_and_vqarad(tmp_path, cli):
    from tests.knowledge_edit.test_tasks import _slake, _vqarad

    slake, rad = _slake(tmp_path / "slake"), _vqarad(tmp_path / "rad")
    out = tmp_path / "tasks"
    r = cli.invoke(
        app,
        [
            "edit",
            "tasks",
            "--slake",
            str(slake),
            "--vqarad",
            str(rad),
            "--out",
            str(out),
            "--seed",
            "3",
        ],
    )
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "taskset.json").read_text())
    assert manifest["sources"] == ["slake", "vqa-rad"] and manifest["n_edits"] == 6
    assert manifest["n_questions"] == 6 and manifest["language"] == "en"
    ids = [json.loads(x)["edit_id"] for x in (out / "tasks.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(
        ["slake-1", "slake-3", "slake-4", "slake-5", "vqa-rad-a1", "vqa-rad-a2"]
    )
    (rad / "VQA_RAD Image Folder" / "synpic1.jpg").unlink()
    r = cli.invoke(app, ["edit", "tasks", "--vqarad", str(rad), "--out", str(tmp_path / "t2")])
    assert r.exit_code == 2 and "question a1" in r.output and "is missing" in r.output


def test_cli_score_csv_is_the_printed_table_as_rows(tmp_path, cli):
    import csv

    def line(edit, probe, kind, task, post, pre=False, stage="immediate"):
        return json.dumps({"edit_id": edit, "probe_id": probe, "kind": kind, "task_type": task,
                           "stage": stage, "pre_correct": pre, "post_correct": post})  # fmt: skip

    path = tmp_path / "r.jsonl"
    path.write_text(
        "\n".join(
            [
                line("e1", "p1", "reliability", "T0", True),
                line("e1", "p2", "generality", "T1", True),
                line("e1", "p3", "locality", "T0", False, pre=True),
                line("e2", "p4", "reliability", "T0", False),
                line("e2", "p5", "generality", "T1", False),
                line("e2", "p6", "generality", "T1", True),
            ]
        )
        + "\n"
    )
    table, out = tmp_path / "s.csv", tmp_path / "s.json"
    r = cli.invoke(app, ["edit", "score", str(path), "--csv", str(table), "--json", str(out)])
    assert r.exit_code == 0, r.output
    s = json.loads(out.read_text())
    rows = {row["group"]: row for row in csv.DictReader(table.open())}
    assert list(rows) == ["all (immediate)", "T0", "T1", "stage immediate"]
    top = rows["all (immediate)"]
    assert (top["matcher"], top["edits"]) == ("exact", "2")
    assert float(top["reliability"]) == 0.5 == s["reliability"]
    assert float(top["generality"]) == 0.75 == s["generality"]  # e1 1/1, e2 1/2
    assert float(top["locality"]) == 0.0 == s["locality"]  # e1's one defined probe broke
    assert (top["locality_undefined"], top["reliability_undefined"]) == ("1", "0")
    for m in ("reliability", "generality"):
        low, high = s["ci95"][m]
        assert (float(top[f"{m}_ci_low"]), float(top[f"{m}_ci_high"])) == (low, high)
    assert rows["T1"]["reliability"] == "" and rows["T1"]["reliability_undefined"] == "2"
