"""The scripts of docs/ and bench/: none shadows a standard-library module for its siblings, and
each answers ``--help`` whatever the current folder.

A script run as ``python docs/x.py`` has docs/ first on ``sys.path``, so a docs/numbers.py once
made numpy's ``import numbers`` pick it up (``module 'numbers' has no attribute 'Number'``).
"""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = (ROOT / "docs", ROOT / "bench")
DOCS_SCRIPTS = sorted((ROOT / "docs").glob("*.py"))
# bench/_*.py are helpers the scripts import, not commands.
BENCH_SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # medibench as installed (src/ only): a script that needs the tests' stand-ins adds them itself
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_no_script_shadows_a_standard_module_for_its_siblings(folder):
    # Every standard name the folder could provide (a module, a package, an extension)...
    found = sorted(
        name
        for name in sys.stdlib_module_names
        if (spec := importlib.machinery.PathFinder.find_spec(name, [str(folder)])) is not None
        and spec.origin is not None  # a bare folder is a namespace portion: the stdlib wins
    )
    # ...must still import as the standard library's with the folder first on sys.path, as a
    # script there has it (docs/numbers.py hands over the real `numbers`; numpy needs it).
    code = (
        f"import sys; sys.path.insert(0, {str(folder)!r}); import numpy\n"
        f"for name in {found!r}:\n"
        "    module = __import__(name)\n"
        "    where = getattr(module, '__file__', None) or ''\n"
        f"    assert not where.startswith({str(folder)!r}), name\n"
        "import numbers; assert numbers.Number is not None\n"
    )
    res = _run(["-c", code], cwd=folder)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("cwd", ["root", "docs"])
@pytest.mark.parametrize("script", DOCS_SCRIPTS, ids=lambda p: p.name)
def test_each_docs_script_answers_help_from_the_root_and_from_docs(script, cwd):
    res = _run([str(script.relative_to(ROOT)) if cwd == "root" else script.name, "--help"],
               cwd=ROOT if cwd == "root" else ROOT / "docs")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage:")


def test_the_numbers_command_keeps_its_name_from_docs():
    res = _run(["numbers.py", "--list"], cwd=ROOT / "docs")
    assert res.returncode == 0, res.stderr
    assert "suite counts:" in res.stdout


@pytest.mark.parametrize("script", BENCH_SCRIPTS, ids=lambda p: p.name)
def test_each_bench_script_answers_help_from_bench(script):
    res = _run([script.name, "--help"], cwd=ROOT / "bench")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage:")
