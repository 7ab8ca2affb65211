"""Weights: the documented commands name real checkpoints (``/weights/instruct-pix2pix``,
``/models/llava-1.5-7b-hf``); here those names point into a folder shared by the test session,
where the area modules link tiny random-weight models of the same families (the tests' own
builders, each built once by tests/_cache.py) under the same names."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.docs.standins import ALL

WHY = "weights: a tiny random-weight model of the same family, built by the test, at that name"

SUBSTITUTIONS = {
    ("*", "/weights/"): ("$DOCS_WEIGHTS/", WHY),
    ("*", "/models/"): ("$DOCS_WEIGHTS/", WHY),
}


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    folder = cache / "weights"
    folder.mkdir(parents=True, exist_ok=True)
    env["DOCS_WEIGHTS"] = str(folder)
    yield


def tiny(env: dict[str, str], name: str, build, *, sources: tuple[str, ...] = ()) -> Path:
    """``$DOCS_WEIGHTS/name``: a link to what ``build(path)`` makes (a folder or a file), built
    once per builder source by tests/_cache.py (shared by the xdist workers and later sessions;
    the key covers the builder's module and ``sources``, the modules it builds with). One name
    has one builder. The blocks only read it."""
    from tests._cache import cached

    def into(folder: Path) -> None:
        folder.mkdir(parents=True)
        build(folder / name)

    made = cached(
        f"docs-{name}", into, sources=(build.__module__, *sources), salt=build.__qualname__
    )
    link = Path(env["DOCS_WEIGHTS"]) / name
    if not (link.is_symlink() and os.readlink(link) == str(made / name)):
        # (re)linked atomically: another xdist worker may link it too, and a rebuilt model
        # (its builder changed) replaces an older one
        part = link.with_name(f".{name}.{os.getpid()}")
        part.unlink(missing_ok=True)
        part.symlink_to(made / name)
        os.replace(part, link)
    return link
