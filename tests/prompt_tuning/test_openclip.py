"""``--backbone open_clip:...``: the six OpenCLIP backbones of MVC-Bench, each a tiny random
model that OpenCLIP made and saved (tests/prompt_tuning/openclip/make_fixtures.py), give the
image and text features OpenCLIP computed for them; bad checkpoints are named."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from medibench.prompt_tuning._backbone import load_backbone
from tests.prompt_tuning.conftest import OPENCLIP, OPENCLIP_SPECS


def reference(name):
    from safetensors.torch import load_file

    return load_file(str(OPENCLIP / name / "reference.safetensors"))


@pytest.mark.parametrize("name", sorted(OPENCLIP_SPECS))
def test_features_equal_openclips(name):
    bb = load_backbone(OPENCLIP_SPECS[name])
    ref = reference(name)
    ids = ref["ids"]
    # OpenCLIP's tokenizers pad with 0 after the end token ([SEP] for BERT)
    end = (
        bb.tokenizer.sep_token_id
        if bb.tokenizer.sep_token_id is not None
        else bb.tokenizer.eos_token_id
    )
    pool = torch.tensor([int((row == end).nonzero()[0]) for row in ids])
    with torch.no_grad():
        image = bb.image(ref["pixels"])
        text = bb.text(bb.text.embed(ids), pool)
    assert torch.allclose(image, ref["image_features"], atol=1e-5, rtol=1e-5)
    assert torch.allclose(text, ref["text_features"], atol=1e-5, rtol=1e-5)
    assert bb.family == "open_clip" and bb.scale == pytest.approx(torch.tensor(2.5).exp().item())


def test_the_tokenizer_gives_openclips_ids():
    bb = load_backbone(OPENCLIP_SPECS["quiltnet"])
    ids = reference("quiltnet")["ids"][1]
    mine = bb.tokenizer("normal skin")["input_ids"]
    assert ids[: len(mine)].tolist() == mine and int(ids[len(mine) :].abs().sum()) == 0


def test_preprocessing_resizes_crops_and_normalises():
    import numpy as np

    bb = load_backbone(OPENCLIP_SPECS["vit-b-16"])
    img = np.full((40, 80, 3), 255, dtype=np.uint8)
    pixels = bb.image.preprocess([img])
    assert pixels.shape == (1, 3, 32, 32)
    expect = (1 - torch.tensor([0.48145466, 0.4578275, 0.40821073])) / torch.tensor(
        [0.26862954, 0.26130258, 0.27577711]
    )
    assert torch.allclose(pixels[0, :, 16, 16], expect, atol=1e-6)


def copy(name, tmp_path):
    return shutil.copytree(OPENCLIP / name, tmp_path / name)


def test_bad_checkpoints_are_named(tmp_path):
    with pytest.raises(ValueError, match="nowhere: no such file or folder"):
        load_backbone(f"open_clip:{tmp_path / 'nowhere'}")
    with pytest.raises(ValueError, match="built-in names download their weights"):
        load_backbone("open_clip:RN50")
    with pytest.raises(ValueError, match="has no open_clip_config.json"):
        load_backbone(f"open_clip:{tmp_path}")
    folder = copy("quiltnet", tmp_path)
    (folder / "open_clip_pytorch_model.bin").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="open_clip_pytorch_model.bin: the weights do not read"):
        load_backbone(f"open_clip:{folder}")


def test_a_setting_not_built_and_a_wrong_shape_are_named(tmp_path):
    folder = copy("quiltnet", tmp_path)
    config = json.loads((folder / "open_clip_config.json").read_text())
    config["model_cfg"]["text_cfg"]["pool_type"] = "eos"
    (folder / "open_clip_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="text_cfg.pool_type='eos' is not built"):
        load_backbone(f"open_clip:{folder}")
    config["model_cfg"]["text_cfg"]["pool_type"] = "argmax"
    config["model_cfg"]["vision_cfg"]["width"] = 24
    (folder / "open_clip_config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError, match="visual.class_embedding has shape \\(16,\\), the architecture \\(24,\\)"
    ):
        load_backbone(f"open_clip:{folder}")


def test_a_missing_tokenizer_and_bert_config_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    folder = copy("vit-b-32", tmp_path)
    for name in ("vocab.json", "merges.txt"):
        (folder / name).unlink()
    with pytest.raises(ValueError, match="no tokenizer in .*vocab.json and merges.txt"):
        load_backbone(f"open_clip:{folder / 'model.pt'}")
    folder = copy("biomedclip", tmp_path)
    (folder / "config.json").unlink()
    with pytest.raises(
        ValueError,
        match="no config.json beside open_clip_config.json and "
        "'microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract' is not in the",
    ):
        load_backbone(f"open_clip:{folder}")
    with pytest.raises(ValueError, match="org/model is not in the local Hugging Face cache"):
        load_backbone("open_clip:hf-hub:org/model")


def test_hub_names_read_the_local_cache(tmp_path, monkeypatch):
    """``open_clip:hf-hub:ORG/NAME`` opens the cached snapshot (written here as the hub client
    lays it out), downloading nothing."""
    cache = tmp_path / "hub"
    repo = cache / "models--wisdomik--QuiltNet-B-32"
    snap = repo / "snapshots" / ("0" * 40)
    shutil.copytree(OPENCLIP / "quiltnet", snap)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    bb = load_backbone("open_clip:hf-hub:wisdomik/QuiltNet-B-32")
    ref = reference("quiltnet")
    with torch.no_grad():
        assert torch.allclose(bb.image(ref["pixels"]), ref["image_features"], atol=1e-5)


def test_medclip_says_what_to_install():
    with pytest.raises(
        ValueError, match="MedCLIP loads through its own package: pip install medclip"
    ):
        load_backbone("medclip:/models/medclip")


def test_prompting_a_resnet_image_tower_is_refused(tmp_path, folder_dataset):
    from medibench.prompt_tuning import TrainSettings, train

    for method in ("maple", "promptsrc"):
        with pytest.raises(
            ValueError, match=f"{method} prompts the image tower, which .*rn50.*a ResNet"
        ):
            train(
                TrainSettings(
                    dataset=str(folder_dataset),
                    backbone=OPENCLIP_SPECS["rn50"],
                    method=method,
                    out=str(tmp_path / method),
                    shots=1,
                    epochs=1,
                )
            )


class _Holder(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def test_openai_torchscript_archives_and_training_checkpoints_load(tmp_path):
    """OpenAI's files are TorchScript archives; OpenCLIP's training checkpoints wrap the state
    dict (``state_dict``, ``module.`` prefixes): both give the same features."""
    folder = copy("vit-b-16", tmp_path)
    state = torch.load(folder / "model.pt", weights_only=True)
    root = _Holder()
    for key, value in state.items():
        *path, leaf = key.split(".")
        module = root
        for part in path:
            if not hasattr(module, part):
                module.add_module(part, _Holder())
            module = getattr(module, part)
        module.register_parameter(leaf, torch.nn.Parameter(value, requires_grad=False))
    torch.jit.script(root).save(str(folder / "ViT-B-16.pt"))
    wrapped = {"epoch": 3, "state_dict": {"module." + k: v for k, v in state.items()}}
    torch.save(wrapped, folder / "epoch_3.pt")
    ref = reference("vit-b-16")
    for name in ("ViT-B-16.pt", "epoch_3.pt"):
        bb = load_backbone(f"open_clip:{folder / name}")
        with torch.no_grad():
            assert torch.allclose(bb.image(ref["pixels"]), ref["image_features"], atol=1e-5)
