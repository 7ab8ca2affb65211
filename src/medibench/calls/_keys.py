"""API keys: read from the environment only, registered for redaction as they are read."""

from __future__ import annotations

import os

from medibench.calls._redact import register_secret

__all__ = ["MissingAPIKeyError", "key_from_env"]


class MissingAPIKeyError(ValueError, RuntimeError):
    """An API key that is not set in the environment; the message names the variable.

    One class for every client (judges and image-editing models); it is both a ``ValueError``
    and a ``RuntimeError`` so that code catching either of the two older classes still works.
    """


def key_from_env(names: tuple[str, ...] | str, *, hint: str = "") -> str:
    """The first of the environment variables ``names`` that is set (registered as a secret).

    Raises:
        MissingAPIKeyError: none is set; the message names them all (and ``hint``).
    """
    names = (names,) if isinstance(names, str) else tuple(names)
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            register_secret(value)
            return value
    either = " or ".join(names)
    raise MissingAPIKeyError(f"set the API key in the environment variable {either}{hint}")
