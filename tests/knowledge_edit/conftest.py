"""The synthetic task set and the tiny LLaVA, plain and taught: the models are built once per
builder source and data (tests/_cache.py), shared by workers and sessions, and read-only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._cache import cached, digest

_TINY_SOURCES = ("medibench.knowledge_edit.tiny_llava",)


@pytest.fixture(autouse=True)
def _one_thread():
    try:
        import torch
    except ImportError:  # the tests without a model still run
        return
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory):
    from medibench.knowledge_edit._synthetic import synthetic_taskset

    return synthetic_taskset(tmp_path_factory.mktemp("synthetic"), 6, seed=0)


@pytest.fixture(scope="session")
def tiny_path(synthetic) -> Path:
    """The tiny LLaVA whose vocabulary holds the synthetic set's words (read-only)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from medibench.knowledge_edit._build import TEXT_TEMPLATES
    from medibench.knowledge_edit.tiny_llava import build_tiny_llava, vocabulary

    texts = [t for r in synthetic.requests for p in r.probes for t in (p.question, p.answer)]
    words = vocabulary([*texts, *TEXT_TEMPLATES])

    def build(folder: Path) -> None:
        build_tiny_llava(folder, words)

    return cached("tiny-llava", build, sources=_TINY_SOURCES, salt=json.dumps(words))


@pytest.fixture
def tiny(tiny_path):
    from medibench.knowledge_edit import TransformersAnswerer

    return TransformersAnswerer(tiny_path, max_new_tokens=4)


@pytest.fixture(scope="session")
def taught_path(synthetic, tiny_path) -> Path:
    """The tiny model taught the synthetic set's locality probes (right on some before edits;
    read-only). Its key: the tiny model's folder and every file of the task set."""
    import shutil

    from medibench.io import read_image
    from medibench.knowledge_edit.tiny_llava import taught_items, teach

    def build(folder: Path) -> None:
        shutil.copytree(tiny_path, folder)
        teach(folder, taught_items(synthetic, read_image), epochs=15)

    salt = f"{tiny_path.name} {digest(synthetic.root)}"
    return cached("taught-llava", build, sources=_TINY_SOURCES, salt=salt)


@pytest.fixture(scope="session")
def synthetic24(tmp_path_factory):
    """The README's setting: 24 synthetic edits (``medibench edit tasks --synthetic 24``)."""
    from medibench.knowledge_edit._synthetic import synthetic_taskset

    return synthetic_taskset(tmp_path_factory.mktemp("synthetic24"), 24, seed=0)


@pytest.fixture(scope="session")
def taught24_path(synthetic24) -> Path:
    """The README's tiny LLaVA for the 24-edit set (``python -m medibench.knowledge_edit.tiny_llava
    TASKS OUT``: its vocabulary, taught the set's locality probes; float32; read-only)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from medibench.io import read_image
    from medibench.knowledge_edit._build import TEXT_TEMPLATES
    from medibench.knowledge_edit.tiny_llava import (
        build_tiny_llava,
        taught_items,
        teach,
        vocabulary,
    )

    texts = [t for r in synthetic24.requests for p in r.probes for t in (p.question, p.answer)]

    def build(folder: Path) -> None:
        build_tiny_llava(folder, vocabulary([*texts, *TEXT_TEMPLATES]))
        teach(folder, taught_items(synthetic24, read_image), epochs=15)

    return cached("taught-llava-24", build, sources=_TINY_SOURCES, salt=digest(synthetic24.root))
