"""The docs and the command line agree: every option docs/cli.md lists is an option of some
command; every `medibench ...` command line of README.md and docs/ (shell blocks and inline
code) and every hint in the code that names one gives options its command has (a group with an
option and no sub-command is an error too: "medibench build --inpainter" was one)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer

from medibench.cli import app
from medibench.cli._aliases import RENAMED
from tests.test_cli_vocabulary import VOCABULARY

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]*medibench [^`\n]*)`")
_COMMAND = re.compile(r"(?<![\w/.-])medibench ")
_OPTION = re.compile(r"--[a-z][a-z0-9-]*(=.*)?")
_STOP = {"|", "||", "&&", ";", ">", ">>", "2>&1", "then", "do", "done"}
#: what may stand before a command in a shell line: the line's start, or a shell separator
_SHELL_BEFORE = (";", "&&", "|", "(", "do", "then", "$")


def _tree() -> dict[str, set[str] | None]:
    """Command path -> its option names (old spellings included), ``None`` for a group."""
    out: dict[str, set[str] | None] = {}

    def walk(cmd, path: list[str]) -> None:
        key = " ".join(path)
        if hasattr(cmd, "commands"):
            out[key] = None
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
            return
        names = {"--help", *RENAMED.get(key, {})}
        for p in cmd.params:
            if p.param_type_name == "option":
                names.update(n for n in (*p.opts, *p.secondary_opts) if n.startswith("--"))
        out[key] = names

    root = typer.main.get_command(app)
    walk(root, [])
    out[""] = {n for p in root.params for n in p.opts if n.startswith("--")}  # --version
    return out


TREE = _tree()


def problems(text: str, *, in_shell: bool) -> list[str]:
    """``medibench <command> --option`` uses in ``text`` (one line) whose option the command
    lacks. ``in_shell``: only a command at the line's start or after a shell separator (a
    docs block's prose lines name commands mid-sentence without running them)."""
    found = []
    for m in _COMMAND.finditer(text):
        before = text[: m.start()].rstrip()
        if in_shell and before and not before.endswith(_SHELL_BEFORE):
            continue
        tokens = text[m.end() :].split()
        path: list[str] = []
        while len(path) < len(tokens) and " ".join([*path, tokens[len(path)]]) in TREE:
            path.append(tokens[len(path)])
        if not path:
            continue
        command = " ".join(path)
        options = TREE[command]
        for token in tokens[len(path) :]:
            if token in _STOP or token.startswith(("#", ">")):
                break
            name = token.strip("[]()`'\",.:;")
            if _OPTION.fullmatch(name):
                name = name.split("=")[0]
                if options is None:
                    found.append(f"medibench {command} is a group: {name} needs a sub-command")
                elif name not in options:
                    found.append(f"medibench {command} has no option {name}")
            elif options is None:
                break
            if token.endswith((")", ",", "`", ";", ".")) and not token.endswith("..."):
                break  # the end of the command in a sentence
    return found


def _doc_lines(path: Path) -> list[tuple[str, bool]]:
    text = path.read_text(encoding="utf-8")
    lines = [(line, True) for block in _FENCE.findall(text)
             for line in block.replace("\\\n", " ").splitlines()]  # fmt: skip
    return lines + [(span, False) for span in _INLINE.findall(text)]


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", _docs(), ids=lambda p: p.name)
def test_every_documented_command_line_uses_options_its_command_has(path):
    bad = [f"{p}   <- {line.strip()[:100]}" for line, shell in _doc_lines(path)
           for p in problems(line, in_shell=shell)]  # fmt: skip
    assert not bad, "\n".join(bad)


def _strings(path: Path):
    """(line number, text line) of every string constant and f-string (placeholders as X)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        for line in text.splitlines():
            if "medibench " in line:
                yield node.lineno, line


def test_every_hint_in_the_code_names_options_its_command_has():
    bad = []
    for path in sorted((ROOT / "src" / "medibench").rglob("*.py")):
        for lineno, line in _strings(path):
            where = f"{path.relative_to(ROOT)}:{lineno}"
            bad += [f"{where}: {p}" for p in problems(line, in_shell=False)]
    assert not bad, "\n".join(bad)


def test_every_option_the_vocabulary_lists_is_an_option_of_a_command():
    declared = set().union(*(names for names in TREE.values() if names))
    assert sorted(VOCABULARY - declared) == []


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("medibench build --inpainter diffusers-inpaint:PATH",
         ["medibench build is a group: --inpainter needs a sub-command"]),
        ("medibench build modification --inpainter X --lora Y", []),
        ("medibench run --dataset suite --modle identity | tee log --nope",
         ["medibench run has no option --modle"]),
        ("the medibench run of checkpoint N on --eval-dataset", []),
        ("for r in a b; do medibench score --bogus=1; done",
         ["medibench score has no option --bogus"]),
        ("medibench analyze correlate SOURCE SOURCE... [--metric M] [--wrong N]",
         ["medibench analyze correlate has no option --wrong"]),
    ],
)  # fmt: skip
def test_the_checker_finds_what_it_should(line, found):
    assert problems(line, in_shell=True) == found
    assert problems("(run " + line + ")", in_shell=False) == (
        found if not line.startswith("the") else ["medibench run has no option --eval-dataset"]
    )
