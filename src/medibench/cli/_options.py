"""Typer option types that mean the same in several commands: one declaration, one help text.

A command writes ``progress: ProgressOption = True`` instead of repeating the ``Annotated``
declaration; options that only look alike but mean something else per command (``--seed``,
``--workers``, ``--executor``) stay declared where they are used.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = [
    "DownloadOption",
    "ModelOptionsOption",
    "ProgressOption",
    "ProtocolsOption",
    "RayAddressOption",
]

#: ``--download``: fetch an ``hf:OWNER/NAME`` dataset that is not in the local Hugging Face cache.
DownloadOption = Annotated[
    bool,
    typer.Option(
        help="fetch an hf:OWNER/NAME[@REVISION] dataset that is not in the local Hugging Face "
        "cache (offline first otherwise)"
    ),
]

#: ``--progress / --no-progress``: progress bars on stderr.
ProgressOption = Annotated[bool, typer.Option(help="show progress bars")]

#: ``--protocol``: the scoring protocols (none given: the dataset's default protocols).
ProtocolsOption = Annotated[
    list[str] | None,
    typer.Option(help="protocol name@version (repeatable; default: the dataset's)"),
]

#: ``--model-option key=value``: a setting given to every model (values read as YAML).
ModelOptionsOption = Annotated[
    list[str] | None,
    typer.Option(help="model option key=value (repeatable; given to each --model)"),
]

#: ``--ray-address``: the Ray cluster a ``--executor ray`` command joins.
RayAddressOption = Annotated[
    str | None,
    typer.Option(help="Ray cluster to join (ray start --head prints it); default: local"),
]
