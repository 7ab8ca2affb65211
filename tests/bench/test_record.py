"""bench/_record.py: a bench run kept with its machine and load, runs appended."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("bench_record", ROOT / "bench" / "_record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runs_are_appended_with_machine_load_and_settings(tmp_path, monkeypatch):
    record = _load()
    monkeypatch.setattr(record, "RESULTS", tmp_path / "results")
    path = record.record("demo", {"per_s": 84}, load_before=0.5, settings={"n": 8})
    record.record("demo", {"per_s": 28.25})
    data = json.loads(path.read_text())
    assert path == tmp_path / "results" / "demo.json"
    assert data["script"] == "bench/demo.py"
    assert [r["figures"] for r in data["runs"]] == [{"per_s": 84.0}, {"per_s": 28.25}]
    first = data["runs"][0]
    assert first["settings"] == {"n": 8} and first["load_average"][0] == 0.5
    assert first["machine"]["cores"] == os.cpu_count()
    assert first["machine"]["cpu"] and first["machine"]["python"].count(".") == 2
    assert not (tmp_path / "results" / "demo.tmp").exists()
