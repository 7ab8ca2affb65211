"""The starter benchmark, built once per test session (a few seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from medibench.synth import _sources, build_starter


@pytest.fixture(scope="session")
def starter_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_starter(tmp_path_factory.mktemp("starter-a") / "starter")


@pytest.fixture(scope="session")
def starter_root_again(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Read the sources again too: the second build must not depend on the first one's caches.
    for loader in (
        _sources.dicom_image,
        _sources.mni_slice,
        _sources.mni_mask,
        _sources.retina_image,
        _sources._mni_volume,
    ):
        loader.cache_clear()
    return build_starter(tmp_path_factory.mktemp("starter-b") / "starter")
