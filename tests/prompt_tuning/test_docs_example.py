"""The numbers the table of docs/calibration.md's example states, from the commands of its
prompt-tuning shell block that make them, run as written (offline). The whole block (the grid
and its report too) runs in the docs-run test (tests/docs/test_docs_run.py)."""

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
    """The block's commands up to the first ``calibration score`` (the table's numbers)."""
    text = DOC.read_text()
    section = text[text.index(SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    last = next(i for i, line in enumerate(lines) if line.startswith("medibench calibration score"))
    return lines[: last + 1]


def doc_table() -> dict[str, tuple[tuple[float, float], tuple[float, float]]]:
    """Each row's accuracy and ECE as ``(lo, hi)``: a cell states a value, or the range
    ``lo-hi`` over ATen's CPU code paths."""
    text = DOC.read_text()
    part = text[text.index("### The example") :]
    cell = r"([\d.]+(?:-[\d.]+)?)"
    rows = re.findall(rf"^\| (in-domain|shifted)[^|]*\| (\d+) \| {cell} \| {cell} \|$", part, re.M)

    def span(text: str) -> tuple[float, float]:
        lo, _, hi = text.partition("-")
        return float(lo), float(hi or lo)

    return {name: (span(acc), span(ece)) for name, _, acc, ece in rows}


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
        for metric, (lo, hi) in (("accuracy", acc), ("ece", ece)):
            assert lo <= round(scores["groups"][name][metric], 4) <= hi, (name, metric)
