"""A local fake of the Hugging Face Hub endpoints ``snapshot_download`` calls for a dataset repo.

Serves, on 127.0.0.1 only, the paths huggingface_hub 2.x requests (read from its source:
``hf_api.repo_info`` / ``list_repo_tree``, ``file_download.get_hf_file_metadata`` / ``http_get``):

- ``GET /api/datasets/{owner}/{name}/revision/{rev}``: the repo info, with ``sha`` and
  ``siblings``;
- ``GET /api/datasets/{owner}/{name}/tree/{rev}[/{path}]``: the recursive file listing;
- ``HEAD``/``GET /datasets/{owner}/{name}/resolve/{rev}/{path}``: a file, with ``ETag``,
  ``X-Repo-Commit`` and ``Content-Length``.

As on the Hub, a file's tree ``oid`` is its git blob id (sha1 of ``blob <size>\\0`` + bytes)
and an LFS file (``lfs_suffixes``) also has ``lfs: {oid: sha256, size, pointerSize}``; the ETag
is the sha256 of an LFS file, the blob id of any other.

An unknown repo or revision is a 404 with the ``X-Error-Code`` the client maps to its errors.
``requests`` records every path asked for, so a test can show nothing else was called.

Faults, for the tests of what a download refuses: ``FakeRepo.faults`` maps a file's path to
``wrong-bytes`` (other bytes of the same size, under the promised hashes), ``truncate`` (the
body cut off half way), ``redirect-loop`` (a redirect to itself), ``500`` or ``404``;
``FakeRepo.answer_sha`` is the commit the repo info claims whatever was asked;
``FakeHub.api_fault`` (``500``, ``redirect-loop``) breaks the API routes.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass
class FakeRepo:
    """A dataset repo at one commit: ``files`` maps relative paths to bytes."""

    repo_id: str
    files: dict[str, bytes]
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    branches: tuple[str, ...] = ("main",)
    licence: str = "cc-by-4.0"
    lfs_suffixes: tuple[str, ...] = (".parquet", ".tar", ".zip", ".png")
    faults: dict[str, str] = field(default_factory=dict)
    answer_sha: str | None = None

    def is_lfs(self, path: str) -> bool:
        return path.endswith(self.lfs_suffixes)

    def commit(self, revision: str) -> str | None:
        return self.sha if revision == self.sha or revision in self.branches else None


@dataclass
class FakeHub:
    repos: dict[str, FakeRepo] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""
    api_fault: str | None = None

    def add(self, repo: FakeRepo) -> FakeRepo:
        self.repos[repo.repo_id] = repo
        return repo


@contextmanager
def fake_hub(*repos: FakeRepo) -> Iterator[FakeHub]:
    """A running fake hub serving ``repos``; its ``url`` is what ``HF_ENDPOINT`` takes."""
    hub = FakeHub()
    for repo in repos:
        hub.add(repo)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def do_GET(self) -> None:
            self._serve(body=True)

        def _serve(self, *, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.requests.append(f"{self.command} {path}")
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "datasets"] and hub.api_fault:
                return self._fault(hub.api_fault, b"", body)
            if parts[:2] == ["api", "datasets"] and len(parts) >= 6:
                repo, rest = "/".join(parts[2:4]), parts[4:]
                if rest[0] == "revision":
                    return self._info(repo, "/".join(rest[1:]), body)
                if rest[0] == "tree":
                    return self._tree(repo, rest[1], "/".join(rest[2:]), body)
            if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
                return self._file("/".join(parts[1:3]), parts[4], "/".join(parts[5:]), body)
            self._error(404, "EntryNotFound", f"no route {path}", body)

        def _repo(self, repo_id: str, revision: str, body: bool) -> tuple[FakeRepo, str] | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound", f"Repository {repo_id} not found", body)
                return None
            sha = repo.commit(revision)
            if sha is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", body)
                return None
            return repo, sha

        def _info(self, repo_id: str, revision: str, body: bool) -> None:
            found = self._repo(repo_id, revision, body)
            if found is None:
                return
            repo, sha = found
            self._json(
                {
                    "id": repo.repo_id,
                    "author": repo.repo_id.split("/")[0],
                    "sha": repo.answer_sha or sha,
                    "private": False,
                    "gated": False,
                    "disabled": False,
                    "cardData": {"license": repo.licence},
                    "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                },
                body,
            )

        def _tree(self, repo_id: str, revision: str, under: str, body: bool) -> None:
            found = self._repo(repo_id, revision, body)
            if found is None:
                return
            repo, _ = found
            prefix = f"{under}/" if under else ""
            self._json(
                [_entry(repo, p, data) for p, data in sorted(repo.files.items())
                 if p.startswith(prefix)],
                body,
            )  # fmt: skip

        def _file(self, repo_id: str, revision: str, path: str, body: bool) -> None:
            found = self._repo(repo_id, revision, body)
            if found is None:
                return
            repo, sha = found
            if path not in repo.files:
                return self._error(404, "EntryNotFound", f"{path} not in {repo_id}", body)
            data = repo.files[path]
            etag = hashlib.sha256(data).hexdigest() if repo.is_lfs(path) else _blob_id(data)
            headers = {
                "Content-Type": "application/octet-stream",
                "ETag": f'"{etag}"',
                "X-Repo-Commit": sha,
            }
            fault = repo.faults.get(path)
            if fault:
                return self._fault(fault, data, body, headers)
            self._send(200, data, body, headers)

        def _fault(self, fault: str, data: bytes, body: bool,
                   headers: dict[str, str] | None = None) -> None:  # fmt: skip
            if fault == "wrong-bytes":
                return self._send(200, bytes(b ^ 0xFF for b in data), body, headers or {})
            if fault == "redirect-loop":
                return self._send(302, b"", body, {**(headers or {}), "Location": self.path})
            if fault == "truncate":
                self.send_response(200)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data[: len(data) // 2])
                self.close_connection = True
                return None
            status = int(fault)
            code = "EntryNotFound" if status == 404 else "InternalError"
            return self._error(status, code, f"fault {fault}", body)

        def _json(self, obj: object, body: bool) -> None:
            self._send(200, json.dumps(obj).encode(), body, {"Content-Type": "application/json"})

        def _error(self, status: int, code: str, message: str, body: bool) -> None:
            data = json.dumps({"error": message}).encode()
            self._send(
                status,
                data,
                body,
                {
                    "Content-Type": "application/json",
                    "X-Error-Code": code,
                    "X-Error-Message": message,
                },
            )

        def _send(self, status: int, data: bytes, body: bool, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

    return Handler


def _blob_id(data: bytes) -> str:
    """The git blob id of ``data``: what the Hub's tree gives as a file's ``oid``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _entry(repo: FakeRepo, path: str, data: bytes) -> dict[str, object]:
    entry: dict[str, object] = {"type": "file", "path": path, "size": len(data)}
    if repo.is_lfs(path):
        sha256 = hashlib.sha256(data).hexdigest()
        pointer = (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n"
        ).encode()
        entry["oid"] = _blob_id(pointer)
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                        "pointerSize": len(pointer)}  # fmt: skip
    else:
        entry["oid"] = _blob_id(data)
    return entry
