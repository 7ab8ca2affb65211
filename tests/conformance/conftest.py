"""Session fixtures: each family's tiny model, built once and saved in the Hub layout, and a
copy taught one answer (:data:`QUESTION` about :func:`image` -> :data:`TARGET`) by ft."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

QUESTION = "what is shown ?"
TARGET = "lung"


def image(seed: int = 0, shape: tuple[int, int] = (20, 24)) -> np.ndarray:
    """A random uint8 RGB image."""
    return np.random.default_rng(seed).integers(0, 256, (*shape, 3), dtype=np.uint8)


@pytest.fixture(scope="session")
def family_folder(tmp_path_factory):
    """``family_folder(name) -> Path``: the family's tiny model folder (built on first use)."""
    pytest.importorskip("transformers")
    from tests.conformance._families import FAMILIES

    root = tmp_path_factory.mktemp("conformance")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = FAMILIES[name](root / name)
        return built[name]

    return get


@pytest.fixture(scope="session")
def taught_folder(tmp_path_factory, family_folder):
    """``taught_folder(name) -> Path``: a copy of the family's model edited by ft (weights
    saved) to answer :data:`QUESTION` about ``image()`` with :data:`TARGET`."""
    from medibench.knowledge_edit import TransformersAnswerer, load_editor
    from medibench.knowledge_edit._editors import EditCase

    root = tmp_path_factory.mktemp("taught")
    taught: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in taught:
            folder = root / name
            shutil.copytree(family_folder(name), folder)
            model = TransformersAnswerer(folder, max_new_tokens=6)
            editor = load_editor("ft", {"max_steps": 200})
            editor.edit(model, EditCase("teach", image(), QUESTION, TARGET))
            model.model.save_pretrained(folder)
            taught[name] = folder
        return taught[name]

    return get
