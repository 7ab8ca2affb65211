"""``medibench CMD`` mounts only CMD: a listing command does not import the report, the judges
or scipy; ``--help`` and an unknown command still see every command."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys
sys.argv = ["medibench", *json.loads(sys.argv[1])]
from medibench.cli import main
try:
    main()
except SystemExit:
    pass
heavy = ["scipy.stats", "medibench.report", "medibench.judges", "torch", "medibench.cli.report"]
print("\\nLOADED=" + json.dumps([m for m in heavy if m in sys.modules]))
"""


def _probe(*argv: str) -> tuple[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(argv))],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    ).stdout
    text, _, loaded = out.rpartition("\nLOADED=")
    return text, json.loads(loaded)


def test_a_listing_command_imports_none_of_the_others_libraries():
    text, loaded = _probe("datasets")
    assert "medebench" in text and "paintbench" in text
    assert loaded == []


def test_help_lists_every_command():
    from medibench.cli import _COMMANDS

    text, loaded = _probe("--help")
    for name in ("run", "score", "judge", "report", "calibration", "edit", "train", "medgen"):
        assert name in text
    assert set(_COMMANDS) >= {"run", "score", "judge", "report"}
    assert "medibench.cli.report" in loaded  # every command mounted


def test_the_script_entry_point_is_main():
    from pathlib import Path

    import tomllib

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    scripts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["medibench"] == "medibench.cli:main"  # mounts only the command it runs
