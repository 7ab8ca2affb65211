"""docs/train.md's shell blocks, run in order on tiny stand-ins: the MieDB ablation, the
MedEBench fine-tuning comparison and an inpainting expert, end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("peft")
pytest.importorskip("accelerate")

ROOT = Path(__file__).resolve().parents[2]


def shell_blocks(path: Path) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.slow
def test_the_train_page_runs_end_to_end(tiny_ip2p, tmp_path):
    from medibench.runs import RunStore
    from tests.build.test_diffusers_inpaint import build_tiny_sd_inpaint

    build_tiny_sd_inpaint(tmp_path / "sd-inpaint")
    blocks = shell_blocks(ROOT / "docs" / "train.md")
    assert len(blocks) == 3
    env = {
        **os.environ,
        "IP2P": str(tiny_ip2p),
        "SD_INPAINT": str(tmp_path / "sd-inpaint"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "OMP_NUM_THREADS": "1",
    }
    shim = f'medibench() {{ "{sys.executable}" -m medibench "$@"; }}\nset -e\n'
    for block in blocks:
        done = subprocess.run(
            ["bash", "-c", shim + block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"{block}\n{done.stderr[-3000:]}"
    for run in ("perception", "modification", "transformation"):
        log = (tmp_path / f"runs/miedb-{run}-only/train.jsonl").read_text().splitlines()
        assert len(log) == 2
        with RunStore.open_existing(tmp_path / f"runs/miedb-{run}-only/eval/step-2") as store:
            assert len(store.samples()) == 3 and store.scores()
    assert (tmp_path / "runs/miedb-all/report/index.html").is_file()
    for run in ("medebench-base", "medebench-finetuned"):
        with RunStore.open_existing(tmp_path / "runs" / run) as store:
            assert all(p.status == "ok" for p in store.predictions())
    assert (tmp_path / "runs/lesion-expert/checkpoint-2/pytorch_lora_weights.safetensors").is_file()
