"""The errors of the editing models behind web APIs, and of any model that refuses an edit.

:class:`APIError` and its kinds are what a sample's failure is recorded as (the runner goes on);
:class:`ContentRefusedError` is shared by every model that can refuse: the web APIs (a content
filter) and the diffusers pipelines (a safety checker that flags its output).
:class:`MissingAPIKeyError` (the call layer's, shared with the judges) fails when a model is
built. This module imports only :mod:`medibench.calls._keys` (no httpx, no torch), so
``medibench.models`` can export :class:`ContentRefusedError` cheaply.
"""

from __future__ import annotations

from medibench.calls._keys import MissingAPIKeyError as _MissingAPIKeyError

__all__ = [
    "APIError",
    "ContentRefusedError",
    "CostBudgetSpent",
    "MissingAPIKeyError",
    "NoImageError",
    "UnsupportedPipelineError",
]


class APIError(RuntimeError):
    """An API call that failed for good; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContentRefusedError(APIError):
    """The provider refused the request or filtered the output (safety, content policy)."""


class UnsupportedPipelineError(ValueError):
    """A pipeline that a medibench model cannot run: not an editing pipeline, or one that the
    installed packages cannot build; the message says why and what to do."""


class NoImageError(APIError):
    """The answer was well-formed HTTP but held no image (malformed body, text-only answer)."""


class CostBudgetSpent(APIError):
    """A paid call that was not sent: it would take the run past its cost budget
    (:class:`medibench.calls.CostBudget`, ``--max-cost``). The runner leaves the item undone
    (no row), so a later run with a larger budget makes it."""


#: One class for every client (models and judges), defined with the call layer.
MissingAPIKeyError = _MissingAPIKeyError
