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


def _bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_generate", BENCH)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_generate", module)  # the run's factory spec imports it
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_smoke_version_runs_all_three_modes(capsys, monkeypatch):
    module = _bench(monkeypatch)
    results = module.main(["--smoke", "--images", "2", "--batch", "2", "--steps", "1"])
    out = capsys.readouterr().out
    assert set(results) == {"ip2p", "flux-kontext", "qwen-image-edit"}
    for r in results.values():
        assert r["size"] == 64
        assert all(r[mode] > 0 and math.isfinite(r[mode]) for mode in ("a", "b", "c"))
    assert out.count("(c)/(b)") == 3
    assert not module._WARM  # the pipelines are released after each model


@pytest.mark.slow
def test_qwen_adapter_edits_a_batch_in_one_pipeline_call(monkeypatch):
    import numpy as np
    import torch

    module = _bench(monkeypatch)
    with module._small_qwen(True):
        pipe = module.build("qwen-image-edit", tiny=True, device="cpu", dtype=torch.float32)
        module._WARM["qwen-image-edit"] = pipe
        model = module.warm_adapter("qwen-image-edit", steps=2, batch_size=2)
        calls = []
        real = type(pipe).__call__

        def counted(self, *args, **kwargs):
            calls.append(kwargs["negative_prompt"])
            return real(self, *args, **kwargs)

        monkeypatch.setattr(type(pipe), "__call__", counted)
        rng = np.random.default_rng(0)
        images = [rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(2)]
        texts = ["remove the lesion", "add a tumor"]
        batch = model.edit_batch(images, texts, seeds=[0, 1])
        single = [model.edit(im, t, seed=s) for im, t, s in zip(images, texts, [0, 1], strict=True)]
        module._WARM.clear()
    assert calls[0] == [" ", " "] and calls[1:] == [[" "], [" "]]  # one call for the batch
    for b, s in zip(batch, single, strict=True):
        assert b.shape == s.shape == (64, 64, 3)
        # padding the shorter prompt moves a random tiny model's output by a few grey levels
        assert np.abs(b.astype(int) - s.astype(int)).max() <= 8
