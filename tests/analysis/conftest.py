"""Tiny randomly initialised weights of the feature extractors, in the files and folders the
real ones come in (the tiny InstructPix2Pix, ``tiny_ip2p``, is tests/conftest.py's). The
``build_*`` functions are also the docs-run stand-ins (tests/docs/standins/analysis.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._cache import cached


def build_inception_file(path: Path) -> Path:
    """pytorch-fid's Inception-v3 state dict at ``path`` (its file name is the caller's), random
    weights of the network's shapes with non-trivial batch-norm statistics."""
    import torch

    from medibench.analysis._nets import FIDInceptionV3

    torch.manual_seed(0)
    net = FIDInceptionV3()
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    state = {k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    torch.save(state, path)
    return path


def build_lpips_dir(folder: Path) -> Path:
    """LPIPS AlexNet files as torchvision and lpips name them, random weights, in ``folder``."""
    import torch

    from medibench.analysis._nets import LPIPSNet

    torch.manual_seed(1)
    net = LPIPSNet("alex")
    for i in range(5):
        getattr(net, f"lin{i}").model[1].weight.data.uniform_(0, 1)  # LPIPS keeps them >= 0
    folder.mkdir(parents=True, exist_ok=True)
    backbone = {k: v for k, v in net.state_dict().items() if k.startswith("features.")}
    backbone["classifier.1.weight"] = torch.zeros(4, 4)  # torchvision's file has a classifier
    torch.save(backbone, folder / "alexnet-owt-7be5be79.pth")
    lin = {k: v for k, v in net.state_dict().items() if k.startswith("lin")}
    torch.save(lin, folder / "alex.pth")
    return folder


def build_dinov2_dir(folder: Path) -> Path:
    """A tiny random DINOv2 (Rad-DINO's architecture) with its image processor, saved as
    transformers saves them, in ``folder``."""
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.Dinov2Config(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        image_size=28,
        patch_size=14,
    )
    transformers.Dinov2Model(cfg).save_pretrained(folder)
    transformers.BitImageProcessor(
        size={"shortest_edge": 28},
        crop_size={"height": 28, "width": 28},
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
    ).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def ip2p_model(tiny_ip2p):
    import torch

    from medibench.models.diffusers import InstructPix2PixModel

    torch.set_num_threads(1)
    return InstructPix2PixModel(str(tiny_ip2p), steps=3, resolution=None)


# Each is built once per builder source (tests/_cache.py), shared by workers and sessions, and
# read-only; the networks' shapes come from medibench.analysis._nets.
_NETS = ("medibench.analysis._nets",)


def _inception_folder(folder: Path) -> None:
    from medibench.analysis.features import INCEPTION_FILE

    folder.mkdir(parents=True)
    build_inception_file(folder / INCEPTION_FILE)


@pytest.fixture(scope="session")
def inception_file():
    """pytorch-fid's file name, random weights of the network's shapes."""
    pytest.importorskip("torch")
    from medibench.analysis.features import INCEPTION_FILE

    return cached("fid-inception", _inception_folder, sources=_NETS) / INCEPTION_FILE


@pytest.fixture(scope="session")
def lpips_dir():
    """LPIPS AlexNet files as torchvision and lpips name them, random weights."""
    pytest.importorskip("torch")
    return cached("lpips-alex", build_lpips_dir, sources=_NETS)


@pytest.fixture(scope="session")
def dinov2_dir():
    """A tiny random DINOv2 with its image processor, saved as transformers saves them."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return cached("dinov2-tiny", build_dinov2_dir)
