"""``python -m medibench.knowledge_edit.tiny_llava``, the tiny LLaVA the docs build, runs from
any folder (it once lived under tests/ and ran only from the repository root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from medibench.knowledge_edit import synthetic_taskset

SRC = Path(__file__).resolve().parents[2] / "src"


def _run(code_or_module: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}  # medibench as installed
    return subprocess.run(
        [sys.executable, *code_or_module], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_the_tiny_llava_builds_from_any_folder(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    synthetic_taskset(tmp_path / "tasks", 1, seed=0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = _run(
        ["-m", "medibench.knowledge_edit.tiny_llava", "../tasks", "tiny", "--epochs", "1"],
        cwd=elsewhere,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("tiny LLaVA -> tiny (right on ")
    assert (elsewhere / "tiny" / "config.json").is_file()
    assert (elsewhere / "tiny" / "tokenizer.json").is_file()


def test_without_torch_it_names_the_extra_to_install(tmp_path):
    # torch made unimportable in the child, as where the extra is not installed
    code = (
        "import runpy, sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in ('torch', 'transformers'):\n"
        "            raise ImportError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "sys.argv = ['tiny_llava', 'tasks', 'out']\n"
        "runpy.run_module('medibench.knowledge_edit.tiny_llava', run_name='__main__')\n"
    )
    res = _run(["-c", code], cwd=tmp_path)
    assert res.returncode == 1
    assert "the tiny LLaVA needs torch and transformers: pip install 'medibench[torch]'" in (
        res.stderr
    )
    assert not (tmp_path / "out").exists()
