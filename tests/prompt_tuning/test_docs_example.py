"""The prompt-tuning shell block of docs/calibration.md, run as written (offline), and the
numbers its table states."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "calibration.md"
SECTION = "## Few-shot prompt tuning"


def doc_commands() -> list[str]:
    text = DOC.read_text()
    section = text[text.index(SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def doc_table() -> dict[str, tuple[float, float]]:
    text = DOC.read_text()
    part = text[text.index("### The example") :]
    rows = re.findall(
        r"^\| (in-domain|shifted)[^|]*\| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", part, re.M
    )
    return {name: (float(acc), float(ece)) for name, _, acc, ece in rows}


@pytest.mark.slow
def test_docs_example_runs_and_its_numbers_hold(tmp_path):
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "COLUMNS": "80"}
    for command in doc_commands():
        argv = shlex.split(command)
        if argv[0] == "medibench":
            argv = [sys.executable, "-m", "medibench", *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    scores = json.loads((tmp_path / "pt" / "probe" / "scores.json").read_text())
    table = doc_table()
    assert set(table) == {"in-domain", "shifted"}
    for name, (acc, ece) in table.items():
        assert round(scores["groups"][name]["accuracy"], 4) == acc
        assert round(scores["groups"][name]["ece"], 4) == ece
    assert (tmp_path / "pt" / "grid" / "tables" / "kendall.csv").is_file()
    assert "Prompt tuning grid" in (tmp_path / "pt" / "run" / "report" / "index.html").read_text()
