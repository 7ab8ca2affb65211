"""docs/models.md's conformance table is the one the tests' cells render."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    path = ROOT / "docs" / "models_matrix.py"
    spec = importlib.util.spec_from_file_location("models_matrix", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_conformance_table_is_the_one_the_cells_render():
    script = _script()
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    assert script.current(text) == script.render(), "run: python docs/models_matrix.py --write"


def test_a_stale_table_is_found():
    script = _script()
    stale = script.render().replace("| yes |", "| no |", 1)
    assert script.current(f"intro\n{stale}\nmore") == stale != script.render()
    assert "| SmolVLM" in script.render() and "needs torchvision" in script.render()
