"""bench/gpu_generate.py's CPU smoke version: the three modes run on tiny pipelines of the real
classes, and medibench's run writes one output per input."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("diffusers")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_generate.py"


@pytest.mark.slow
def test_smoke_version_runs_all_three_modes(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_generate", BENCH)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_generate", module)  # the run's factory spec imports it
    spec.loader.exec_module(module)
    results = module.main(["--smoke", "--images", "2", "--batch", "2", "--steps", "1"])
    out = capsys.readouterr().out
    assert set(results) == {"ip2p", "flux-kontext"}
    for r in results.values():
        assert r["size"] == 64
        assert all(r[mode] > 0 and math.isfinite(r[mode]) for mode in ("a", "b", "c"))
    assert "qwen-image-edit: skipped: QwenImageEditPipeline needs" in out
    assert "(c)/(b)" in out
    assert not module._WARM  # the pipelines are released after each model
