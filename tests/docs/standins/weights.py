"""Weights: the documented commands name real checkpoints (``/weights/instruct-pix2pix``,
``/models/llava-1.5-7b-hf``); here those names point into a folder shared by the test session,
where the area modules build tiny random-weight models of the same families (the tests' own
builders) under the same names."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

WHY = "weights: a tiny random-weight model of the same family, built by the test, at that name"

SUBSTITUTIONS = {
    ("*", "/weights/"): ("$DOCS_WEIGHTS/", WHY),
    ("*", "/models/"): ("$DOCS_WEIGHTS/", WHY),
}


@contextmanager
def standins(file: str, work: Path, env: dict[str, str], cache: Path) -> Iterator[None]:
    folder = cache / "weights"
    folder.mkdir(parents=True, exist_ok=True)
    env["DOCS_WEIGHTS"] = str(folder)
    yield


def tiny(env: dict[str, str], name: str, build) -> Path:
    """``$DOCS_WEIGHTS/name``, made by ``build(folder)`` the first time any module asks for it
    (built in a temporary folder and renamed, so a half-built model is never found there)."""
    folder = Path(env["DOCS_WEIGHTS"]) / name
    if not folder.exists():
        part = folder.with_name(f".{name}.part")
        if part.is_dir():  # a build that a killed session left half done
            import shutil

            shutil.rmtree(part)
        elif part.exists():
            part.unlink()
        build(part)
        part.rename(folder)
    return folder
