import json

import numpy as np
import pytest

from medibench.io import write_image
from medibench.judges import (
    CachePolicy,
    JudgeConfig,
    JudgementStore,
    MissingApiKeyError,
    judge_run,
)
from medibench.runs import RunStore
from tests.judges._server import FakeJudgeServer, Reply, first_text
from tests.judges.conftest import build_run

WELL = (
    "Step 1: the lesion is gone.\nEditing Accuracy: [7]/10\nContextual Preservation: [8]/10\n"
    "Visual Quality: [6]/10"
)
SCRIPT = {
    "ok": Reply(WELL),
    "markdown": Reply(
        "**Editing Accuracy:** 9/10\n**Contextual Preservation:** 8/10\n"
        "**Visual Quality:** **5**/10"
    ),
    "malformed": Reply("The edit looks fine to me."),
    "refused": Reply(None, refusal="I cannot evaluate medical images."),
    "partial": Reply("Editing Accuracy: [4]/10\nContextual Preservation: [8]/10"),
    "range": Reply(
        "Editing Accuracy: [12]/10\nContextual Preservation: [8]/10\nVisual Quality: [3]/10"
    ),
}


def scripted(body, n):
    text = first_text(body)
    return next(
        r
        for tag, r in SCRIPT.items()
        if text.startswith(f"Expected change to the medical image:\n{tag}:")
    )


def _cfg(srv, **kw):
    return JudgeConfig(model="judge-x", base_url=srv.base_url, backoff_s=0.01, **kw)


def _metrics(run, protocol="medebench", version="paper"):
    with RunStore(run) as s:
        return {
            sc.sample_id: (sc.metrics, sc.error)
            for sc in s.scores(protocol)
            if sc.protocol_version == version
        }


def test_judging_fills_scores_and_records_statuses(tmp_path, api_key):
    run = build_run(tmp_path / "run", list(SCRIPT))
    with FakeJudgeServer(scripted) as srv:
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv))
    assert srv.count == 6
    assert rep.counts == {"ok": 2, "unparsable": 3, "refused": 1}
    assert rep.filled == 12  # six samples, two protocols
    for version in ("paper", "1"):
        got = _metrics(run, version=version)
        assert got["s00"] == ({"cp": 0.9, "ea": 0.7, "vq": 0.6}, None)
        assert got["s01"][0] == {"cp": 0.9, "ea": 0.9, "vq": 0.5}
        m, err = got["s02"]  # malformed: both missing, never 0
        assert m["ea"] is None and m["vq"] is None
        assert "ea: unparsable: no 'Editing Accuracy' score" in err
        m, err = got["s03"]
        assert m["ea"] is None and "ea: refused: I cannot evaluate" in err
        # s04, s05 used to keep the part that parsed (ea 0.4; vq 0.3): the bug of issue 10,
        # item 1. All or nothing now: neither fills, each reason is recorded.
        m, err = got["s04"]  # one score missing: nothing filled
        assert m["ea"] is None and m["vq"] is None
        assert "vq: unparsable: no 'Visual Quality' score" in err
        assert "ea: unparsable: editing_accuracy parsed as 4 but is not used" in err
        m, err = got["s05"]  # out of range: rejected, recorded, and nothing else filled
        assert m["ea"] is None and m["vq"] is None
        assert "ea: out_of_range: 12 is not in [0, 10]" in err
        assert "vq: unparsable: visual_quality parsed as 3 but is not used" in err
    assert rep.missing == {"ea": 8, "vq": 8}


def test_records_hold_raw_answer_status_usage_and_no_secret(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok", "malformed"])
    cfg = _cfg(FakeJudgeServer(), price_input_per_mtok=2.0, price_output_per_mtok=10.0)
    with FakeJudgeServer(scripted) as srv:
        cfg = cfg.model_copy(update={"base_url": srv.base_url})
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], cfg)
    assert rep.cost_usd == pytest.approx(2 * (1000 * 2 + 100 * 10) / 1e6)
    with RunStore(run) as s:
        rows = JudgementStore(s).linked()
        assert s.get_meta("judge:medebench-judge@paper-structure")["judge_model"] == "judge-x"
    by_sample = {sid: j for _, sid, _, j in rows}
    ok, bad = by_sample["s00"], by_sample["s01"]
    assert ok.status == "ok" and ok.raw == WELL and ok.scores["editing_accuracy"] == 7.0
    assert (ok.input_tokens, ok.output_tokens, ok.attempts) == (1000, 100, 1)
    assert ok.cost_usd == pytest.approx(0.003) and ok.latency_s > 0
    assert ok.prompt_version == "paper-structure.1" and len(ok.prompt_sha256) == 64
    assert bad.status == "unparsable" and bad.raw == "The edit looks fine to me."
    assert ok.material["images"][0][0] == "input" and ok.material["decoding"]["seed"] == 0
    for f in run.rglob("run.sqlite*"):
        assert api_key.encode() not in f.read_bytes()


def test_second_run_makes_no_call_and_cache_is_by_content(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok", "markdown"], models=("m1", "m2"))
    # m2's first output is byte-identical to m1's: one judgement serves both.
    src = run / "outputs" / "m1" / "s00_0.png"
    (run / "outputs" / "m2" / "s00_0.png").write_bytes(src.read_bytes())
    with FakeJudgeServer(scripted) as srv:
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv))
        assert srv.count == 3 and rep.planned == 3
        (rep2,) = judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv))
        assert srv.count == 3 and rep2.planned == 0 and rep2.cached == 3 and rep2.requests == 0
        # Another judge model, seed or endpoint is another key.
        judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv, seed=1))
        assert srv.count == 6
    assert _metrics(run)["s00"][0]["ea"] == 0.7
    with RunStore(run) as s:
        links = JudgementStore(s).linked(judge_model="judge-x")
    assert {(m, sid) for m, sid, _, _ in links} >= {("m1", "s00"), ("m2", "s00")}


def test_only_failed_rejudges_just_the_failures(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok", "malformed", "refused"])
    with FakeJudgeServer(scripted) as srv:
        judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv))
        assert _metrics(run)["s01"][0]["ea"] is None
        srv.responder = lambda b, n: Reply(WELL.replace("[7]", "[5]"))
        (rep,) = judge_run(
            run, ["medebench-judge@paper-structure"], _cfg(srv), policy=CachePolicy.only_failed()
        )
        assert srv.count == 5 and rep.counts == {"ok": 2} and rep.cached == 0
        (rep,) = judge_run(
            run, ["medebench-judge@paper-structure"], _cfg(srv), policy=CachePolicy.only_failed()
        )
        assert srv.count == 5 and rep.planned == 0
    got = _metrics(run)
    assert got["s00"][0]["ea"] == 0.7  # kept from the first run
    assert got["s01"][0]["ea"] == 0.5 and got["s02"][0]["ea"] == 0.5
    assert got["s01"][1] is None


def test_passes_average_and_report_spread(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok"])

    def by_seed(body, n):
        ea = {0: 6, 1: 7, 2: 8}[body["seed"]]
        return Reply(WELL.replace("[7]", f"[{ea}]"))

    with FakeJudgeServer(by_seed) as srv:
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv), passes=3)
        assert srv.count == 3
        judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv), passes=3)
        assert srv.count == 3
    assert _metrics(run)["s00"][0]["ea"] == pytest.approx(0.7)
    assert rep.spread["editing_accuracy"] == pytest.approx(np.std([6, 7, 8]))
    assert rep.spread["visual_quality"] == 0.0


def test_budget_stops_cleanly_and_resumes(tmp_path, api_key):
    run = build_run(tmp_path / "run", [f"ok{i}" for i in range(6)])
    SCRIPT.update({f"ok{i}": Reply(WELL) for i in range(6)})
    cfg = dict(
        price_input_per_mtok=1.0,
        price_output_per_mtok=10.0,
        concurrency=1,
        est_image_tokens=300,
        est_output_tokens=100,
    )  # 0.002 USD a call
    with FakeJudgeServer(scripted) as srv:
        (rep,) = judge_run(
            run, ["medebench-judge@paper-structure"], _cfg(srv, **cfg), max_cost=0.005
        )
        assert srv.count == 2 and rep.stopped_by_budget and rep.not_started == 4
        assert rep.cost_usd == pytest.approx(0.004) and rep.cost_usd <= 0.005
        got = _metrics(run)
        assert sum(m["ea"] is not None for m, _ in got.values()) == 2
        # not judged rows keep their "not judged" reason
        assert all("not judged" in e for m, e in got.values() if m["ea"] is None)
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv, **cfg), max_cost=1.0)
        assert srv.count == 6 and rep.cached == 2 and rep.counts == {"ok": 4}
    assert all(m["ea"] == 0.7 for m, _ in _metrics(run).values())


def test_dry_run_counts_calls_and_cost_without_a_key(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = build_run(tmp_path / "run", ["ok", "markdown"])
    cfg = JudgeConfig(
        model="m",
        base_url="http://127.0.0.1:9/v1",
        price_input_per_mtok=1.0,
        price_output_per_mtok=10.0,
        est_image_tokens=300,
        est_output_tokens=100,
    )
    (rep,) = judge_run(run, ["medebench"], cfg, dry_run=True)
    assert rep.planned == 2 and rep.estimated_cost_usd > 0 and rep.dry_run
    with pytest.raises(MissingApiKeyError, match="OPENAI_API_KEY"):
        judge_run(run, ["medebench"], cfg)
    with pytest.raises(ValueError, match="prices"):
        judge_run(run, ["medebench"], JudgeConfig(model="m"), max_cost=1.0)


def test_oversized_images_are_resized_and_recorded_or_refused(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok"], size=40)
    with FakeJudgeServer(scripted) as srv:
        judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv, max_image_side=20))
        assert srv.count == 1
        url = srv.requests[0]["messages"][0]["content"][1]["image_url"]["url"]
        (rep,) = judge_run(
            run,
            ["medebench-judge@paper-structure"],
            _cfg(srv, max_image_side=16, oversize="refuse"),
        )
        assert srv.count == 1 and rep.counts == {"error": 1}
    import base64

    import cv2

    img = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), -1)
    assert img.shape[:2] == (20, 20)
    with RunStore(run) as s:
        keys = [k for (k,) in s.connection.execute("SELECT key FROM judgements")]
        recs = {j.material["max_image_side"]: j for j in JudgementStore(s).get_many(keys).values()}
    assert recs[20].notes[0] == "input resized from 40x40 to 20x20 (max_image_side 20)"
    assert (
        recs[16].status == "error"
        and "larger than the judge's max_image_side 16" in recs[16].problems["editing_accuracy"]
    )
    m, err = _metrics(run)["s00"]
    assert m["ea"] is None and "max_image_side 16" in err


def test_miedb_rubric_fills_modification_samples_only(tmp_path, api_key):
    run = build_run(
        tmp_path / "run",
        ["a", "b", "c"],
        benchmark="miedb",
        perspectives=["modification", "modification", "perception"],
        protocols=(("miedb", "paper"), ("miedb", "1")),
    )
    with FakeJudgeServer(lambda b, n: Reply("Mostly right. Rubric Score: [72]/100")) as srv:
        (rep,) = judge_run(run, ["miedb-rubric@1"], _cfg(srv))
        body = min(srv.requests, key=lambda r: "b: remove" in first_text(r))
    # the perception record is not planned at all: the rubric is not one of its metrics
    # (miedb protocols' applicable_metrics), so its row is left as the scorer wrote it
    assert srv.count == 2 and rep.items == 2 and not rep.skipped
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "text"]
    assert "a: remove the lesion" in parts[1]["text"]
    for version in ("paper", "1"):
        got = _metrics(run, "miedb", version)
        assert got["s00"][0]["rubric"] == 72.0 and got["s01"][0]["rubric"] == 72.0
        assert got["s02"][0]["rubric"] is None and "rubric: not judged" in got["s02"][1]


def test_medgen_checklist_with_and_without_gt(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["a"], benchmark="medgen", protocols=(("medgen", "code"),))
    answer = "\n".join(
        [
            "Edit In Target Region: yes",
            "Context Preserved: yes",
            "No New Artifacts: no",
            "Clinically Plausible: yes",
            "Anatomical Accuracy: [8]/10",
            "Clinical Finding Accuracy: [7]/10",
            "Instruction Compliance: [9]/10",
            "Cross-Modal Consistency: [6]/10",
            "Hallucination Control: [5]/10",
            "Overall: [7]/10",
        ]
    )
    with FakeJudgeServer(lambda b, n: Reply(answer)) as srv:
        judge_run(run, ["medgen-checklist@1"], _cfg(srv))
        judge_run(run, ["medgen-checklist@1-nogt"], _cfg(srv))
        kinds = [[p["type"] for p in r["messages"][0]["content"]] for r in srv.requests]
    assert kinds == [["image_url"] * 3 + ["text"], ["image_url"] * 2 + ["text"]]
    m, err = _metrics(run, "medgen", "code")["s00"]
    assert m["anatomical_accuracy"] == 8.0 and m["overall"] == 7.0 and err is None


def test_json_schema_mode_sends_the_schema(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok"])
    reply = json.dumps(
        {
            "differences": "none",
            "editing_accuracy": 7,
            "contextual_preservation": 8,
            "visual_quality": 6,
        }
    )
    with FakeJudgeServer(lambda b, n: Reply(reply)) as srv:
        judge_run(
            run, ["medebench-judge@paper-structure"], _cfg(srv, structured_output="json_schema")
        )
        fmt = srv.requests[0]["response_format"]
        text = first_text(srv.requests[0])
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == [
        "differences",
        "editing_accuracy",
        "contextual_preservation",
        "visual_quality",
    ]
    assert schema["properties"]["editing_accuracy"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 10,
    }
    assert "JSON object" in text
    assert _metrics(run)["s00"][0]["ea"] == 0.7


def test_messages_follow_the_paper_structure(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok"])
    with FakeJudgeServer(scripted) as srv:
        judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv))
        srv.responder = lambda b, n: Reply(WELL)
        judge_run(
            run, ["medebench-judge@paper-structure-instruction"], _cfg(srv), policy=CachePolicy()
        )
        a, b = srv.requests
    parts = a["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url", "image_url", "text"]
    assert parts[0]["text"] == "Expected change to the medical image:\nok: the lesion is gone"
    assert "Step 1" in parts[4]["text"] and "Editing Accuracy: [Score]/10" in parts[4]["text"]
    assert all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in parts[1:4])
    assert b["messages"][0]["content"][0]["text"].endswith("ok: remove the lesion")


def test_a_missing_output_file_is_recorded_not_fatal(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok", "markdown"])
    (run / "outputs" / "m1" / "s01_0.png").unlink()
    with FakeJudgeServer(scripted) as srv:
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv))
    assert srv.count == 1 and sum(rep.skipped.values()) == 1
    m, err = _metrics(run)["s01"]
    assert m["ea"] is None and "cannot read" in err


def test_unreadable_image_written_after_planning_is_an_error_record(tmp_path, api_key):
    run = build_run(tmp_path / "run", ["ok"])
    write_image(run / "outputs" / "m1" / "s00_0.png", np.zeros((4, 4), np.uint16) + 300)
    with FakeJudgeServer(scripted) as srv:
        (rep,) = judge_run(run, ["medebench-judge@paper-structure"], _cfg(srv))
    assert srv.count == 0 and rep.counts == {"error": 1}
