"""Parquet shards read row group by row group, never a whole file in memory.

pyarrow (the ``hf`` extra) is imported when a Parquet file is first opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medibench.io._images import ImageMode
from medibench.sources._cells import decode_image_cell, decode_image_cells
from medibench.sources._errors import SourceError

__all__ = ["ParquetRow", "check_columns", "iter_parquet_rows", "parquet_files"]

#: Rows decoded to Python at a time: small, as image cells hold whole files.
_BATCH_ROWS = 64


@dataclass(frozen=True)
class ParquetRow:
    """One row of a Parquet file.

    Attributes:
        file: the Parquet file.
        index: the row's 0-based position in ``file`` (over all its row groups).
        values: ``{column: value}`` as pyarrow gives it to Python (a struct is a dict, a list a
            list, binary is ``bytes``), for the columns that were read.
    """

    file: Path
    index: int
    values: dict[str, Any] = field(repr=False)

    def where(self, column: str | None = None) -> str:
        """``"<file> row <index>"`` (and ``", column '<column>'"``), to start messages."""
        at = f"{self.file} row {self.index}"
        return at if column is None else f"{at}, column '{column}'"

    def image(
        self,
        column: str,
        *,
        base: str | os.PathLike | None = None,
        mode: ImageMode = "rgb",
        notes: list[str] | None = None,
    ) -> np.ndarray:
        """The image in ``column``, decoded by :func:`~medibench.sources.decode_image_cell`
        (``base``: the folder path-string cells are relative to)."""
        cell = self.values.get(column)
        return decode_image_cell(cell, **self._at(column), base=base, mode=mode, notes=notes)

    def images(self, column: str, **options: Any) -> list[np.ndarray]:
        """Every image in a list column (``datasets``' ``Sequence(Image())``); a single cell
        gives a list of one, a null cell an empty list. ``options`` as :meth:`image`'s."""
        return decode_image_cells(self.values.get(column), **self._at(column), **options)

    def _at(self, column: str) -> dict[str, Any]:
        return {"file": self.file, "row": self.index, "column": column}


def parquet_files(path: str | os.PathLike, *, what: str = "dataset") -> list[Path]:
    """The Parquet files ``path`` stands for: the file itself, or every ``*.parquet`` under a
    folder, sorted by their path relative to it (the order shards are named in).

    Raises:
        SourceError: no such path, a file that is not ``.parquet``, a folder without any.
    """
    path = Path(path)
    if path.is_file():
        if path.suffix.lower() != ".parquet":
            raise SourceError(f"{what} {path} is not a Parquet file (expected a .parquet name)")
        return [path]
    if not path.is_dir():
        raise SourceError(f"{what} {path} does not exist")
    files = sorted(
        (p for p in path.rglob("*") if p.suffix.lower() == ".parquet" and p.is_file()),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    if not files:
        raise SourceError(f"{what} {path} holds no .parquet files")
    return files


def check_columns(file: str | os.PathLike, required: Iterable[str]) -> list[str]:
    """The file's column names, after checking that every ``required`` one is there.

    Reads the schema only (the file's footer).

    Raises:
        SourceError: not a readable Parquet file, or columns missing; the message names the
            file, the missing columns and the ones found.
    """
    file = Path(file)
    found = list(_open(file).schema_arrow.names)
    missing = [c for c in required if c not in found]
    if missing:
        raise SourceError(
            f"{file}: missing column(s) {', '.join(missing)}; found: {', '.join(found) or '(none)'}"
        )
    return found


def iter_parquet_rows(
    files: str | os.PathLike | Iterable[str | os.PathLike],
    columns: Sequence[str] | None = None,
    *,
    batch_rows: int = _BATCH_ROWS,
) -> Iterator[ParquetRow]:
    """Every row of ``files`` in order, read a batch at a time within each row group.

    ``files``: one Parquet file or several (see :func:`parquet_files`). ``columns``: the ones
    to read (each file is checked to have them, :func:`check_columns`); ``None`` reads all.
    At most one row group's worth of data is held per file at a time.

    Raises:
        SourceError: a file that is not Parquet, lacks a column, or is cut off mid-way (naming
            the file and the first row that could not be read).
    """
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    for name in files:
        file = Path(name)
        if columns is not None:
            check_columns(file, columns)
        reader = _open(file)
        index = 0
        try:
            for batch in reader.iter_batches(
                batch_size=batch_rows, columns=list(columns) if columns is not None else None
            ):
                for values in batch.to_pylist():
                    yield ParquetRow(file, index, values)
                    index += 1
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid/ArrowIOError among them
            raise SourceError(
                f"{file}: cannot read rows from row {index} on ({type(exc).__name__}: {exc}); "
                "the file is damaged or cut off"
            ) from None


def _open(file: Path) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("reading Parquet needs pyarrow: pip install 'medibench[hf]'") from None
    if not file.is_file():
        raise SourceError(f"Parquet file {file} does not exist")
    try:
        return pq.ParquetFile(file)
    except (OSError, ValueError) as exc:
        raise SourceError(
            f"{file}: not a readable Parquet file ({type(exc).__name__}: {exc})"
        ) from None
