"""Where a benchmark's official files are on the Hub (:class:`HubSource`), one downloaded file's
record, and the error of a download that cannot run: what :mod:`._hub` (the download and its
manifest) and :mod:`._hub_fetch` (the file-by-file fetch) share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from medibench.sources._errors import SourceError

__all__ = ["HubDownloadError", "HubSource", "SourceFile"]

_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class HubSource:
    """Where a benchmark's official files are on the Hugging Face Hub.

    Attributes:
        repo_id: ``OWNER/NAME`` on the Hub.
        revision: the commit sha to download. A branch or tag (``main``) is *unpinned*: what it
            gives changes when the owners push; ``medibench download`` says so and records the
            commit it resolved to.
        repo_type: ``dataset`` (the benchmarks), ``model`` or ``space``.
        allow_patterns: the globs of the files to fetch (``("parquet/**",)``); ``None``: all.
        licence: the licence as the owners state it, or ``""`` when medibench does not know it
            (the dataset card's licence is then read at download time).
        dataset: the path under the download folder that ``--dataset KIND:...`` takes
            (``dataBenchmark_00.tar``); ``""``: the folder itself.
        revision_from: where the pinned sha was taken from, for the reader who checks it.
    """

    repo_id: str
    revision: str
    repo_type: str = "dataset"
    allow_patterns: tuple[str, ...] | None = None
    licence: str = ""
    dataset: str = ""
    revision_from: str = ""

    def __post_init__(self) -> None:
        if self.repo_id.count("/") != 1 or not all(self.repo_id.split("/")):
            raise ValueError(f"hub repo_id {self.repo_id!r} must be 'OWNER/NAME'")
        if self.allow_patterns is not None:
            object.__setattr__(self, "allow_patterns", tuple(self.allow_patterns))

    @property
    def pinned(self) -> bool:
        """Whether ``revision`` is a commit sha (immutable), not a branch or tag."""
        return bool(_COMMIT.fullmatch(self.revision))

    @property
    def url(self) -> str:
        """The repository's page on huggingface.co."""
        prefix = {"dataset": "datasets/", "space": "spaces/"}.get(self.repo_type, "")
        return f"https://huggingface.co/{prefix}{self.repo_id}"


@dataclass(frozen=True)
class SourceFile:
    """One downloaded file: its path relative to the folder, size in bytes and hex sha256."""

    path: str
    size: int
    sha256: str


class HubDownloadError(SourceError):
    """A hub download cannot run (offline without the files, unknown repo or revision)."""
