"""``medibench models``, ``datasets`` and ``protocols``: what is registered."""

from __future__ import annotations

from rich.table import Table

from medibench.cli._app import console, list_registry


def models() -> None:
    """List the registered editing models and their options (--model-option key=value)."""
    from medibench.models import MODELS
    from medibench.models._spec import model_options

    table = Table(show_header=True)
    for col in ("model", "what it is", "options (default)"):
        table.add_column(col)
    for name in MODELS.names():
        try:
            opts = ", ".join(str(o) for o in model_options(MODELS.get(name)))
        except Exception as exc:  # a plug-in that cannot be imported
            opts = f"(cannot import: {exc})"
        table.add_row(name, MODELS.help(name), opts)
    console.print(table)


def datasets() -> None:
    """List the dataset adapters (use as KIND:ARG, e.g. native:DIR)."""
    from medibench.datasets import DATASETS

    list_registry(DATASETS)


def protocols() -> None:
    """List the scoring protocols (name@version), the judge protocols (``medibench judge
    --protocol``) and the calibration protocols (``medibench calibration score --protocol``)."""
    from medibench.calibration.protocols import CALIBRATION_PROTOCOLS
    from medibench.judges._protocols import JUDGES
    from medibench.protocols import PROTOCOLS

    list_registry(PROTOCOLS)
    list_registry(JUDGES)
    list_registry(CALIBRATION_PROTOCOLS)
