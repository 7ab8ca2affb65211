"""Session fixtures: each family's tiny model, built once and saved in the Hub layout, and a
copy taught one answer (:data:`QUESTION` about :func:`image` -> :data:`TARGET`) by ft. Both are
built once per builder source (tests/_cache.py), shared by workers and sessions: read-only."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

QUESTION = "what is shown ?"
TARGET = "lung"

#: What shapes a family's saved folder besides its builder's own module.
_FAMILY_SOURCES = (
    "tests.conformance._common",
    "tests.conformance._templates",
    "tests.conformance._tokenizer",
    "tests.conformance._families",
    "tests.conformance._families_more",
    "medibench.models._hf_processor",
)
#: What shapes a taught copy besides the family's folder (its key is the salt).
_TEACHING_SOURCES = (
    "medibench.knowledge_edit._editors",
    "medibench.knowledge_edit._editing",
    "medibench.knowledge_edit._answerers",
)


def image(seed: int = 0, shape: tuple[int, int] = (20, 24)) -> np.ndarray:
    """A random uint8 RGB image."""
    return np.random.default_rng(seed).integers(0, 256, (*shape, 3), dtype=np.uint8)


@pytest.fixture(scope="session")
def family_folder():
    """``family_folder(name) -> Path``: the family's tiny model folder (built on first use)."""
    pytest.importorskip("transformers")
    from tests._cache import cached
    from tests.conformance._families import FAMILIES

    def get(name: str) -> Path:
        return cached(f"vlm-{name}", FAMILIES[name], sources=_FAMILY_SOURCES)

    return get


@pytest.fixture(scope="session")
def taught_folder(family_folder):
    """``taught_folder(name) -> Path``: a copy of the family's model edited by ft (weights
    saved) to answer :data:`QUESTION` about ``image()`` with :data:`TARGET`."""
    from medibench.knowledge_edit import TransformersAnswerer, load_editor
    from medibench.knowledge_edit._editors import EditCase
    from tests._cache import cached

    def get(name: str) -> Path:
        family = family_folder(name)

        def teach(folder: Path) -> None:
            shutil.copytree(family, folder)
            model = TransformersAnswerer(folder, max_new_tokens=6)
            editor = load_editor("ft", {"max_steps": 200})
            editor.edit(model, EditCase("teach", image(), QUESTION, TARGET))
            model.model.save_pretrained(folder)

        return cached(f"vlm-taught-{name}", teach, sources=_TEACHING_SOURCES, salt=family.name)

    return get


@pytest.fixture(scope="session")
def unified_folder() -> Path:
    """The tiny random-weight Janus-Pro of :mod:`tests.conformance._unified` (built once)."""
    pytest.importorskip("transformers")
    from tests._cache import cached
    from tests.conformance._unified import build_janus

    sources = ("tests.conformance._common", "tests.conformance._templates",
               "tests.conformance._tokenizer")  # fmt: skip
    return cached("unified-janus", build_janus, sources=sources)
