"""Paths inside a source folder: a relative path read from data (a manifest, an archive member,
a Parquet cell), resolved without leaving the folder (re-exported by :mod:`medibench.datasets`).
"""

from __future__ import annotations

import os
from pathlib import Path

from medibench.sources._errors import DatasetError

__all__ = ["inside_problem", "resolve_inside"]


def resolve_inside(
    root: Path,
    relative: str,
    *,
    what: str,
    error: type[Exception] = DatasetError,
    follow_links: bool = False,
) -> Path:
    """Resolve ``relative`` against the resolved ``root``, refusing anything that leaves it.

    Refused (an ``error`` whose message starts with ``what``, for example ``"samples.jsonl
    line 3, sample 'a', field 'input'"``, and names the path): an absolute path, a path whose
    ``..`` parts climb out of ``root``, and (unless ``follow_links``, for folders the user
    links their own data into) a path that a symbolic link inside ``root`` sends outside it
    (except, in a Hugging Face cache snapshot, the links into that repository's ``blobs/``).
    The file need not exist. Every reader of a path written in data (archive members, dataset
    rows, Parquet cells, SOURCE.yaml, task sets, answer files) decides through
    :func:`inside_problem`, which this raises on.
    """
    problem = inside_problem(root, relative, follow_links=follow_links)
    if problem is not None:
        raise error(f"{what}: path '{relative}' {problem}")
    return Path(os.path.normpath(root / relative)) if follow_links else (root / relative).resolve()


def inside_problem(root: Path, relative: str, *, follow_links: bool = False) -> str | None:
    """Why ``relative`` (a path read from data) is not inside the folder ``root``, in words
    that follow the path in a message (``"is absolute; ..."``); ``None`` when it is inside.

    The check is made against the file system as it is now: a symbolic link already in
    ``root`` (even one that points through other links) is followed to where it really
    leads, so a chain of links made earlier cannot carry a later path out.
    """
    text = str(relative)
    if "\x00" in text:
        return "contains a NUL character"
    if Path(text).is_absolute() or text.startswith(("/", "\\")) or text[1:2] == ":":
        return f"is absolute; image paths must be relative to the dataset folder {root}"
    lexical = Path(os.path.normpath(root / text))
    if not _is_within(lexical, root):
        return f"escapes the dataset folder {root} (via '..')"
    if follow_links:
        return None
    resolved = (root / text).resolve()
    if not _is_within(resolved, _link_bound(root.resolve())):
        return (
            f"escapes the dataset folder {root} through a symbolic link (it resolves to "
            f"{resolved})"
        )
    return None


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _link_bound(root: Path) -> Path:
    """Where symbolic links under ``root`` may point: ``root`` itself, or, for a folder in a
    Hugging Face cache snapshot (``datasets--OWNER--NAME/snapshots/<sha>/...``), that
    repository's cache folder, whose ``blobs/`` hold the files the snapshot links to."""
    for folder in (root, *root.parents):
        repo = folder.parent.parent
        if folder.parent.name == "snapshots" and repo.name.startswith(_HUB_CACHE_KINDS):
            return repo
    return root


_HUB_CACHE_KINDS = ("datasets--", "models--", "spaces--")
