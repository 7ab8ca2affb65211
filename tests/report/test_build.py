import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from medibench.report import build_report
from medibench.runs import RunStore, RunStoreError
from medibench.samples import Score
from tests.report.helpers import JUDGE_ANSWERS, JUDGES, browser_data, make_run


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("href", "src") and v and not v.startswith(("#", "data:")):
                self.links.append(v)


def page_links(index: Path) -> list[str]:
    """Every href/src of the page, and every picture path in its sample-browser data."""
    html = index.read_text()
    parser = _Links()
    parser.feed(html)
    for s in browser_data(index)["samples"]:
        pics = [
            *s["pics"].values(),
            *(r["output"] for r in s["runs"]),
            *(r["diff"] for r in s["runs"]),
        ]
        for p in pics:
            if p and "missing" not in p:
                parser.links += [v for v in (p["thumb"], p["full"]) if v]
    return parser.links


def blob_of(index: Path) -> dict:
    return browser_data(index)


@pytest.fixture(scope="module")
def report(tiny_run, tmp_path_factory):
    return build_report(tiny_run, tmp_path_factory.mktemp("out") / "report", n_resamples=200)


def test_report_folder_has_page_tables_plots_and_pictures(report):
    out = report.parent
    assert report.name == "index.html"
    for fmt in ("csv", "json", "md", "tex"):
        assert (out / "tables" / "native@1" / f"leaderboard.{fmt}").is_file()
        assert (out / "tables" / "native@1" / f"comparisons.{fmt}").is_file()
    tex = (out / "tables" / "native@1" / "leaderboard.tex").read_text()
    assert "\\toprule" in tex and "classical" in tex and "identity" in tex
    kinds = {p.name.split("_")[0] for p in (out / "plots" / "native@1").glob("*.png")}
    assert kinds == {"bars", "dist", "heat", "scatter"}
    assert len(list((out / "plots" / "native@1").glob("*.svg"))) == len(
        list((out / "plots" / "native@1").glob("*.png"))
    )
    html = report.read_text()
    assert "https://" not in html and "http://" not in html  # no CDN, nothing remote
    assert 'id="no-scores"' not in html


def test_every_link_of_the_page_resolves(report):
    links = page_links(report)
    assert len(links) > 50
    missing = [href for href in links if not (report.parent / href).is_file()]
    assert missing == []


def test_leaderboard_matches_the_scores(report, tiny_run):
    rows = json.loads((report.parent / "tables" / "native@1" / "leaderboard.json").read_text())
    with RunStore.open_existing(tiny_run) as store:
        ssim = [s.metrics["ssim"] for s in store.scores() if s.model == "classical"]
    (micro,) = [r for r in rows["rows"] if r["model"] == "classical" and r["group"] == "micro"]
    assert micro["ssim"] == pytest.approx(sum(ssim) / len(ssim))
    assert micro["ssim_ci_low"] <= micro["ssim"] <= micro["ssim_ci_high"]
    assert {r["by"] for r in rows["rows"]} == {"all", "perspective", "task", "region", "modality"}


def test_sample_browser_data(report):
    blob = blob_of(report)
    assert blob["models"] == ["classical", "identity"]
    assert len(blob["samples"]) == 9
    s = blob["samples"][0]
    assert s["pics"]["roi"]["thumb"].startswith("thumbs/")
    assert all(r["v"][0] is not None and not r["failed"] for r in s["runs"])


def test_run_without_scores_says_so(tmp_path):
    run = make_run(tmp_path / "run", n=3, scored=False, models=("identity",))
    index = build_report(run, tmp_path / "report")
    html = index.read_text()
    assert 'id="no-scores"' in html and "This run has no scores yet" in html
    assert not (tmp_path / "report" / "tables").exists()
    assert len(blob_of(index)["samples"]) == 3


def test_missing_images_are_named_placeholders(tmp_path):
    run = make_run(tmp_path / "run", n=3, models=("identity",))
    with RunStore.open_existing(run) as store:
        sample = store.samples()[1]
        pred = [p for p in store.predictions() if p.sample_id == sample.sample_id][0]
    Path(sample.input).unlink()
    (run / pred.path).unlink()
    index = build_report(run, tmp_path / "report", plots=False)
    s = [x for x in blob_of(index)["samples"] if x["id"] == sample.sample_id][0]
    assert s["pics"]["input"] == {"missing": f"{Path(sample.input).name}: file not found"}
    assert s["runs"][0]["output"] == {"missing": f"{Path(pred.path).name}: file not found"}
    assert s["runs"][0]["diff"] is None
    assert [h for h in page_links(index) if not (index.parent / h).is_file()] == []


def test_failed_prediction_is_flagged(tmp_path):
    run = make_run(tmp_path / "run", n=3, models=("identity",))
    with RunStore.open_existing(run) as store:
        s = store.scores()[0]
        store.put_score(
            s.model_copy(
                update={"status": "error", "error": "boom", "metrics": dict.fromkeys(s.metrics)}
            )
        )
    blob = blob_of(build_report(run, tmp_path / "report", plots=False))
    (hit,) = [x for x in blob["samples"] if x["id"] == s.sample_id]
    assert hit["runs"][0]["failed"] and "boom" in hit["runs"][0]["score_error"]


def test_mixed_protocol_versions_are_side_by_side_never_averaged(tmp_path):
    run = make_run(tmp_path / "run", n=3, models=("identity",))
    with RunStore.open_existing(run) as store:
        for s in store.scores():
            # The same outputs under another (unregistered) version, with other values.
            metrics = {k: (None if v is None else 0.25) for k, v in s.metrics.items()}
            store.put_score(
                Score(**{**s.model_dump(), "protocol_version": "0", "metrics": metrics})
            )
        v1 = [s.metrics["ssim"] for s in store.scores() if s.protocol_version == "1"]
    index = build_report(run, tmp_path / "report", n_resamples=50, plots=False)
    html = index.read_text()
    assert 'id="mixed-versions"' in html and "never averaged" in html
    out = tmp_path / "report" / "tables"
    rows0 = json.loads((out / "native@0" / "leaderboard.json").read_text())["rows"]
    rows1 = json.loads((out / "native@1" / "leaderboard.json").read_text())["rows"]
    micro = [r for r in rows0 if r["group"] == "micro"][0]
    assert micro["ssim"] == pytest.approx(0.25)
    assert [r for r in rows1 if r["group"] == "micro"][0]["ssim"] == pytest.approx(
        sum(v1) / len(v1)
    )
    assert "native@0</th>" in html and "native@1</th>" in html  # the side-by-side table


def test_link_mode_and_rebuild_in_place(tiny_run, tmp_path):
    index = build_report(tiny_run, tmp_path / "r", images="link", plots=False, n_resamples=50)
    assert not (tmp_path / "r" / "images").exists()
    assert [h for h in page_links(index) if not (index.parent / h).is_file()] == []
    assert (
        build_report(tiny_run, tmp_path / "r", images="link", plots=False, n_resamples=50) == index
    )


def test_not_a_run(tmp_path):
    with pytest.raises(RunStoreError, match="not a medibench run"):
        build_report(tmp_path / "nothing", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_judges_answers_reach_the_sample_browser(judged_report):
    """A run judged by the real ``medibench judge`` (three judge protocols, two passes): each
    judged output lists its judges, each answer its status, scores, prompt and rationale."""
    blob = blob_of(judged_report)
    metric = {(p, m): i for i, (p, m, _) in enumerate(blob["metrics"])}
    runs = {s["id"]: s["runs"][0] for s in blob["samples"]}
    judged = {sid: {g["judge"]: g for g in r["judge"]} for sid, r in runs.items()}
    assert [g["judge"] for g in runs["s00"]["judge"]] == sorted(JUDGES)
    for g in (*judged["s00"].values(), *judged["s01"].values()):
        assert g["judge_model"] == "judge-x" and len(g["passes"]) == 2
        assert g["endpoint"].startswith("http://127.0.0.1:")

    def answers(sid, judge):  # each rationale as the page shows it
        return [_shown(blob["answers"][i]) for i in judged[sid][judge]["passes"]]

    # MedEBench: step 1 is the rationale; EA fills ea with the mean of the passes / 10.
    first, second = answers("s00", "medebench-judge@paper-structure")
    assert first == {
        "pass": 0,
        "status": "ok",
        "prompt_file": "medebench_paper_structure.md",
        "prompt_version": "paper-structure.1",
        "scores": {"editing_accuracy": 7.0, "contextual_preservation": 8.0, "visual_quality": 6.0},
        "problems": {},
        "rationale": "Step 1. ORIGINAL's bright lesion is gone in EDITED; REFERENCE agrees.",
        "answer": JUDGE_ANSWERS[("medebench", "a", 0)],
    }
    assert second["pass"] == 1 and second["scores"]["editing_accuracy"] == 5.0
    assert second["rationale"] == "Step 1. A faint rim of the lesion is left in EDITED."
    ea, vq = metric[("medebench@paper", "ea")], metric[("medebench@paper", "vq")]
    medebench = blob["judges"]["medebench-judge@paper-structure"]
    assert medebench["fills"] == [["editing_accuracy", ea, 10.0], ["visual_quality", vq, 10.0]]
    assert medebench["fields"] == [
        ["editing_accuracy", "Editing Accuracy", 10, "number"],
        ["contextual_preservation", "Contextual Preservation", 10, "number"],
        ["visual_quality", "Visual Quality", 10, "number"],
    ]
    assert runs["s00"]["v"][ea] == pytest.approx(0.6) and runs["s00"]["v"][vq] == 0.6
    # A refusal: no score, its reason per field, the refusal is the rationale.
    refused = answers("s01", "medebench-judge@paper-structure")
    assert [a["status"] for a in refused] == ["refused", "refused"]
    assert refused[0]["rationale"] == "I'm sorry, I cannot evaluate medical images."
    assert refused[0]["scores"] == {}
    assert sorted(refused[0]["problems"]) == sorted(f[0] for f in medebench["fields"])
    assert refused[0]["problems"]["editing_accuracy"].startswith("refused: the judge declined")
    assert runs["s01"]["v"][ea] is None
    # The rubric answers in JSON: its reason is the rationale, whole (3,000 letters too).
    rubric = answers("s00", "miedb-rubric@1")
    assert [a["rationale"] for a in rubric] == [
        "Half of the lesion is left </script><b>bold</b>",
        "Half of the lesion is left.",
    ]
    assert [a["prompt_version"] for a in rubric] == ["1", "1"]
    rubric_metric = metric[("miedb@1", "rubric")]
    assert runs["s00"]["v"][rubric_metric] == 50.0
    assert blob["judges"]["miedb-rubric@1"]["fills"] == [["rubric", rubric_metric, 1.0]]
    assert answers("s01", "miedb-rubric@1")[0]["rationale"] == "x" * 3000
    # MedGEN's checklist gives scores only: no rationale; the checklist items fill no metric.
    medgen = answers("s00", "medgen-checklist@1")
    assert [a["rationale"] for a in medgen] == ["", ""]
    assert medgen[0]["scores"]["overall"] == 7.0 and medgen[0]["scores"]["no_new_artifacts"] == 0
    fills = blob["judges"]["medgen-checklist@1"]["fills"]
    assert [f[0] for f in fills] == [
        "anatomical_accuracy", "clinical_finding_accuracy", "instruction_compliance",
        "cross_modal_consistency", "hallucination_control", "overall",
    ]  # fmt: skip
    assert runs["s00"]["v"][metric[("medgen@code", "overall")]] == 7.0
    # Every answer is held once (2 samples x 3 judges x 2 passes), each rationale here as a
    # slice of it; no answer ends the page's script.
    assert len(blob["answers"]) == 12
    assert all(isinstance(a["rationale"], list) for a in blob["answers"].values() if a["rationale"])
    assert "</script><b>bold" not in judged_report.read_text()


def test_a_run_never_judged_has_no_judge_data(report):
    blob = blob_of(report)
    assert blob["judges"] == {} and blob["answers"] == {}
    assert all(r["judge"] == [] for s in blob["samples"] for r in s["runs"])


def _shown(answer: dict) -> dict:
    """``answer`` with its rationale as the page shows it (``[start, end]``: a slice of the
    whole answer, in UTF-16 code units, as JavaScript slices)."""
    why = answer["rationale"]
    if isinstance(why, list):
        units = answer["answer"].encode("utf-16-le")
        why = units[2 * why[0] : 2 * why[1]].decode("utf-16-le")
    return {**answer, "rationale": why}
