"""Pinned Hugging Face Hub downloads of a benchmark's official files, and their manifest.

A benchmark on the Hub declares a :class:`HubSource` (``Benchmark.hub``). :func:`download_source`
fetches it file by file into a folder (:mod:`._hub_fetch`: each file checked against the Hub's
own metadata) and writes ``medibench-source.json`` there: the repository, the revision asked for
and the commit actually downloaded, and each file's relative path, size and sha256.
:func:`verify_source` re-checks those hashes; ``load_dataset`` calls it for any path inside a
download, so a file changed after the download is an error naming it, never a silently
different benchmark.

``huggingface_hub`` (extra ``hf``) is imported only when a download runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from medibench.io import atomic_write_text, sha256_file
from medibench.sources._errors import SourceError
from medibench.sources._hub_fetch import describe_failure, fetch_verified
from medibench.sources._hub_source import _COMMIT, HubDownloadError, HubSource, SourceFile
from medibench.sources._paths import inside_problem

__all__ = [
    "SOURCE_MANIFEST",
    "HubDownloadError",
    "HubSource",
    "SourceManifest",
    "SourceMismatchError",
    "download_source",
    "verify_source",
]

#: The manifest a download writes at the top of its folder.
SOURCE_MANIFEST = "medibench-source.json"
_FORMAT = "medibench-source/1"
_TRUE = {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True)
class SourceManifest:
    """What ``medibench-source.json`` records about one download."""

    repo_id: str
    repo_type: str
    requested_revision: str
    resolved_revision: str
    files: tuple[SourceFile, ...]
    benchmark: str = ""
    pinned: bool = False
    allow_patterns: tuple[str, ...] | None = None
    licence: str = ""
    downloaded_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "benchmark": self.benchmark,
            "repo_id": self.repo_id,
            "repo_type": self.repo_type,
            "requested_revision": self.requested_revision,
            "resolved_revision": self.resolved_revision,
            "pinned": self.pinned,
            "allow_patterns": None if self.allow_patterns is None else list(self.allow_patterns),
            "licence": self.licence,
            "downloaded_at": self.downloaded_at,
            "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files],
        }

    @classmethod
    def read(cls, folder: str | os.PathLike) -> SourceManifest:
        """The manifest in ``folder``; a malformed one is a :class:`SourceMismatchError`."""
        path = Path(folder) / SOURCE_MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            patterns = data.get("allow_patterns")
            return cls(
                repo_id=data["repo_id"],
                repo_type=data.get("repo_type", "dataset"),
                requested_revision=data["requested_revision"],
                resolved_revision=data["resolved_revision"],
                files=tuple(
                    SourceFile(str(f["path"]), int(f["size"]), str(f["sha256"]))
                    for f in data["files"]
                ),
                benchmark=data.get("benchmark", ""),
                pinned=bool(data.get("pinned", False)),
                allow_patterns=None if patterns is None else tuple(patterns),
                licence=data.get("licence", ""),
                downloaded_at=data.get("downloaded_at", ""),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceMismatchError(f"{path}: malformed source manifest ({exc})") from exc


class SourceMismatchError(SourceError):
    """A downloaded file no longer matches ``medibench-source.json`` (the message names it)."""


def download_source(
    source: HubSource,
    out: str | os.PathLike,
    *,
    benchmark: str = "",
    revision: str | None = None,
) -> SourceManifest:
    """Download ``source`` into the folder ``out`` and write ``out/medibench-source.json``.

    Online, the revision (``revision`` when given, else the source's own) is resolved to its
    commit first (one API call that also reads the dataset card's licence); a revision that is
    a commit sha must resolve to exactly that commit. Then every file of that commit's tree
    listing (the source's ``allow_patterns``) is fetched and its bytes checked against the
    Hub's metadata (the LFS sha256, or the git blob id) before the manifest records it. Any
    failure is a :class:`HubDownloadError` naming the file and the status, and leaves no
    manifest (an earlier one in ``out`` is removed first: the folder is being changed).
    Offline (``HF_HUB_OFFLINE=1``), a folder already downloaded at that revision is
    re-verified and returned; anything else is a :class:`HubDownloadError` saying how to
    download. Files already in ``out`` at the right commit are not fetched again.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    if revision is not None and revision != source.revision:
        source = dataclasses.replace(source, revision=revision)
    folder = Path(out)
    settings = _hub_settings()
    if settings["offline"]:
        return _offline(source, folder, benchmark)
    api = HfApi(endpoint=settings["endpoint"])
    try:
        with _hub_quiet():
            info = api.repo_info(
                source.repo_id, repo_type=source.repo_type, revision=source.revision
            )
    except RevisionNotFoundError:
        raise HubDownloadError(
            f"{source.repo_id} has no revision {source.revision!r} on {api.endpoint}"
        ) from None
    except RepositoryNotFoundError:
        raise HubDownloadError(
            f"{source.repo_type} repository {source.repo_id} not found on {api.endpoint} "
            "(private or gated repositories need HF_TOKEN)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - unreachable, 5xx, redirect loop: one line
        raise HubDownloadError(
            f"cannot read {source.repo_id}@{source.revision} from {api.endpoint}: "
            f"{describe_failure(exc)}"
        ) from None
    if not info.sha or not _COMMIT.fullmatch(str(info.sha)):
        raise HubDownloadError(
            f"{source.repo_id}: the hub returned no commit for {source.revision!r} "
            f"(got {info.sha!r})"
        )
    if source.pinned and info.sha != source.revision:
        raise HubDownloadError(
            f"{source.repo_id}: asked for commit {source.revision}, the hub at {api.endpoint} "
            f"answered commit {info.sha}; refused (to download another revision on purpose, "
            "give it: medibench download ... --revision REV)"
        )
    for stale in (SOURCE_MANIFEST, _VERIFIED):
        (folder / stale).unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    with _hub_quiet():  # its retry warnings would bury the one line that says what failed
        files = fetch_verified(api, source, info.sha, folder, settings)
    manifest = SourceManifest(
        repo_id=source.repo_id,
        repo_type=source.repo_type,
        requested_revision=source.revision,
        resolved_revision=info.sha,
        files=files,
        benchmark=benchmark,
        pinned=source.pinned,
        allow_patterns=source.allow_patterns,
        licence=source.licence or _card_licence(info),
        downloaded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    atomic_write_text(folder / SOURCE_MANIFEST, json.dumps(manifest.to_json(), indent=1) + "\n")
    return manifest


def verify_source(folder: str | os.PathLike, *, full: bool = False) -> SourceManifest | None:
    """Re-check the download that ``folder`` belongs to; ``None`` when it is not in one.

    ``folder`` may be the download's folder, a sub folder of it (``DL/parquet/vqa``) or a file
    in it (``DL/dataBenchmark_00.tar``): the nearest folder above it holding
    ``medibench-source.json`` is the download, and every file that manifest lists is checked.
    A missing file, or one whose sha256 differs, is a :class:`SourceMismatchError` naming the
    file and both hashes; so is a file under ``folder`` of a kind the download holds (a
    ``.parquet`` shard dropped in later) that the download did not bring (hidden files,
    huggingface_hub's ``.cache/`` and archive extraction folders aside).

    A file verified before is hashed again only when its size or modification time changed
    (they are kept in ``.medibench-verified.json`` beside the manifest), so loading a
    multi-gigabyte download costs a ``stat`` per file; ``full=True`` hashes every file.
    """
    path = Path(folder)
    root = _download_root(path)
    if root is None:
        return None
    manifest = SourceManifest.read(root)
    verified = {} if full else _verified(root, manifest)
    checked: dict[str, list[Any]] = {}
    for entry in manifest.files:
        problem = inside_problem(root.resolve(), entry.path)
        if problem is not None:
            raise SourceMismatchError(f"{root / SOURCE_MANIFEST}: path '{entry.path}' {problem}")
        file = root / entry.path
        if not file.is_file():
            raise SourceMismatchError(
                f"{file}: listed in {root / SOURCE_MANIFEST} (sha256 {entry.sha256}) but "
                f"missing; download it again: medibench download "
                f"{manifest.benchmark or 'BENCHMARK'} --out {root}"
            )
        st = file.stat()
        seen = [entry.sha256, st.st_size, st.st_mtime_ns]
        if verified.get(entry.path) != seen:
            actual = sha256_file(file)
            if actual != entry.sha256:
                raise SourceMismatchError(
                    f"{file}: sha256 {actual} does not match {entry.sha256} recorded in "
                    f"{root / SOURCE_MANIFEST} ({manifest.repo_id}@"
                    f"{manifest.resolved_revision}); the file changed after the download"
                )
        checked[entry.path] = seen
    _refuse_unlisted(path, root, manifest)
    if checked != verified:
        try:
            atomic_write_text(root / _VERIFIED, json.dumps(checked))
        except OSError:
            pass  # a read-only download is hashed in full each time
    return manifest


#: Size and mtime of each file at its last successful check, beside the manifest.
_VERIFIED = ".medibench-verified.json"


def _download_root(path: Path) -> Path | None:
    """The nearest folder at or above ``path`` with a source manifest."""
    start = path.absolute()
    for folder in (start, *start.parents) if start.is_dir() else start.parents:
        if (folder / SOURCE_MANIFEST).is_file():
            return folder
    return None


def _refuse_unlisted(path: Path, root: Path, manifest: SourceManifest) -> None:
    """Refuse a file under the loaded ``path`` that the download did not bring: it would be
    read as part of the benchmark without any check."""
    if not path.is_dir():
        return
    from medibench.sources._archive import CACHE_SUFFIX

    listed = {f.path for f in manifest.files}
    kinds = {Path(f.path).suffix.lower() for f in manifest.files}  # a user's notes.txt is no shard
    for file in sorted(path.absolute().rglob("*")):
        rel = file.relative_to(root).parts
        if any(p.startswith(".") or p.endswith(CACHE_SUFFIX) for p in rel) or file.is_dir():
            continue
        if file.suffix.lower() not in kinds:
            continue
        if "/".join(rel) not in listed and "/".join(rel) not in (SOURCE_MANIFEST, _VERIFIED):
            raise SourceMismatchError(
                f"{file}: not part of the download recorded in {root / SOURCE_MANIFEST} "
                f"({manifest.repo_id}@{manifest.resolved_revision}); remove it, or download "
                "again into a new folder"
            )


def _verified(root: Path, manifest: SourceManifest) -> dict[str, Any]:
    manifest_time = (root / SOURCE_MANIFEST).stat().st_mtime_ns
    try:
        data = json.loads((root / _VERIFIED).read_text(encoding="utf-8"))
        if (root / _VERIFIED).stat().st_mtime_ns < manifest_time:
            return {}  # written before this manifest: a new download
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# -- helpers ----------------------------------------------------------------------------------
def _hub_settings() -> dict[str, Any]:
    # huggingface_hub reads these at import; a process that sets them later (a test, a
    # notebook) must still be honoured, so they are read again at each call.
    from huggingface_hub import constants

    env = os.environ
    offline = constants.HF_HUB_OFFLINE or env.get("HF_HUB_OFFLINE", "").upper() in _TRUE
    cache = env.get("HF_HUB_CACHE") or (
        os.path.join(env["HF_HOME"], "hub") if env.get("HF_HOME") else constants.HF_HUB_CACHE
    )
    return {"offline": offline, "endpoint": env.get("HF_ENDPOINT") or None, "cache_dir": cache}


@contextlib.contextmanager
def _hub_quiet() -> Iterator[None]:
    """huggingface_hub's logger at errors only, for the duration."""
    from huggingface_hub.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


def _offline(source: HubSource, folder: Path, benchmark: str) -> SourceManifest:
    how = (
        f"unset HF_HUB_OFFLINE and run `medibench download {benchmark or 'BENCHMARK'} --out "
        f"{folder}` where huggingface.co (or an HF_ENDPOINT mirror) can be reached, then copy "
        "the folder here"
    )
    if not (folder / SOURCE_MANIFEST).is_file():
        raise HubDownloadError(
            f"HF_HUB_OFFLINE is set and {source.repo_id}@{source.revision} is not downloaded in "
            f"{folder}: {how}"
        )
    manifest = SourceManifest.read(folder)
    if manifest.repo_id != source.repo_id or source.revision not in {
        manifest.requested_revision,
        manifest.resolved_revision,
    }:
        raise HubDownloadError(
            f"HF_HUB_OFFLINE is set and {folder} holds {manifest.repo_id}@"
            f"{manifest.resolved_revision}, not {source.repo_id}@{source.revision}: {how}"
        )
    verify_source(folder)
    return manifest


def _card_licence(info: Any) -> str:
    card = getattr(info, "card_data", None)
    licence = card.get("license") if card is not None else None
    if isinstance(licence, list):
        licence = ", ".join(str(x) for x in licence)
    return str(licence) if licence else ""
