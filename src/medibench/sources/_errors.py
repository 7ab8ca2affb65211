"""The error type of the source layer."""

from __future__ import annotations

from medibench.datasets._base import DatasetError

__all__ = ["SourceError"]


class SourceError(DatasetError):
    """A benchmark's files cannot be reached: a missing path, a corrupt or unsafe archive, a
    Parquet file that is not one or lacks columns. The message names the file and the problem.

    A :class:`~medibench.datasets.DatasetError` (so a ``ValueError``): the CLI prints it as a
    one-line error, and adapters need not translate it.
    """
