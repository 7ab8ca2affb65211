from __future__ import annotations

from pathlib import Path

import pytest


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
def tiny_path(tmp_path_factory, synthetic) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from medibench.knowledge_edit._build import TEXT_TEMPLATES
    from medibench.knowledge_edit.tiny_llava import build_tiny_llava, vocabulary

    texts = [t for r in synthetic.requests for p in r.probes for t in (p.question, p.answer)]
    return build_tiny_llava(tmp_path_factory.mktemp("tiny"), vocabulary([*texts, *TEXT_TEMPLATES]))


@pytest.fixture
def tiny(tiny_path):
    from medibench.knowledge_edit import TransformersAnswerer

    return TransformersAnswerer(tiny_path, max_new_tokens=4)


@pytest.fixture(scope="session")
def taught_path(tmp_path_factory, synthetic, tiny_path) -> Path:
    """The tiny model taught the synthetic set's locality probes (right on some before edits)."""
    import shutil

    from medibench.io import read_image
    from medibench.knowledge_edit.tiny_llava import taught_items, teach

    folder = tmp_path_factory.mktemp("taught") / "tiny"
    shutil.copytree(tiny_path, folder)
    teach(folder, taught_items(synthetic, read_image), epochs=15)
    return folder
