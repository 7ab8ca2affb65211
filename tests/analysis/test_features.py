"""Feature extractors: weights from local files only, shapes checked, settings recorded."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import torch.nn.functional as F  # noqa: E402

from medibench.analysis._nets import FIDInceptionV3, LPIPSNet  # noqa: E402
from medibench.analysis.features import (  # noqa: E402
    INCEPTION_FILE,
    ExtractorWeightsError,
    load_extractor,
)

torch.set_num_threads(1)


def _images(n, shape=(40, 56, 3), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]


def test_inception_has_pytorch_fids_tensor_names_and_shapes():
    state = FIDInceptionV3().state_dict()
    assert tuple(state["Conv2d_1a_3x3.conv.weight"].shape) == (32, 3, 3, 3)
    assert tuple(state["Mixed_5b.branch_pool.conv.weight"].shape) == (32, 192, 1, 1)
    assert tuple(state["Mixed_6b.branch7x7_2.conv.weight"].shape) == (128, 128, 1, 7)
    assert tuple(state["Mixed_7c.branch3x3dbl_3b.conv.weight"].shape) == (384, 384, 3, 1)
    assert tuple(state["fc.weight"].shape) == (1008, 2048)
    assert not any("AuxLogits" in k for k in state)
    n = sum(v.numel() for k, v in FIDInceptionV3().named_parameters())
    assert 23_000_000 < n < 26_000_000  # Inception-v3 without the auxiliary head


def test_inception_features_from_a_weights_folder(inception_file):
    ex = load_extractor(f"inception:{inception_file.parent}", size=96)
    imgs = _images(3)
    feats = ex(imgs, batch_size=2)
    assert feats.shape == (3, 2048) and feats.dtype == np.float64 and (feats >= 0).all()
    # by hand: bilinear resize, [-1, 1], the network, as pytorch-fid feeds it
    x = torch.stack([torch.from_numpy(i).permute(2, 0, 1) for i in imgs]).float() / 255
    x = F.interpolate(x, size=(96, 96), mode="bilinear", align_corners=False)
    with torch.inference_mode():
        want = ex.net(2 * x - 1).numpy()
    np.testing.assert_allclose(feats, want, rtol=1e-5, atol=1e-6)
    info = ex.info
    assert info["name"] == "inception-v3-fid" and info["resize"] == "torch-bilinear"
    assert info["size"] == [96, 96] and info["dim"] == 2048
    assert info["weights_sha256"] == [hashlib.sha256(inception_file.read_bytes()).hexdigest()]
    bicubic = load_extractor(f"inception:{inception_file}", size=96, resize="pil-bicubic")
    assert bicubic.info["resize"] == "pil-bicubic"
    assert not np.allclose(bicubic(imgs), feats)  # the resize filter changes the features


def test_missing_inception_weights_name_the_file(tmp_path):
    with pytest.raises(
        ExtractorWeightsError, match=rf"{tmp_path}/{INCEPTION_FILE}.*downloads nothing"
    ):
        load_extractor(f"inception:{tmp_path}")


def test_inception_weights_of_the_wrong_shape_are_refused(inception_file, tmp_path):
    state = torch.load(inception_file, weights_only=True)
    state["Mixed_6b.branch7x7_2.conv.weight"] = torch.zeros(128, 128, 7, 1)
    bad = tmp_path / "bad.pth"
    torch.save(state, bad)
    with pytest.raises(
        ExtractorWeightsError,
        match=r"bad.pth do not fit the pytorch-fid Inception-v3: Mixed_6b.branch7x7_2.conv.weight "
        r"has shape \(128, 128, 7, 1\), the network needs \(128, 128, 1, 7\)",
    ):
        load_extractor(f"inception:{bad}")
    del state["fc.bias"]
    torch.save(state, bad)
    with pytest.raises(ExtractorWeightsError, match=r"1 tensor\(s\) missing \(first fc.bias\)"):
        load_extractor(f"inception:{bad}")


# -- transformers models -------------------------------------------------------------------
def test_transformers_vision_model_from_a_local_folder(dinov2_dir):
    ex = load_extractor(f"dinov2:{dinov2_dir}")
    imgs = _images(3, (30, 30, 3))
    feats = ex(imgs)
    model = transformers.Dinov2Model.from_pretrained(dinov2_dir).eval()
    proc = transformers.AutoImageProcessor.from_pretrained(dinov2_dir)
    with torch.inference_mode():
        want = model(**proc(images=imgs, return_tensors="pt")).pooler_output.numpy()
    np.testing.assert_allclose(feats, want, rtol=1e-5, atol=1e-6)
    assert ex.info["name"] == "dinov2" and ex.info["dim"] == 16 and ex.info["pool"] == "pooler"
    assert ex.info["size"] == {"height": 28, "width": 28}
    assert len(ex.info["weights_sha256"][0]) == 64
    mean = load_extractor(f"hf:{dinov2_dir}", pool="mean")(imgs)
    assert mean.shape == (3, 16) and not np.allclose(mean, feats)


def test_clip_image_embeddings(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.CLIPConfig(
        text_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "vocab_size": 50,
            "max_position_embeddings": 8,
        },
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 16,
        },
        projection_dim=8,
    )
    transformers.CLIPModel(cfg).save_pretrained(tmp_path)
    transformers.CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(tmp_path)
    ex = load_extractor(f"clip:{tmp_path}")
    feats = ex(_images(2, (32, 32, 3)))
    assert feats.shape == (2, 8) and ex.info["pool"] == "image_embeds"


def test_a_folder_without_a_model_names_what_is_missing(tmp_path):
    with pytest.raises(
        ExtractorWeightsError, match=rf"no hf vision model here: {tmp_path}/config.json does not"
    ):
        load_extractor(f"hf:{tmp_path}")
    with pytest.raises(ImportError, match="open_clip needs torchvision"):
        load_extractor("open_clip:ViT-B-32")


# -- LPIPS ----------------------------------------------------------------------------------
def _lpips_reference(folder, a, b):
    """LPIPS v0.1 with AlexNet written out with torch.nn.functional on the saved tensors."""
    bb = torch.load(folder / "alexnet-owt-7be5be79.pth", weights_only=True)
    lin = torch.load(folder / "alex.pth", weights_only=True)
    shift = torch.tensor([-0.030, -0.088, -0.188]).view(1, 3, 1, 1)
    scale = torch.tensor([0.458, 0.448, 0.450]).view(1, 3, 1, 1)

    def taps(x):
        x = (x - shift) / scale
        x = F.relu(F.conv2d(x, bb["features.0.weight"], bb["features.0.bias"], stride=4, padding=2))
        out = [x]
        x = F.max_pool2d(x, 3, 2)
        x = F.relu(F.conv2d(x, bb["features.3.weight"], bb["features.3.bias"], padding=2))
        out.append(x)
        x = F.max_pool2d(x, 3, 2)
        for i in (6, 8, 10):
            x = F.relu(F.conv2d(x, bb[f"features.{i}.weight"], bb[f"features.{i}.bias"], padding=1))
            out.append(x)
        return out

    total = 0.0
    for i, (x, y) in enumerate(zip(taps(a), taps(b), strict=True)):
        x = x.numpy().astype(np.float64)
        y = y.numpy().astype(np.float64)
        nx = x / (np.sqrt((x**2).sum(1, keepdims=True)) + 1e-10)
        ny = y / (np.sqrt((y**2).sum(1, keepdims=True)) + 1e-10)
        w = lin[f"lin{i}.model.1.weight"].numpy().astype(np.float64).reshape(1, -1, 1, 1)
        total = total + ((nx - ny) ** 2 * w).sum(1).mean(axis=(1, 2))
    return total


def test_lpips_alexnet_matches_the_formula_written_out(lpips_dir):
    lp = load_extractor(f"lpips-alex:{lpips_dir}")
    a, b = _images(3, (64, 64, 3), 0), _images(3, (64, 64, 3), 1)
    got = lp(a, b)

    def to(ims):
        return torch.stack([torch.from_numpy(i).permute(2, 0, 1) for i in ims]).float() / 127.5 - 1

    np.testing.assert_allclose(got, _lpips_reference(lpips_dir, to(a), to(b)), rtol=1e-4)
    np.testing.assert_allclose(lp(a, a), 0.0, atol=1e-7)
    np.testing.assert_allclose(lp(b, a), got, rtol=1e-5)
    assert lp.info["name"] == "lpips-alex-v0.1" and lp.info["resize"] == "none"
    at256 = load_extractor(f"lpips-alex:{lpips_dir}", size=256)
    assert at256.info["size"] == [256, 256] and at256.info["resize"] == "torch-bilinear"
    assert at256(_images(1, (40, 50, 3)), _images(1, (70, 30, 3))).shape == (1,)


def test_lpips_files_missing_or_of_the_wrong_shape(lpips_dir, tmp_path):
    with pytest.raises(
        ExtractorWeightsError, match=rf"backbone not found: {tmp_path}/alexnet-owt-7be5be79.pth"
    ):
        load_extractor(f"lpips-alex:{tmp_path}")
    import shutil

    shutil.copy(lpips_dir / "alexnet-owt-7be5be79.pth", tmp_path)
    lin = torch.load(lpips_dir / "alex.pth", weights_only=True)
    lin["lin2.model.1.weight"] = torch.zeros(1, 256, 1, 1)
    torch.save(lin, tmp_path / "alex.pth")
    with pytest.raises(
        ExtractorWeightsError,
        match=r"lin2.model.1.weight has shape \(1, 256, 1, 1\), the network needs \(1, 384, 1, 1\)",
    ):
        load_extractor(f"lpips-alex:{tmp_path}")


def test_vgg_lpips_loads_its_own_layout(tmp_path):
    net = LPIPSNet("vgg")
    torch.save(
        {k: v for k, v in net.state_dict().items() if k.startswith("features.")},
        tmp_path / "vgg16-397923af.pth",
    )
    torch.save(
        {k: v for k, v in net.state_dict().items() if k.startswith("lin")}, tmp_path / "vgg.pth"
    )
    lp = load_extractor(f"lpips-vgg:{tmp_path}")
    assert lp(_images(1, (32, 32, 3)), _images(1, (32, 32, 3), 2)).shape == (1,)


def grey_histogram(images):
    """A module:callable extractor for the test: 8-bin grey histograms."""
    return np.stack([np.histogram(i.mean(-1), bins=8, range=(0, 255))[0] for i in images])


def test_any_module_callable(monkeypatch):
    ex = load_extractor(f"{__name__}:grey_histogram")
    feats = ex(_images(3))
    assert feats.shape == (3, 8) and ex.info["name"] == f"{__name__}:grey_histogram"
    with pytest.raises(ValueError, match="not an importable callable"):
        load_extractor("nosuchmodule:thing")
    ex_bad = load_extractor("numpy:ravel")
    with pytest.raises(ValueError, match=r"returned shape"):
        ex_bad(_images(2))
