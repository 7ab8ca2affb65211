"""Tiny models and data that tests build, kept on disk across test sessions and shared by the
xdist workers of one session: built once under a key of the builder's source.

``cached(name, build)`` returns ``<cache>/<name>-<key>``, a folder made by ``build(folder)`` the
first time any process asks for it. The key hashes the source files of the builder's module and
of the modules named in ``sources``, the versions of the libraries that write the files (torch,
transformers, diffusers, peft), the CPU's model name, ``ATEN_CPU_CAPABILITY`` and ``salt``: a
changed builder, CPU or code path rebuilds, an unchanged one is reused. Building happens in a
scratch folder renamed into place under a file lock, so a worker never sees a half-built folder
and two workers never build the same thing twice.

The cache lives in ``$MEDIBENCH_TEST_CACHE``, default ``.cache/tests`` in the checkout (ignored
by git); ``rm -rf .cache/tests`` forces every build. Callers must treat the folder as read-only
(copy it first to change it).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib
import importlib.metadata
import inspect
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LIBRARIES = ("torch", "transformers", "diffusers", "peft", "numpy")


def cache_root() -> Path:
    """The cache folder: ``$MEDIBENCH_TEST_CACHE`` or ``<checkout>/.cache/tests``."""
    return Path(os.environ.get("MEDIBENCH_TEST_CACHE") or ROOT / ".cache" / "tests")


def key(build: Callable, sources: Iterable[str] = (), salt: str = "") -> str:
    """16 hex digits over the builder's module source, ``sources`` (module names), the library
    versions, the CPU and ATen's code path on it (a tiny model taught on one path is another
    model on the next) and ``salt``."""
    h = hashlib.sha256(salt.encode())
    h.update(f"{_cpu()}\0{os.environ.get('ATEN_CPU_CAPABILITY', '')}".encode())
    modules = [build.__module__, *sources]
    for name in modules:
        module = sys.modules.get(name) or importlib.import_module(name)
        h.update(name.encode() + b"\0" + Path(inspect.getfile(module)).read_bytes())
    h.update(getattr(build, "__qualname__", repr(build)).encode())
    for lib in _LIBRARIES:
        try:
            h.update(f"{lib}={importlib.metadata.version(lib)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{lib}=absent".encode())
    return h.hexdigest()[:16]


@functools.cache
def _cpu() -> str:
    """The CPU's model name (``/proc/cpuinfo``; empty where there is none)."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in info.splitlines()
                 if line.startswith("model name")), "")  # fmt: skip


def digest(*folders: Path) -> str:
    """16 hex digits over every file under ``folders`` (relative path and bytes): the ``salt``
    of a build made from data that the session generates, so other data rebuilds it."""
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _log_build(name: str, seconds: float) -> None:
    """Append ``name seconds`` to ``$MEDIBENCH_TEST_CACHE_LOG`` when set: what a fresh clone's
    first session spends building (``sort -k2 -n`` on the file lists the costliest)."""
    log = os.environ.get("MEDIBENCH_TEST_CACHE_LOG")
    if log:
        with open(log, "a") as out:
            out.write(f"{name} {seconds:.1f}\n")


def cached(
    name: str, build: Callable[[Path], object], *, sources: Iterable[str] = (), salt: str = ""
) -> Path:
    """The folder ``build(folder)`` makes, built at most once per key (see the module's doc)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{name}-{key(build, sources, salt)}"
    if folder.is_dir():
        return folder
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if folder.is_dir():  # another worker built it while this one waited
            return folder
        part = root / f".{folder.name}.part-{os.getpid()}"
        shutil.rmtree(part, ignore_errors=True)
        try:
            started = time.perf_counter()
            build(part)
            part.rename(folder)
            _log_build(folder.name, time.perf_counter() - started)
            for old in root.glob(f"{name}-*"):  # builds of an older builder
                if old != folder and len(old.name) == len(folder.name):
                    shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(part, ignore_errors=True)
    return folder
