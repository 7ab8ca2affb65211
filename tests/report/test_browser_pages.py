"""The sample browser's pages: ``index.html`` holds a compact index of every sample and page 1;
the other pages' details are data files beside it (``samples/page-NNNN.js``), so the page grows
with the samples only by the index."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from medibench.report._browser import PAGE_SIZE, browser_pages, default_order
from medibench.report._html import PAGES_DIR, remove_pages, write_html, write_page
from tests.report.helpers import browser_data, page_files

METRICS = [["native@1", "ssim", False], ["native@1", "mse", True]]


def _run(value: list, failed: bool = False) -> dict:
    return {"k": 0, "output": None, "diff": None, "status": "ok", "error": None,
            "error_short": None, "text": None, "v": value, "score_error": None, "notes": None,
            "failed": failed, "judge": [], "demos": []}  # fmt: skip


def _sample(i: int, runs: list, task: str = "remove-lesion", modality: str | None = "CT") -> dict:
    thumb = {"thumb": f"thumbs/s{i:05d}.jpg", "full": f"images/s{i:05d}.png"}
    return {"id": f"s{i:05d}", "task": task, "region": "brain", "modality": modality,
            "perspective": "modification", "instruction": f"Remove the lesion ({i:05d})",
            "reference": None, "description": None,
            "pics": {"input": thumb, "roi": None, "target": None}, "runs": runs}  # fmt: skip


def _blob(n: int) -> dict:
    """``n`` samples of two models; every tenth failed; values of one length (so page 1 has one
    size whatever ``n``)."""
    samples = [
        _sample(i, [_run([0.25 + 0.25 * (i % 3), 0.5]), _run([0.5, 0.75], failed=i % 10 == 3)])
        for i in range(n)
    ]
    return {"models": ["a", "b"], "metrics": METRICS, "samples": samples, "judges": {},
            "answers": {}, "demo_pool": None}  # fmt: skip


def test_the_default_order_is_worst_first_by_the_first_metric_failures_last():
    runs = [
        [_run([0.5, 1.0]), _run([0.9, 2.0])],  # worst ssim 0.5
        [_run([0.1, 1.0], failed=True), _run([0.9, 1.0])],  # failed
        [_run([0.2, 3.0]), _run([None, None])],  # 0.2
        [_run([None, None]), _run([None, None])],  # no value
        [_run([0.7, 1.0]), _run([0.3, 0.5])],  # 0.3
    ]
    samples = [_sample(i, r) for i, r in enumerate(runs)]
    assert default_order(samples, METRICS) == [2, 4, 0, 3, 1]
    lower = [["native@1", "ssim", True]]  # as if lower were better: the highest first
    assert default_order(samples, lower) == [0, 4, 2, 3, 1]
    assert default_order(samples, []) == [0, 2, 3, 4, 1]  # no metric: by position, failed last


def test_the_index_holds_codes_flags_and_values_and_the_pages_the_details():
    blob = _blob(5)
    blob["samples"][1]["task"], blob["samples"][2]["modality"] = "highlight-lesion", None
    head, pages = browser_pages(blob, page_size=2)
    ix = head["index"]
    assert ix["ids"] == ["s00000", "s00001", "s00002", "s00003", "s00004"]
    assert ix["tasks"] == ["highlight-lesion", "remove-lesion"] and ix["regions"] == ["brain"]
    assert ix["modalities"] == ["CT"]
    assert ix["codes"] == [[1, 0, 0], [0, 0, 0], [1, 0, None], [1, 0, 0], [1, 0, 0]]
    assert ix["failed"] == [[], [], [], [1], []]  # model b failed on s00003
    assert ix["values"][3] == [[0.25, 0.5], [0.5, 0.75]]
    # ssim worst over both models: 0.25, 0.5, 0.5, (failed), 0.5
    assert ix["order"] == [0, 1, 2, 4, 3]
    assert [[s["id"] for s in p["samples"]] for p in pages] == [
        ["s00000", "s00001"], ["s00002", "s00004"], ["s00003"]
    ]  # fmt: skip
    assert head["first"] == pages[0] and head["pages"] == 3 and head["page_size"] == 2
    assert "samples" not in head and "answers" not in head


def test_a_judged_answer_goes_to_the_page_of_the_output_it_judges():
    blob = _blob(3)
    blob["samples"][2]["runs"][0]["judge"] = [{"judge": "j@1", "passes": [7]}]
    blob["answers"] = {7: {"answer": "fine", "rationale": None}}
    _, pages = browser_pages(blob, page_size=1)
    # order by worst ssim: s0 (0.25), s1 (0.5), s2 (0.5)
    assert [p["answers"] for p in pages] == [{}, {}, {7: {"answer": "fine", "rationale": None}}]


def _report(out: Path, n: int) -> Path:
    head, pages = browser_pages(_blob(n))
    for number, page in enumerate(pages, start=1):
        write_page(out / PAGES_DIR, number, page)
    remove_pages(out / PAGES_DIR, len(pages))
    return write_html(
        out, run_dir=out, meta={}, sections=[], head=head,
        settings={"thumb_size": 96, "images": "copy"},
        counts={"samples": n, "models": 2, "predictions": 2 * n, "scores": 2 * n},
        build_seconds=1.0,
    )  # fmt: skip


def _index_json(index: Path) -> int:
    head = json.loads(re.search(r'id="report-data">(.*?)</script>', index.read_text()).group(1))
    return len(json.dumps(head["index"], separators=(",", ":")))


def test_the_page_grows_with_the_samples_only_by_their_index(tmp_path):
    small, large = _report(tmp_path / "small", 100), _report(tmp_path / "large", 1000)
    assert [len(page_files(p)) for p in (small, large)] == [3, math.ceil(1000 / PAGE_SIZE)]
    grown = large.stat().st_size - small.stat().st_size
    index_grown = _index_json(large) - _index_json(small)
    # The rest (tables, page 1) is the same but for the counts in the header ("1000 samples").
    assert 0 <= grown - index_grown <= 16
    assert index_grown / 900 < 60  # bytes per sample in the index
    data = browser_data(large)
    assert [s["id"] for s in data["samples"]] == [f"s{i:05d}" for i in range(1000)]
    assert data["samples"] == _blob(1000)["samples"]


def test_a_rebuild_with_fewer_samples_removes_the_pages_beyond_them(tmp_path):
    _report(tmp_path, 1000)
    index = _report(tmp_path, 100)
    assert [p.name for p in page_files(index)] == ["page-0001.js", "page-0002.js", "page-0003.js"]
    assert len(browser_data(index)["samples"]) == 100
