"""The error types of the source layer, and of every dataset built on it."""

from __future__ import annotations

__all__ = ["DatasetError", "SourceError"]


class DatasetError(ValueError):
    """A dataset cannot be read or written: the message names the file, line, sample and problem
    (re-exported by :mod:`medibench.datasets`)."""


class SourceError(DatasetError):
    """A benchmark's files cannot be reached: a missing path, a corrupt or unsafe archive, a
    Parquet file that is not one or lacks columns. The message names the file and the problem.

    A :class:`~medibench.datasets.DatasetError` (so a ``ValueError``): the CLI prints it as a
    one-line error, and adapters need not translate it.
    """
