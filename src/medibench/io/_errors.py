"""The one error type for files that cannot be read as images."""

from __future__ import annotations

import os

__all__ = ["ImageReadError", "require_file"]


class ImageReadError(ValueError):
    """A file could not be read as an image; the message names the file and the problem.

    It is a ``ValueError`` (bad input data), and deliberately *not* a ``FileNotFoundError``: a
    missing file is one more reason an image cannot be read, and callers catch one type to record
    a per-sample failure. The original exception, when there is one, is kept as ``__cause__``.

    Attributes:
        path: the file, as given.
        problem: what is wrong, in words (``"file not found"``, ``"truncated PNG ..."``).
    """

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self):
        # Exceptions cross process boundaries (process pools, Ray): rebuild from both fields.
        return (type(self), (self.path, self.problem))


def require_file(path: str | os.PathLike) -> None:
    """Raise ImageReadError unless ``path`` is an existing, non-empty regular file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ImageReadError(path, "file not found") from None
    except OSError as exc:
        raise ImageReadError(path, f"could not be read ({exc.strerror or exc})") from exc
    if os.path.isdir(path):
        raise ImageReadError(path, "is a directory, not an image file")
    if st.st_size == 0:
        raise ImageReadError(path, "empty file (0 bytes)")
