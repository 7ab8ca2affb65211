"""A thin command's options as the settings it runs with: the commands whose options are a
settings dataclass's fields (``medibench run``, ``medibench train``, ``medibench calibration
train``) build it with one call, so each field is not named three times over."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["settings_from"]

T = TypeVar("T")


def settings_from(cls: type[T], given: Mapping[str, Any], /, **converted: Any) -> T:
    """The dataclass ``cls`` from the options a command was ``given`` (its parameters:
    ``dict(locals())`` as the command's first statement): each field takes the option of its
    name, or its value in ``converted`` (an option renamed or parsed first); a field that
    neither names keeps its default.

    >>> @dataclasses.dataclass
    ... class Settings:
    ...     out: str
    ...     seed: int = 0
    ...     losses: tuple[str, ...] = ()
    >>> settings_from(Settings, {"out": "o", "loss": ["ce"], "progress": True}, losses=("ce",))
    Settings(out='o', seed=0, losses=('ce',))
    """
    fields = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    options = {name: value for name, value in given.items() if name in fields}
    return cls(**{**options, **converted})
