"""Every "install the extra" message names an extra that exists and provides what it says is
missing, and reaches the user whole: ``pip install 'medibench[hf]'``, not ``'medibench'``."""

import ast
import re
import sys
from pathlib import Path

import tomllib
from typer.testing import CliRunner

from medibench.cli import app

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "medibench"
INSTALL = re.compile(r"pip install (-U |-e )?(\S+)")
HINT = re.compile(r"^'medibench\[([a-z-]+)\]'$")


def _extras() -> dict[str, set[str]]:
    """Extra name -> the distribution names it installs (lower case, no version)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {
        name: {re.split(r"[<>=\[ ;]", req, maxsplit=1)[0].lower() for req in reqs}
        for name, reqs in meta["optional-dependencies"].items()
    }


def _messages() -> list[tuple[str, int, str]]:
    """(file, line, text) of every string literal in the source that says ``pip install``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            parts = node.values if isinstance(node, ast.JoinedStr) else [node]
            text = "".join(p.value for p in parts if isinstance(getattr(p, "value", 0), str))
            if "pip install" in text:
                found.append((str(path.relative_to(ROOT)), node.lineno, text))
    return found


def test_every_install_hint_names_an_extra_that_provides_the_missing_package():
    extras = _extras()
    provided = set().union(*(extras[e] for e in extras if e != "dev"))
    messages = _messages()
    hints = 0
    for where, line, text in messages:
        for flag, target in INSTALL.findall(text):
            target = target.rstrip(").,;`")
            if flag == "-U ":  # an upgrade of what is installed (diffusers too old)
                continue
            match = HINT.match(target)
            if "medibench" in target:
                assert match and match[1] in extras, f"{where}:{line}: {target!r} in {text!r}"
                named = {w.lower() for w in re.findall(r"[\w-]+", text.split("pip install")[0])}
                wrong = (named & provided) - extras[match[1]]
                assert not wrong, f"{where}:{line}: {sorted(wrong)} not in [{match[1]}]: {text!r}"
                hints += 1
            else:  # a package no extra provides (radgraph, EasyEdit) is installed by its name
                assert target.lower() not in provided, f"{where}:{line}: name the extra: {text!r}"
    assert hints >= 15, messages  # the hints listed when this test was written


def test_a_missing_extra_reaches_the_terminal_with_its_name(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails: extra missing
    res = CliRunner().invoke(app, ["download", "medgen", "--out", str(tmp_path / "m")])
    assert res.exit_code == 2
    assert "medibench download needs the hf extra: pip install 'medibench[hf]'" in res.output
