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


@pytest.fixture(scope="session")
def inception_file(tmp_path_factory):
    """pytorch-fid's file name, random weights of the network's shapes."""
    torch = pytest.importorskip("torch")
    from medibench.analysis._nets import FIDInceptionV3
    from medibench.analysis.features import INCEPTION_FILE

    torch.manual_seed(0)
    net = FIDInceptionV3()
    for m in net.modules():  # non-trivial batch-norm statistics
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    state = {k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    path = tmp_path_factory.mktemp("fid") / INCEPTION_FILE
    torch.save(state, path)
    return path


@pytest.fixture(scope="session")
def lpips_dir(tmp_path_factory):
    """LPIPS AlexNet files as torchvision and lpips name them, random weights."""
    torch = pytest.importorskip("torch")
    from medibench.analysis._nets import LPIPSNet

    torch.manual_seed(1)
    net = LPIPSNet("alex")
    for i in range(5):
        getattr(net, f"lin{i}").model[1].weight.data.uniform_(0, 1)  # LPIPS keeps them >= 0
    folder = tmp_path_factory.mktemp("lpips")
    backbone = {k: v for k, v in net.state_dict().items() if k.startswith("features.")}
    backbone["classifier.1.weight"] = torch.zeros(4, 4)  # torchvision's file has a classifier
    torch.save(backbone, folder / "alexnet-owt-7be5be79.pth")
    torch.save(
        {k: v for k, v in net.state_dict().items() if k.startswith("lin")}, folder / "alex.pth"
    )
    return folder


@pytest.fixture(scope="session")
def dinov2_dir(tmp_path_factory):
    """A tiny random DINOv2 with its image processor, saved as transformers saves them."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.Dinov2Config(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        image_size=28,
        patch_size=14,
    )
    folder = tmp_path_factory.mktemp("dino") / "dinov2-tiny"
    transformers.Dinov2Model(cfg).save_pretrained(folder)
    transformers.BitImageProcessor(
        size={"shortest_edge": 28},
        crop_size={"height": 28, "width": 28},
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
    ).save_pretrained(folder)
    return folder
