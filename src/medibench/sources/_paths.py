"""Paths inside a source folder: a relative path that a manifest names, resolved without
leaving the folder (re-exported by :mod:`medibench.datasets`)."""

from __future__ import annotations

import os
from pathlib import Path

from medibench.sources._errors import DatasetError

__all__ = ["resolve_inside"]


def resolve_inside(root: Path, relative: str, *, what: str) -> Path:
    """Resolve ``relative`` against the resolved ``root``, refusing anything that leaves it.

    Refused: an absolute path, a path whose ``..`` parts climb out of ``root``, and a path that
    a symbolic link inside ``root`` sends outside it (except, in a Hugging Face cache snapshot,
    the links into that repository's ``blobs/``). ``what`` starts the error message (for
    example ``"samples.jsonl line 3, sample 'a', field 'input'"``). The file need not exist.
    """
    rel = Path(relative)
    if (
        rel.is_absolute()
        or relative.startswith(("/", "\\"))
        or (len(relative) > 1 and relative[1] == ":")
    ):
        raise DatasetError(
            f"{what}: path '{relative}' is absolute; image paths must be relative to the dataset "
            f"folder {root}"
        )
    lexical = Path(os.path.normpath(root / rel))
    if not _is_within(lexical, root):
        raise DatasetError(
            f"{what}: path '{relative}' escapes the dataset folder {root} (via '..')"
        )
    resolved = (root / rel).resolve()
    if not _is_within(resolved, _link_bound(root)):
        raise DatasetError(
            f"{what}: path '{relative}' escapes the dataset folder {root} through a symbolic "
            f"link (it resolves to {resolved})"
        )
    return resolved


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
