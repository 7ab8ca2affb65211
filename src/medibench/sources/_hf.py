"""``hf:OWNER/NAME[@REVISION]`` dataset paths: a Hugging Face dataset repo, offline first.

A dataset spec may name a Hub repository instead of a folder: ``medgen:hf:Jack04810/MedGEN-Bench``
or, with the kind found from the repository, ``hf:Jack04810/MedGEN-Bench@<sha>``. The path is
resolved to the repository's snapshot folder in the local Hugging Face cache (``HF_HUB_CACHE``,
else ``HF_HOME/hub``) without touching the network. With ``download=True`` (the CLI's
``--download``) a snapshot that is not cached is fetched through ``huggingface_hub`` first, at the
revision asked for; without it, a missing snapshot is an error saying how to download it.

Without ``@REVISION`` the revision is the benchmark's pinned one when the repository is that
benchmark's (:class:`~medibench.sources.HubSource`), else ``main``, which is *unpinned*: what it
gives changes when the owners push (the note says so).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medibench.sources._errors import SourceError
from medibench.sources._hub import HubDownloadError, HubSource, _hub_settings

__all__ = ["HF_PREFIX", "HfSpec", "is_hf_path", "parse_hf_path", "resolve_hf_path"]

HF_PREFIX = "hf:"
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


@dataclass(frozen=True)
class HfSpec:
    """A parsed ``hf:OWNER/NAME[@REVISION]``; ``revision`` is ``""`` when none was given."""

    repo_id: str
    revision: str = ""

    def __str__(self) -> str:
        return HF_PREFIX + self.repo_id + (f"@{self.revision}" if self.revision else "")


def is_hf_path(path: str | os.PathLike | None) -> bool:
    """Whether a dataset path names a Hub repository (``hf:...``)."""
    return isinstance(path, str) and path.startswith(HF_PREFIX)


def parse_hf_path(path: str) -> HfSpec:
    """``hf:OWNER/NAME[@REVISION]`` → :class:`HfSpec`.

    Raises:
        SourceError: not of that form (the message shows the expected one).
    """
    body = path.removeprefix(HF_PREFIX)
    repo_id, _, revision = body.partition("@")
    if not _REPO.fullmatch(repo_id) or (revision == "" and body.endswith("@")):
        raise SourceError(
            f"dataset path {path!r} is not a Hugging Face repository; expected "
            "'hf:OWNER/NAME' or 'hf:OWNER/NAME@REVISION'"
        )
    return HfSpec(repo_id, revision)


def resolve_hf_path(
    path: str,
    *,
    source: HubSource | None = None,
    download: bool = False,
    notes: list[str] | None = None,
) -> Path:
    """The local folder for ``hf:OWNER/NAME[@REVISION]``: its snapshot in the Hugging Face cache.

    ``source``: the benchmark's own Hub source, when the repository is that benchmark's: its
    pinned revision is the default and only its ``allow_patterns`` are downloaded, and its
    ``dataset`` sub-path (``dataBenchmark_00.tar``) is what the path resolves to. ``download``:
    fetch a snapshot that is not cached (never when ``HF_HUB_OFFLINE`` is set). ``notes``
    receives what a reader of the results should know (an unpinned revision, a download).
    A snapshot downloaded here has each file checked against the Hub's tree listing at its
    commit (LFS sha256 or git blob id, and size); one already cached is used as it is.

    Raises:
        HubDownloadError: the snapshot is not cached (and ``download`` is off, or the Hub
            cannot be reached), or the repository or revision does not exist, or a downloaded
            file is not what the Hub's listing promises (the snapshot is then removed from
            the cache, naming the file and both hashes).
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    spec = parse_hf_path(path)
    ours = source is not None and source.repo_id.lower() == spec.repo_id.lower()
    revision = spec.revision or (source.revision if ours and source else "main")
    patterns = list(source.allow_patterns) if ours and source and source.allow_patterns else None
    settings = _hub_settings()
    where = f"{spec.repo_id}@{revision}"
    if not re.fullmatch(r"[0-9a-f]{40}", revision) and notes is not None:
        notes.append(
            f"{where}: revision {revision!r} is a branch or tag, not a commit (unpinned): "
            "what it gives changes when the owners push; name a commit with @SHA to pin it"
        )

    def snapshot(**how: Any) -> str:
        return snapshot_download(
            spec.repo_id,
            repo_type="dataset",
            revision=revision,
            allow_patterns=patterns,
            cache_dir=settings["cache_dir"],
            **how,
        )

    try:
        folder = snapshot(local_files_only=True)
    except LocalEntryNotFoundError:
        folder = None
    if folder is None:
        how = (
            f"add --download to fetch it (or run `hf download {spec.repo_id} --repo-type dataset "
            f"--revision {revision}` where the Hub can be reached)"
        )
        if not download or settings["offline"]:
            reason = "HF_HUB_OFFLINE is set and " if download else ""
            raise HubDownloadError(
                f"{reason}{where} is not in the local Hugging Face cache "
                f"({settings['cache_dir']}): {how}"
            )
        from medibench.sources._hub import _hub_quiet
        from medibench.sources._hub_fetch import describe_failure

        try:
            with _hub_quiet():  # its retry warnings would bury the one line that says what failed
                folder = snapshot(endpoint=settings["endpoint"])
        except RevisionNotFoundError as exc:
            raise HubDownloadError(f"{spec.repo_id} has no revision {revision!r}") from exc
        except RepositoryNotFoundError as exc:
            raise HubDownloadError(
                f"dataset repository {spec.repo_id} not found (private or gated repositories "
                "need HF_TOKEN)"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - unreachable, a 500, a cut-off body, a loop
            raise HubDownloadError(
                f"cannot download {where} from {settings['endpoint']}: {describe_failure(exc)}; "
                "nothing of it is used"
            ) from None
        _verify(spec.repo_id, patterns, Path(folder), settings)
        if notes is not None:
            notes.append(
                f"{where}: downloaded into the Hugging Face cache {settings['cache_dir']}, "
                "each file checked against the Hub's listing"
            )
    root = Path(folder)
    return root / source.dataset if ours and source and source.dataset else root


def _verify(repo_id: str, patterns: list[str] | None, folder: Path, settings: dict) -> None:
    """Check a freshly downloaded cache snapshot (``folder``, named by its commit) file by
    file against the Hub's tree listing at that commit (see ``verify_snapshot``)."""
    from huggingface_hub import HfApi

    from medibench.sources._hub import _hub_quiet
    from medibench.sources._hub_fetch import verify_snapshot

    source = HubSource(repo_id, folder.name, allow_patterns=tuple(patterns) if patterns else None)
    with _hub_quiet():
        verify_snapshot(HfApi(endpoint=settings["endpoint"]), source, folder.name, folder)
