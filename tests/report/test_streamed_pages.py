"""The report of a large run is built page by page from the store (report/_pages.py): its
index, its pages and its judges equal what the whole-blob path makes of the same run
(``sample_browser_data`` then ``browser_pages``, the reference kept in report/_browser.py), and
the per-sample values held as columns equal the dicts of ``per_sample_values``."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from medibench.analysis._store import attach_attention, read_attention
from medibench.protocols import Aggregation
from medibench.protocols._values import ValueColumns, per_sample_values
from medibench.report import _build, _pages, build_report
from medibench.report._browser import (
    attach_demonstrations,
    browser_pages,
    image_jobs,
    read_judgements,
    sample_browser_data,
    shown_predictions,
)
from medibench.report._images import render_all
from medibench.runs import RunStore
from medibench.runs._demos import read_demonstrations
from medibench.samples import Sample, Score
from tests.report.helpers import browser_data, page_files


def _reference(run_dir: Path, out: Path, page_size: int = 48) -> tuple[dict, list]:
    """The head and pages the whole-blob path makes of ``run_dir`` (pictures into ``out``)."""
    with RunStore.open_existing(run_dir) as store:
        samples, predictions = store.samples(), store.predictions()
        scores, judgements = store.scores(), read_judgements(store.connection)
        attention, demos = read_attention(store.connection), read_demonstrations(store)
    models = sorted({p.model for p in predictions} | {s.model or "" for s in scores})
    from medibench.protocols import load_protocol

    metrics = []
    for name, version in sorted({(s.protocol, s.protocol_version) for s in scores}):
        proto = load_protocol(f"{name}@{version}")
        lower = proto.aggregation.lower_is_better
        metrics += [(f"{name}@{version}", m, m in lower) for m in proto.metric_names]
    shown = shown_predictions(predictions, models)
    pictures = render_all(image_jobs(samples, models, shown, run_dir), out)
    blob = sample_browser_data(
        samples, models, shown, pictures, scores, metrics, judgements, run_dir
    )
    attach_attention(blob, attention, run_dir, out)
    attach_demonstrations(blob, demos)
    blob["demo_pool"] = None
    return browser_pages(blob, page_size)


def _built(index: Path) -> tuple[dict, list]:
    head = json.loads(re.search(r'id="report-data">(.*?)</script>', index.read_text(), re.S)[1])
    pages = [
        json.loads(re.fullmatch(rf"window\.medibenchPages\[{n}\]=(.*);\n", p.read_text())[1])
        for n, p in enumerate(page_files(index), start=1)
    ]
    return head, pages


def _as_json(value):
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("page_size", [4, 48])
def test_the_streamed_browser_equals_the_whole_blob_path(
    tiny_run, tmp_path, monkeypatch, page_size
):
    monkeypatch.setattr(_pages, "PAGE_SIZE", page_size)
    monkeypatch.setattr(_build, "PAGE_SIZE", page_size)
    monkeypatch.setattr("medibench.report._browser.PAGE_SIZE", page_size)
    index = build_report(tiny_run, tmp_path / "built", plots=False, workers=1)
    head, pages = _built(index)
    want_head, want_pages = _reference(tiny_run, tmp_path / "reference", page_size)
    assert len(pages) == math.ceil(9 / page_size) == head["pages"]
    assert head["index"] == _as_json(want_head["index"])
    assert pages == _as_json(want_pages)
    assert head["first"] == pages[0]
    assert head["judges"] == _as_json(want_head["judges"]) == {}


def test_a_judged_run_streams_the_same_judges_and_answers(judged_report, tmp_path):
    head, pages = _built(judged_report)
    want_head, want_pages = _reference(judged_report.parent.parent / "run", tmp_path)
    assert head["judges"] == _as_json(want_head["judges"]) and head["judges"]
    assert head["index"] == _as_json(want_head["index"])
    assert pages == _as_json(want_pages)
    assert any(p["answers"] for p in pages)


def test_the_streamed_browser_names_failures_like_the_whole_blob(tmp_path):
    from tests.report.helpers import make_run

    run_dir = make_run(tmp_path / "run", n=6)
    with RunStore(run_dir) as store:  # a failed output and a sample with no output at all
        p = store.predictions("classical")[1]
        store.put_prediction(p.model_copy(update={"status": "error", "error": "ValueError: x"}))
        store.connection.execute(
            "DELETE FROM predictions WHERE model = 'identity' AND sample_id = 's04'"
        )
        store.connection.execute("DELETE FROM scores WHERE sample_id = 's04'")
    head, pages = _built(build_report(run_dir, tmp_path / "built", plots=False, workers=1))
    want_head, want_pages = _reference(run_dir, tmp_path / "reference")
    assert head["index"] == _as_json(want_head["index"])
    assert pages == _as_json(want_pages)
    # models in name order: classical, identity
    assert head["index"]["failed"] == [[], [0], [], [], [1], []]
    runs = {s["id"]: s["runs"] for s in browser_data(tmp_path / "built" / "index.html")["samples"]}
    assert [(r["status"], r["error"]) for r in runs["s01"]] == [
        ("error", "ValueError: x"),
        ("ok", None),
    ]
    assert [r["status"] for r in runs["s04"]] == ["ok", "none"]


def _score(sid: str, k: int, values: dict, status: str = "ok") -> Score:
    return Score(
        sample_id=sid, model="m", k=k, protocol="p", protocol_version="1", metrics=values,
        status=status,
    )  # fmt: skip


def test_per_sample_values_as_columns_by_hand():
    samples = {
        f"s{i}": Sample(
            sample_id=f"s{i}", benchmark="b", input="x.png", instruction="do",
            perspective=("perception", "modification")[i % 2],
        )
        for i in range(7)
    }  # fmt: skip
    records = {
        "s0": [_score("s0", 0, {"a": 0.2, "b": 3.0}), _score("s0", 1, {"a": 0.9, "b": None})],
        "s1": [_score("s1", 0, {"a": None, "b": 7.0})],  # b capped at 4
        "s2": [_score("s2", 0, {"a": 0.4, "b": 9.0}, status="error")],  # no output
        "s3": [_score("s3", 0, {"a": math.inf, "b": 2.0})],
        "s5": [_score("s5", 2, {"a": 0.1, "b": 0.25}), _score("s5", 0, {"a": 0.7, "b": 0.5})],
        "s6": [],  # no output
    }
    agg = Aggregation(
        missing="skip", lower_is_better=("b",), caps=(("b", 4.0),),
        pass_rates=(("a_ok", "a", 0.5), ("b_ok", "b", 1.0)),
    )  # fmt: skip
    none = (False, {"a": None, "b": None, "a_ok": None, "b_ok": None})
    want = {  # (a, b, a >= 0.5, b <= 1) per sample and k reduction
        "first": {"s0": (0.2, 3.0, 0.0, 0.0), "s5": (0.7, 0.5, 1.0, 1.0)},
        "best": {"s0": (0.9, 3.0, 1.0, 0.0), "s5": (0.7, 0.25, 1.0, 1.0)},
        "mean": {"s0": (0.55, 3.0, 1.0, 0.0), "s5": (0.4, 0.375, 0.0, 1.0)},
    }
    for how, rows in want.items():
        got = per_sample_values(records, samples, agg, how, ["a", "b"])
        assert isinstance(got, ValueColumns) and list(got) == ["s0", "s1", "s2", "s3", "s5", "s6"]
        table = {sid: (has, dict(vals)) for sid, (has, vals) in got.items()}
        for sid, (a, b, a_ok, b_ok) in rows.items():
            assert table[sid][0] and table[sid][1] == pytest.approx(
                {"a": a, "b": b, "a_ok": a_ok, "b_ok": b_ok}
            )
        assert table["s1"] == (True, {"a": None, "b": 4.0, "a_ok": None, "b_ok": 0.0})
        assert table["s3"] == (True, {"a": math.inf, "b": 2.0, "a_ok": 1.0, "b_ok": 0.0})
        assert table["s2"] == table["s6"] == none
    # missing = zero: a sample without an output counts 0 for what its perspective has
    zero = per_sample_values(records, samples, replace(agg, missing="zero"), "first", ["a", "b"])
    assert dict(zero["s2"][1]) == {"a": 0.0, "b": 0.0, "a_ok": 0.0, "b_ok": 1.0}
    assert zero["s2"][0] is False and zero["s0"][1].get("nope") is None and "s4" not in zero


def test_value_columns_refuse_a_sample_twice_and_hold_each_name_once():
    cols = ValueColumns(["a", "b", "a"])
    cols.append("s0", True, {"a": 1.5})
    assert cols.names == ("a", "b") and dict(cols["s0"][1]) == {"a": 1.5, "b": None}
    with pytest.raises(ValueError, match="sample 's0' is already in the columns"):
        cols.append("s0", False, {})


def test_a_model_named_like_the_pages_data_marker_is_shown_as_itself(tiny_run, tmp_path):
    import shutil

    from medibench.report._html import _BLOB

    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir)
    with RunStore(run_dir) as store:
        for table in ("predictions", "scores"):
            store.connection.execute(
                f"UPDATE {table} SET model = ? WHERE model = 'identity'", (_BLOB,)
            )
    head, pages = _built(build_report(run_dir, tmp_path / "built", plots=False, workers=1))
    assert head["models"] == sorted(["classical", _BLOB])
    assert len(head["index"]["ids"]) == 9 and len(pages[0]["samples"]) == 9
