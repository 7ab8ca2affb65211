"""bench/gpu_generate.py's CPU smoke version: the three modes run on tiny pipelines of the real
classes, and medibench's run writes one output per input."""

from __future__ import annotations

import importlib.util
import json
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
def test_smoke_version_runs_all_three_modes(capsys, monkeypatch, tmp_path):
    module = _bench(monkeypatch)
    report = tmp_path / "gpu.json"
    argv = ["--smoke", "--images", "2", "--batch", "2", "--steps", "1", "--json", str(report)]
    results = module.main(argv)
    out = capsys.readouterr().out
    assert set(results) == {"ip2p", "flux-kontext", "qwen-image-edit"}
    for r in results.values():
        assert r["size"] == 64 and r["images"] == 2
        assert all(r[mode] > 0 and math.isfinite(r[mode]) for mode in ("a", "b", "c"))
        assert r["a_mem"] is r["b_mem"] is r["c_mem"] is None  # no GPU: no peak memory
        phases = ("a_build", "a_run", "b_build", "b_run", "c_warm", "c_run")
        assert all(r[f"{p}_s"] >= 0 for p in phases)
    assert out.count("(c)/(b)") == 3
    assert not module._WARM  # the pipelines are released after each model
    written = json.loads(report.read_text())  # strict JSON: no NaN for the missing memory
    assert written["device"] == "CPU smoke version" and written["compile"] == "none"
    assert written["results"] == results


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ip2p", "flux-kontext"])
def test_the_adapter_runs_at_the_working_size_of_the_loops(kind, monkeypatch, tmp_path):
    """(c) against (b) says something about the adapter only at the same working size: the
    ip2p adapter's default resolution is 512 and Kontext resizes its input to a preferred
    resolution of about 1 megapixel, so the smoke version sets both to the loops' 64x64."""
    import torch
    from PIL import Image

    module = _bench(monkeypatch)
    sys.path.insert(0, str(BENCH.parent))
    from runner import make_samples

    data = tmp_path / "data"
    samples = make_samples(data, 2, 64)
    images = [Image.open(s.input).convert("RGB") for s in samples]
    with module._small_pipelines(True):
        pipe = module.build(kind, tiny=True, device="cpu", dtype=torch.float32)
        seen: dict[str, list] = {"b": [], "c": []}
        real = pipe.vae.encode
        mode = ["b"]

        def encode(x, *args, **kwargs):
            seen[mode[0]].append(tuple(x.shape[-2:]))
            return real(x, *args, **kwargs)

        pipe.vae.encode = encode
        module.tuned_loop(pipe, kind, images, 1, 64, 2, tmp_path)
        mode[0] = "c"
        module._WARM[kind] = pipe
        try:
            module.medibench_run(kind, data, 1, 64, 2, tmp_path / "run", "float32")
        finally:
            module._WARM.clear()
    assert seen["b"] and set(seen["b"]) == set(seen["c"]) == {(64, 64)}
    assert len(list((tmp_path / "run").rglob("*.png"))) == 2


def test_pipelines_are_made_in_the_dtype_asked_for(monkeypatch):
    """Made in bfloat16 at once, not float32 then cast (112 GB for Qwen-Image-Edit's 28B
    parameters before the cast); the process's default dtype is left as it was."""
    import torch

    module = _bench(monkeypatch)
    pipe = module.build("ip2p", tiny=True, device="cpu", dtype=torch.bfloat16)
    dtypes = {p.dtype for m in (pipe.unet, pipe.vae, pipe.text_encoder) for p in m.parameters()}
    assert dtypes == {torch.bfloat16}
    assert torch.get_default_dtype() == torch.float32
    pipe.scheduler.set_timesteps(4)
    assert pipe.scheduler.sigmas.dtype == torch.float32  # the scheduler's own, as in float32


@pytest.mark.slow
def test_qwen_adapter_edits_a_batch_in_one_pipeline_call(monkeypatch):
    import numpy as np
    import torch

    module = _bench(monkeypatch)
    with module._small_pipelines(True):
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


def test_the_device_script_stops_at_once_without_its_wheels(tmp_path):
    """bench/gpu_device.sh spends device time: without the carried wheels it says what to run
    here and stops before it installs or imports anything."""
    import shutil
    import subprocess

    script = BENCH.parent / "gpu_device.sh"
    (tmp_path / "bench").mkdir()
    shutil.copy(script, tmp_path / "bench" / "gpu_device.sh")  # a checkout with no .whl
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(tmp_path / "bench" / "gpu_device.sh"), "ip2p"],
        env={"PATH": "/usr/bin:/bin", "OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "run bash bench/gpu_wheels.sh here and carry .whl" in done.stdout
    assert (out / "log.txt").read_text() == done.stdout
    for name in ("gpu_device.sh", "gpu_wheels.sh"):
        assert subprocess.run(["bash", "-n", str(BENCH.parent / name)]).returncode == 0


@pytest.mark.slow
def test_a_run_whose_outputs_failed_is_not_timed_as_a_fast_one(monkeypatch, tmp_path):
    import torch

    module = _bench(monkeypatch)
    sys.path.insert(0, str(BENCH.parent))
    from runner import make_samples

    data = tmp_path / "data"
    make_samples(data, 2, 64)
    pipe = module.build("ip2p", tiny=True, device="cpu", dtype=torch.float32)

    def broken(self, *args, **kwargs):
        raise ValueError("the GPU ran out of memory")

    monkeypatch.setattr(type(pipe), "__call__", broken)
    module._WARM["ip2p"] = pipe
    try:
        with pytest.raises(RuntimeError, match=r"made 0 of 2 outputs .*out of memory"):
            module.medibench_run("ip2p", data, 1, 64, 2, tmp_path / "run", "float32")
    finally:
        module._WARM.clear()
