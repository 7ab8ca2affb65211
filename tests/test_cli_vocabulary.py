"""One CLI vocabulary: every option of every command is a name docs/cli.md lists; old spellings
work as hidden aliases with a note; help texts carry no hard line breaks inside a paragraph."""

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from medibench.cli import app
from medibench.cli._aliases import RENAMED, renamed_args
from medibench.cli._help import rewrap

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def _first_cells(title: str) -> set[str]:
    return set(re.findall(r"^\| `(--[a-z0-9-]+)`", _section(title), flags=re.M))


def _commands():
    """(command path, click command) of every leaf command."""

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), cmd

    return list(walk(typer.main.get_command(app), []))


def _options(cmd) -> list[tuple[str, bool]]:
    """(long name, hidden) of each option; ``--no-x`` of a flag counts as ``--x``."""
    out = []
    for p in cmd.params:
        if p.param_type_name != "option":
            continue
        for name in (*p.opts, *p.secondary_opts):
            if name.startswith("--"):
                base = name if name in p.opts else "--" + name.removeprefix("--no-")
                out.append((base, bool(p.hidden)))
    return out


VOCABULARY = _first_cells("Options")
OLD = _first_cells("Old spellings")
PENDING = _first_cells("Names still to be renamed")


def test_the_vocabulary_lists_the_core_names():
    assert {"--out", "--k", "--limit", "--resamples", "--csv", "--json"} <= VOCABULARY
    assert len(_commands()) >= 33  # the commands when this test was written


@pytest.mark.parametrize("path, cmd", _commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_option_is_in_the_vocabulary(path, cmd):
    for name, hidden in _options(cmd):
        if hidden:
            assert name in OLD, f"`medibench {path}` hides {name}: list it under old spellings"
        else:
            assert name in VOCABULARY | PENDING, f"`medibench {path}` {name} is not in {DOC.name}"
    assert "--samples" not in dict(_options(cmd)) and "--n-resamples" not in dict(_options(cmd))


@pytest.mark.parametrize("path, cmd", _commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_help_has_no_hard_line_breaks_inside_a_paragraph(path, cmd):
    text = cmd.help or ""
    assert text == rewrap(text), f"`medibench {path}` help is not rewrapped"
    for p in cmd.params:
        assert "\n" not in (getattr(p, "help", None) or ""), f"`medibench {path}` {p.name}"


@pytest.mark.parametrize(
    "option, commands, declared",
    [
        ("--k", ("run", "analyze attention"), (1, 1, "outputs per sample, each with its own seed")),
        (
            "--seed",
            ("run", "analyze attention"),
            (0, None, "run seed (per-item seeds derive from it)"),
        ),
        (
            "--limit",
            ("score", "analyze attention"),
            (None, 1, "only the first N samples of the dataset"),
        ),
        ("--executor", ("run", "edit sweep"), ("local", None, "local or ray")),
        (
            "--progress",
            ("run", "report", "score", "analyze attention"),
            (True, None, "show progress bars"),
        ),
    ],
)
def test_a_shared_option_is_the_same_in_each_command(option, commands, declared):
    # one declaration in cli/_options.py: default, lower bound and help alike everywhere
    found = dict(_commands())
    for command in commands:
        (param,) = [p for p in found[command].params if option in p.opts]
        assert (param.default, param.min, param.help) == declared, (command, option)


def test_every_old_spelling_is_documented_and_maps_into_the_vocabulary():
    commands = dict(_commands())
    for command, renames in RENAMED.items():
        declared = dict(_options(commands[command]))
        for old, new in renames.items():
            assert old in OLD and new in VOCABULARY, (command, old, new)
            assert new in declared and (old not in declared or old == "--out"), (command, old)


def test_renaming_keeps_values_and_what_follows_a_double_dash():
    args = ["--run=r", "--samples", "2", "--", "--run"]
    assert renamed_args("run", args) == ["--out=r", "--k", "2", "--", "--run"]
    assert renamed_args("score", ["--run", "x"]) == ["--run", "x"]  # not an alias there


def test_an_old_spelling_with_its_new_name_is_refused():
    with pytest.raises(typer.Exit) as exc:
        renamed_args("calibration grid", ["g.yaml", "--out", "a", "--run=b"])
    assert exc.value.exit_code == 2
    assert renamed_args("calibration grid", ["g.yaml", "--run", "b", "--", "--out"]) == [
        "g.yaml",
        "--out",
        "b",
        "--",
        "--out",
    ]


def test_rewrap_joins_paragraph_lines_and_keeps_lists():
    text = "First line\ncontinues here.\n\nSecond:\n- one\n- two\n  more"
    assert rewrap(text) == "First line continues here.\n\nSecond:\n- one\n- two\n  more"


def test_an_old_spelling_still_runs_with_a_deprecation_note(tmp_path):
    from tests.runs.conftest import make_native

    data = make_native(tmp_path / "data", n=1)
    args = ["run", "--dataset", f"native:{data}", "--model", "identity", "--no-progress"]
    res = CliRunner().invoke(app, [*args, "--run", str(tmp_path / "r"), "--samples", "2"])
    assert res.exit_code == 0, res.output
    assert "note: --run is deprecated in `medibench run`: use --out" in res.output
    assert "note: --samples is deprecated in `medibench run`: use --k" in res.output
    outputs = sorted(f.name for f in (tmp_path / "r" / "outputs").rglob("*.png"))
    assert len(outputs) == 2 and outputs[0].endswith("_0.png") and outputs[1].endswith("_1.png")


def test_version_and_the_three_kinds_of_protocols():
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and re.fullmatch(r"medibench \d+\.\d+\S*\n", res.output)
    res = CliRunner().invoke(app, ["protocols"])
    assert res.exit_code == 0
    for name in ("medebench@paper", "medebench-judge@paper-structure", "calibration@1"):
        assert name in res.output


def test_a_sub_apps_old_spelling_is_renamed_too(tmp_path):
    args = ["edit", "run", "--tasks", str(tmp_path / "none"), "--model", "x"]
    res = CliRunner().invoke(app, [*args, "--run", str(tmp_path / "r")])
    assert "note: --run is deprecated in `medibench edit run`: use --out" in res.output
    assert res.exit_code == 2 and "not an edit task set" in res.output  # --run was accepted
