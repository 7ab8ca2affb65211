"""Fetching a Hub snapshot file by file, each file checked against the Hub's own promise.

The repository's tree listing at the resolved commit gives every file's size and either its
LFS sha256 (``lfs.oid``; the ETag the Hub serves for it) or its git blob id (the sha1 of
``blob <size>\\0`` followed by the bytes). A file whose bytes do not hash to what the Hub
promised is removed and refused, naming the file and both hashes; any HTTP or transport
failure (a status, a truncated body, a redirect loop, a refused connection) is one
:class:`HubDownloadError` line naming the file and the status. Nothing is recorded as
verified unless every file matched.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from medibench.sources._hub_source import HubDownloadError, HubSource, SourceFile

__all__ = ["describe_failure", "fetch_verified", "verify_snapshot"]

_CHUNK = 1 << 20
_WORKERS = 8  # as huggingface_hub's snapshot_download


def fetch_verified(
    api: Any, source: HubSource, commit: str, folder: Path, settings: dict[str, Any]
) -> tuple[SourceFile, ...]:
    """Download every file of ``source`` at ``commit`` (its ``allow_patterns``) into
    ``folder`` and check each against the tree listing; the files, sorted by path.

    Raises:
        HubDownloadError: the listing or a file could not be fetched (naming the file and the
            HTTP status), or a file's bytes are not the ones the Hub's metadata promises.
    """
    wanted = _listing(api, source, commit)
    with ThreadPoolExecutor(max_workers=min(_WORKERS, len(wanted))) as pool:
        results = list(pool.map(lambda e: _fetch_one(source, commit, e, folder, settings), wanted))
    problems = [r for r in results if isinstance(r, str)]
    if problems:
        more = f" (and {len(problems) - 1} more file(s))" if len(problems) > 1 else ""
        raise HubDownloadError(problems[0] + more)
    files = [r for r in results if isinstance(r, SourceFile)]
    return tuple(sorted(files, key=lambda f: f.path))


def verify_snapshot(api: Any, source: HubSource, commit: str, folder: Path) -> None:
    """Check every file of ``folder``, a Hugging Face cache snapshot of ``source`` at
    ``commit`` (its ``allow_patterns``), against the tree listing at that commit.

    Raises:
        HubDownloadError: the listing could not be read, or a file is missing or its bytes are
            not the ones the Hub's metadata promises. The snapshot folder is then removed, with
            the cached blobs of the refused files, so the cache does not serve them again.
    """
    at = f"{source.repo_id}@{commit}"
    problems = []
    for entry in _listing(api, source, commit):
        local = folder / entry.path
        if not local.is_file():
            problems.append(f"{at}: file {entry.path}: not in the downloaded snapshot")
            continue
        problem = _check(entry, _hashes(local), f"{at}: file {entry.path}")
        if problem is not None:
            problems.append(problem)
            local.resolve().unlink(missing_ok=True)  # the blob the snapshot links to
    if problems:
        shutil.rmtree(folder, ignore_errors=True)
        more = f" (and {len(problems) - 1} more file(s))" if len(problems) > 1 else ""
        raise HubDownloadError(
            f"{problems[0]}{more}; the snapshot was removed from the Hugging Face cache"
        )


def describe_failure(exc: BaseException) -> str:
    """One line for an HTTP or transport failure: ``HTTP 500 Internal Server Error`` when
    the server answered, else the exception's kind and message."""
    cause: BaseException | None = exc
    while cause is not None:  # huggingface_hub wraps the HTTP error it met in its own
        response = getattr(cause, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            reason = getattr(response, "reason_phrase", "") or ""
            return f"HTTP {status} {reason}".strip()
        if cause.__cause__ is None and cause.__context__ is None:
            break
        cause = cause.__cause__ or cause.__context__
    if cause is not None and cause is not exc:
        exc = cause  # the root failure says more than the wrapper's advice
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:200] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _fetch_one(
    source: HubSource, commit: str, entry: Any, folder: Path, settings: dict[str, Any]
) -> SourceFile | str:
    """The checked file, or the one-line problem with it."""
    from huggingface_hub import hf_hub_download

    where = f"{source.repo_id}@{commit}: file {entry.path}"
    try:
        local = Path(
            hf_hub_download(
                source.repo_id,
                entry.path,
                repo_type=source.repo_type,
                revision=commit,
                local_dir=folder,
                cache_dir=settings["cache_dir"],
                endpoint=settings["endpoint"],
            )
        )
    except Exception as exc:  # noqa: BLE001 - every failure of a file is one line
        _forget(folder, entry.path)
        return f"{where}: download failed ({describe_failure(exc)}); nothing was recorded"
    hashes = _hashes(local)
    problem = _check(entry, hashes, where)
    if problem is not None:
        _forget(folder, entry.path)
        return f"{problem}; the file was removed and nothing was recorded"
    return SourceFile(entry.path, hashes[2], hashes[0])


def _listing(api: Any, source: HubSource, commit: str) -> list[Any]:
    """The tree entries (files) of ``source`` at ``commit`` that its ``allow_patterns`` take."""
    from huggingface_hub.utils import filter_repo_objects

    at = f"{source.repo_id}@{commit}"
    try:
        tree = api.list_repo_tree(
            source.repo_id, repo_type=source.repo_type, revision=commit, recursive=True
        )
        entries = [e for e in tree if getattr(e, "blob_id", None) is not None]
    except Exception as exc:  # noqa: BLE001 - every failure of the listing is one line
        raise HubDownloadError(
            f"cannot list the files of {at} on {api.endpoint}: {describe_failure(exc)}"
        ) from None
    patterns = list(source.allow_patterns) if source.allow_patterns else None
    wanted = list(filter_repo_objects(entries, allow_patterns=patterns, key=lambda e: e.path))
    if not wanted:
        raise HubDownloadError(f"{at} has no file matching {patterns or 'any pattern'}")
    return wanted


def _check(entry: Any, hashes: tuple[str, str, int], where: str) -> str | None:
    """``None`` when a file's ``(sha256, git blob id, size)`` are what the tree ``entry``
    promises (the LFS sha256, else the git blob id), else the problem, naming both."""
    sha256, blob, size = hashes
    lfs = getattr(entry, "lfs", None)
    if lfs is not None:
        promised, actual, kind = lfs.sha256, sha256, "sha256 (the Hub's LFS oid)"
    else:
        promised, actual, kind = entry.blob_id, blob, "git blob id (the Hub's oid)"
    if actual == promised and size == entry.size:
        return None
    return (
        f"{where}: the bytes received ({size} bytes, {kind.split(' ')[0]} {actual}) are "
        f"not what the Hub's metadata promises ({entry.size} bytes, {kind} {promised})"
    )


def _hashes(path: Path) -> tuple[str, str, int]:
    """``(sha256, git blob sha1, size)`` of a file, read once."""
    size = path.stat().st_size
    sha256, blob = hashlib.sha256(), hashlib.sha1(f"blob {size}\0".encode())
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            sha256.update(chunk)
            blob.update(chunk)
    return sha256.hexdigest(), blob.hexdigest(), size


def _forget(folder: Path, path: str) -> None:
    """Remove a refused or partial file and huggingface_hub's record of it, so the next
    download fetches it again rather than trusting it."""
    for stale in _leftovers(folder, path):
        stale.unlink(missing_ok=True)


def _leftovers(folder: Path, path: str) -> Sequence[Path]:
    meta = folder / ".cache" / "huggingface" / "download" / path
    return [
        folder / path,
        meta.with_name(meta.name + ".metadata"),
        meta.with_name(meta.name + ".lock"),
    ]
