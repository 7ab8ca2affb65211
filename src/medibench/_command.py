"""A thin command's options as the settings it runs with: the commands whose options are a
settings dataclass's fields (``medibench run``, ``medibench train``, ``medibench calibration
train``) build it with one call, so each field is not named three times over."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["settings_from"]

T = TypeVar("T")


def settings_from(cls: type[T], options: Mapping[str, Any], /, **converted: Any) -> T:
    """The dataclass ``cls`` from a command's ``options`` (its parameters: ``dict(locals())``
    as the command's first statement): each field takes the option of its name, or the value in
    ``converted`` (an option renamed or parsed first); a field neither names keeps its default.
    """
    fields = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    given = {name: value for name, value in options.items() if name in fields}
    return cls(**{**given, **converted})
