"""The click command of a Typer app, built once per app as it stands (the tests' harness only).

``typer.testing.CliRunner.invoke(app, ...)`` turns the Typer app into a click command on every
call: with every medibench command mounted that is about 0.15 s of CPU (each command's signature
read, its annotations evaluated), paid by every in-process CLI invocation of the suite (5% of the
suite's sampled CPU, py-spy over a whole `make test`). :func:`install` makes that conversion
return the command built before for an app whose commands, groups and callbacks are the same
objects as then: a test that registers a command, mounts a group or swaps a callback gets a
freshly built command, as before. A click command holds no state between invocations (each gets
its own context)."""

from __future__ import annotations

from typing import Any

_BUILT: dict[int, tuple[Any, Any, Any]] = {}


def fingerprint(app: Any) -> tuple:
    """What the conversion reads from ``app`` and its groups: the registered commands (name,
    help, and by identity the callback and the info object), the groups (name, help, their own
    fingerprint), the callbacks and the settings it copies onto the command."""
    commands = tuple((c.name, c.help, id(c.callback), id(c)) for c in app.registered_commands)
    groups = tuple((g.name, g.help, id(g), fingerprint(g.typer_instance))
                   for g in app.registered_groups)  # fmt: skip
    callback = app.registered_callback
    settings = (app.info.name, app.info.help, app._add_completion, app.rich_markup_mode,
                app.pretty_exceptions_short)  # fmt: skip
    return (commands, groups, id(callback), id(callback and callback.callback),
            id(app.info.callback), settings)  # fmt: skip


def install() -> None:
    """Memoise ``typer.testing``'s conversion (``typer.main.get_command``) per app and
    :func:`fingerprint`."""
    import typer.testing

    build = typer.testing._get_command
    if getattr(build, "memoised", False):
        return

    def get_command(app: Any) -> Any:
        key = fingerprint(app)
        seen = _BUILT.get(id(app))
        if seen is None or seen[0] is not app or seen[1] != key:
            seen = _BUILT[id(app)] = (app, key, build(app))
        return seen[2]

    get_command.memoised = True  # type: ignore[attr-defined]
    typer.testing._get_command = get_command
