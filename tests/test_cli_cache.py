"""The tests' memo of CliRunner's click command (tests/_cli_cache.py): built once for an app as
it stands, built again when the app changes."""

from __future__ import annotations

import typer
import typer.testing
from typer.testing import CliRunner

from tests._cli_cache import fingerprint, install


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def hello(name: str = "x") -> None:
        print(f"hello {name}")

    @app.command()
    def bye() -> None:
        print("bye")

    return app


def test_an_unchanged_app_is_converted_once_and_a_changed_one_again(monkeypatch):
    built = []

    def counting(app):
        built.append(app)
        return typer.main.get_command(app)

    monkeypatch.setattr(typer.testing, "_get_command", counting)
    install()
    app, runner = _app(), CliRunner()
    assert runner.invoke(app, ["hello", "--name", "a"]).output == "hello a\n"
    assert runner.invoke(app, ["hello", "--name", "b"]).output == "hello b\n"
    assert len(built) == 1

    @app.command()
    def later() -> None:
        print("later")

    assert runner.invoke(app, ["later"]).output == "later\n"
    assert len(built) == 2
    sub = typer.Typer()
    sub.command()(lambda: print("sub"))
    sub.command("two")(lambda: print("two"))
    app.add_typer(sub, name="grp")
    assert runner.invoke(app, ["grp", "two"]).output == "two\n"
    assert len(built) == 3

    def hello() -> None:  # the same command's name, another function
        print("swapped")

    app.registered_commands[0].callback = hello
    assert runner.invoke(app, ["hello"]).output == "swapped\n"
    assert len(built) == 4
    other = _app()  # a second app of the same shape is its own command
    assert runner.invoke(other, ["bye"]).output == "bye\n" and len(built) == 5


def test_the_fingerprint_sees_a_group_changed_inside():
    app, sub = _app(), typer.Typer()
    sub.command("a")(lambda: None)
    app.add_typer(sub, name="grp")
    before = fingerprint(app)
    sub.command("b")(lambda: None)
    assert fingerprint(app) != before
