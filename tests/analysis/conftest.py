"""A tiny randomly initialised InstructPix2Pix (the models tests' builder) for these tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_ip2p(tmp_path_factory):
    pytest.importorskip("diffusers")
    from tests.models.test_diffusers import build_tiny_ip2p

    return build_tiny_ip2p(tmp_path_factory.mktemp("weights") / "tiny-ip2p")


@pytest.fixture(scope="session")
def ip2p_model(tiny_ip2p):
    import torch

    from medibench.models.diffusers import InstructPix2PixModel

    torch.set_num_threads(1)
    return InstructPix2PixModel(str(tiny_ip2p), steps=3, resolution=None)
