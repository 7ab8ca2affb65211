"""Image cells in the Hugging Face ``datasets`` encodings, decoded as files are.

An ``Image()`` feature is stored as a struct ``{"bytes": binary, "path": string}``: the bytes
when the image is embedded, else a path (relative to the dataset's folder); a
``Sequence(Image())`` is a list of such structs; some exports store a bare path string. The
bytes go through :func:`medibench.io.decode_image`, a path through
:func:`medibench.io.read_image`: the same decoders, so the same image gives the same pixels.
"""

from __future__ import annotations

import io
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from medibench.io import ImageReadError, atomic_write_bytes, decode_image, read_image, sha256_bytes
from medibench.io._images import ImageMode
from medibench.sources._errors import DatasetError
from medibench.sources._paths import resolve_inside

#: The folder a path cell is relative to (``None``: path cells are refused).
_Folder = str | os.PathLike | None
R = TypeVar("R")
T = TypeVar("T")

__all__ = [
    "ImageCellError",
    "decode_image_cell",
    "decode_image_cells",
    "image_cell_bytes",
    "image_format",
    "map_rows_in_threads",
    "store_image_cell",
    "store_image_ref",
]


class ImageCellError(ImageReadError):
    """An image cell that cannot be decoded: that sample's problem, not the whole load's.

    An :class:`~medibench.io.ImageReadError`, so the per-sample failure paths that catch it for
    files catch it for cells. The message reads ``"<file>: row <row>, column '<column>':
    <problem>"``.

    Attributes (besides ``path``, the Parquet file, and ``problem``):
        file, row, column: where the cell is.
    """

    def __init__(self, file: str | os.PathLike, row: int, column: str, problem: str) -> None:
        self.file = os.fspath(file)
        self.row = row
        self.column = column
        self.cell_problem = problem
        super().__init__(file, f"row {row}, column '{column}': {problem}")

    def __reduce__(self):
        return (type(self), (self.file, self.row, self.column, self.cell_problem))


def decode_image_cell(
    cell: Any,
    *,
    file: str | os.PathLike,
    row: int,
    column: str,
    base: str | os.PathLike | None = None,
    mode: ImageMode = "rgb",
    notes: list[str] | None = None,
) -> np.ndarray:
    """Decode one image cell (``{"bytes", "path"}`` struct or path string) to an array.

    ``file``, ``row``, ``column`` say where the cell is (for errors); ``base`` is the folder a
    path is relative to (a path that leaves it is refused); ``mode`` as
    :func:`medibench.io.read_image`.

    Raises:
        ImageCellError: a null or malformed cell, a path without ``base`` or outside it, bytes
            or a file that do not decode (the decoder's problem, quoted).
    """
    data, name = image_cell_bytes(cell, file=file, row=row, column=column, base=base)
    try:
        if data is not None:
            return decode_image(data, name=name, mode=mode, notes=notes)
        return read_image(name, mode=mode, notes=notes)
    except ImageReadError as exc:
        stored = "" if name == _place(file, row, column) else f"'{name}': "
        raise ImageCellError(file, row, column, stored + exc.problem) from exc


def decode_image_cells(cell: Any, *, column: str, **options: Any) -> list[np.ndarray]:
    """Decode a list-of-images cell; a single image cell gives a list of one, null none.

    ``options``: the other keywords of :func:`decode_image_cell` (``file`` and ``row`` are
    required); an error names the item as ``column[i]``.
    """
    if cell is None:
        return []
    if not isinstance(cell, list):
        return [decode_image_cell(cell, column=column, **options)]
    return [
        decode_image_cell(item, column=f"{column}[{i}]", **options) for i, item in enumerate(cell)
    ]


def image_cell_bytes(
    cell: Any, *, file: str | os.PathLike, row: int, column: str, base: _Folder = None
) -> tuple[bytes | None, str]:
    """What an image cell holds, undecoded: ``(bytes, name)`` for embedded bytes (``name`` is
    the stored path, or the cell's place), or ``(None, resolved file path)`` for a path.

    For callers that store or hash the image's original bytes (a content-addressed copy) rather
    than decode it. Raises :class:`ImageCellError` as :func:`decode_image_cell` does.
    """
    place = _place(file, row, column)
    if isinstance(cell, dict):
        data, stored = cell.get("bytes"), cell.get("path")
        if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
            raise ImageCellError(
                file, row, column, f"'bytes' holds a {type(data).__name__}, not binary data"
            )
        if data is not None:
            return bytes(data), (stored if isinstance(stored, str) and stored else place)
        if isinstance(stored, str) and stored:
            return None, _resolve(stored, file, row, column, base)
        raise ImageCellError(file, row, column, "the image struct has neither bytes nor a path")
    if isinstance(cell, str) and cell:
        return None, _resolve(cell, file, row, column, base)
    if cell is None:
        raise ImageCellError(file, row, column, "the cell is empty (null)")
    raise ImageCellError(
        file,
        row,
        column,
        f"expected an image ({{'bytes', 'path'}} struct or path string), got a "
        f"{type(cell).__name__}",
    )


def image_format(
    data: bytes, *, file: str | os.PathLike, row: int, column: str
) -> str:
    """The image format of ``data`` as Pillow names it, lower-cased (``png``, ``jpeg``), from
    its header only (nothing is decoded).

    For loaders that store a cell's bytes unchanged and must still refuse, at load time, a cell
    that is not an image at all: that sample's problem, the rest loads.

    Raises:
        ImageCellError: the bytes are not an image Pillow recognises.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return (image.format or "png").lower()
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageCellError(file, row, column, f"the bytes are not an image ({exc})") from None


def store_image_cell(
    cell: Any,
    folder: str | os.PathLike,
    *,
    file: str | os.PathLike,
    row: int,
    column: str,
    base: str | os.PathLike | None = None,
) -> Path:
    """The file holding the cell's image: embedded bytes are written once, unchanged, to
    ``folder/<sha256[:2]>/<sha256><suffix>`` (the layout MedGEN-Bench's prepare script uses);
    a path cell is the resolved file itself.

    For adapters whose samples point at image files: the bytes are not re-encoded, so the file
    decodes to the cell's pixels. ``suffix`` is the stored name's (lower-cased), else sniffed
    from the bytes (``.png``, ``.jpg``, ``.tif``, ``.bmp``, ``.dcm``; ``.img`` otherwise). An
    existing file of that name is kept (same content, by its name). Nothing is decoded here:
    a cell that does not decode fails when the sample is read, naming the stored file.

    Raises:
        ImageCellError: as :func:`image_cell_bytes`.
    """
    data, name = image_cell_bytes(cell, file=file, row=row, column=column, base=base)
    if data is None:
        return Path(name)
    digest = sha256_bytes(data)
    stored = "" if name == _place(file, row, column) else name
    target = Path(folder) / digest[:2] / f"{digest}{_suffix(stored, data)}"
    if not target.is_file():  # a cache of the cell: rebuilt from it, so no fsync per image
        atomic_write_bytes(target, data, durable=False)
    return target


def store_image_ref(
    cell: Any, folder: Path, root: Path, *, file: str | os.PathLike, row: int, column: str
) -> str:
    """:func:`store_image_cell` under ``folder`` (path cells resolved in ``root``), as a POSIX
    path relative to ``root``: what a record that points at its images holds.

    Raises:
        ImageCellError: as :func:`store_image_cell`.
        DatasetError: ``folder`` cannot be written (it must be, beside the Parquet files).
    """
    try:
        stored = store_image_cell(cell, folder, file=file, row=row, column=column, base=root)
    except OSError as exc:
        raise DatasetError(
            f"cannot write the images of {file} to {folder} ({exc}); the folder must be "
            "writable, as it sits beside the Parquet files"
        ) from None
    return Path(os.path.relpath(stored, root)).as_posix()


def map_rows_in_threads(
    fn: Callable[[R], T], items: Iterable[R], *, threads: int | None = None, window: int = 32
) -> Iterator[tuple[R, T | ImageCellError]]:
    """``(item, fn(item))`` for each item, in order, with up to ``threads`` calls running at
    once and at most ``window`` items read ahead.

    For storing image cells while the next rows are read: hashing and writing release the GIL,
    so on two cores the writes overlap the Parquet reading. An :class:`ImageCellError` raised by
    ``fn`` is returned in the result's place (that item's problem); other errors propagate.
    ``window`` bounds the memory held (each pending item holds its image bytes).
    """
    threads = threads or min(4, os.cpu_count() or 1)
    if threads <= 1:
        for item in items:
            yield item, _call(fn, item)
        return
    pending: deque[tuple[R, Future[T | ImageCellError]]] = deque()
    with ThreadPoolExecutor(threads, thread_name_prefix="medibench-cells") as pool:
        for item in items:
            pending.append((item, pool.submit(_call, fn, item)))
            if len(pending) >= window:
                first, future = pending.popleft()
                yield first, future.result()
        while pending:
            first, future = pending.popleft()
            yield first, future.result()


def _call(fn: Callable[[R], T], item: R) -> T | ImageCellError:
    try:
        return fn(item)
    except ImageCellError as exc:
        return exc


def _suffix(stored: str, data: bytes) -> str:
    """The stored name's suffix, else one sniffed from the bytes."""
    suffix = Path(stored).suffix.lower()
    if suffix and len(suffix) <= 6 and suffix[1:].isalnum():
        return suffix
    for magic, sniffed in _MAGIC:
        if data.startswith(magic):
            return sniffed
    return ".dcm" if data[128:132] == b"DICM" else ".img"


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", ".png"),
    (b"\xff\xd8\xff", ".jpg"),
    (b"II*\x00", ".tif"),
    (b"MM\x00*", ".tif"),
    (b"BM", ".bmp"),
)


def _resolve(
    relative: str, file: str | os.PathLike, row: int, column: str, base: str | os.PathLike | None
) -> str:
    if base is None:
        raise ImageCellError(
            file, row, column, f"holds the path '{relative}' but no folder to resolve it in"
        )
    try:
        return str(resolve_inside(Path(base).resolve(), relative, what="image path"))
    except DatasetError as exc:
        raise ImageCellError(file, row, column, str(exc).removeprefix("image path: ")) from None


def _place(file: str | os.PathLike, row: int, column: str) -> str:
    return f"{os.fspath(file)} row {row}, column '{column}'"
