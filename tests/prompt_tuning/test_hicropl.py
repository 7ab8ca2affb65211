"""HiCroPL: its teacher from an LLM-written prompt file, the two mappings, the fused features
and distillation term against their definitions; it trains with a given prompt file."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from medibench.prompt_tuning import DEFAULTS, TrainSettings, train
from medibench.prompt_tuning._methods import build_method
from medibench.prompt_tuning._prompts import template_features
from tests.prompt_tuning.conftest import pixels

NAMES = ["benign lesion", "malignant lesion", "normal skin"]
DESCRIPTIONS = {
    "benign lesion": ["a round, even mole.", "a small lesion with a smooth border."],
    "malignant lesion": ["an irregular dark lesion with uneven colour."],
    "normal_skin": ["plain skin with no lesion.", "even skin tone.", "smooth skin."],
}


@pytest.fixture
def prompt_file(tmp_path):
    path = tmp_path / "skin_prompt.json"
    path.write_text(json.dumps(DESCRIPTIONS))
    return path


def make(backbone, prompt_file, **options):
    torch.manual_seed(0)
    opts = {**DEFAULTS["hicropl"], "n_ctx": 2, "prompt_file": str(prompt_file), **options}
    return build_method("hicropl", backbone, NAMES, "a photo of a {}.", opts,
                        torch.Generator().manual_seed(0))  # fmt: skip


def test_teacher_averages_each_class_descriptions(backbone, prompt_file):
    method = make(backbone, prompt_file)
    for c, name in enumerate(NAMES):
        texts = DESCRIPTIONS.get(name) or DESCRIPTIONS[name.replace(" ", "_")]
        feats = [template_features(backbone.text, backbone.tokenizer, [t], "{}")[0] for t in texts]
        want = F.normalize(torch.stack(feats).mean(0), dim=-1)
        assert torch.allclose(method.teacher_text[c], want, atol=1e-6)
    assert method.notes == [
        "depth 12 lowered to the backbone's 2 layers",
        "cross_layer 6 lowered to depth - 1 = 1",
        "hicropl teacher: 6 descriptions",
    ]


def test_forward_is_the_fused_features_and_the_distillation(backbone, prompt_file):
    method = make(backbone, prompt_file).train()
    px = pixels(backbone, 3)
    out = method(px)
    with torch.no_grad():
        # layer 0: text prompts pooled into a proxy, the vision prompts attend to it
        proxy = method.text_pool[0](method.text_proxy[0], method.prompts.ctx)
        v0 = method.text_to_image(method.vision[0], proxy)
        # layer 1: vision prompts pooled, the text prompts attend to the proxy
        proxy = method.vision_pool[0](method.vision_proxy[0], method.vision[1])
        t1 = method.image_to_text(method.deep_text[0], proxy)
        text = method.prompts(ctx=method.prompts.ctx, deep=[t1])
        image = backbone.image(px, prompts=v0, deep=[method.vision[1]])
        zs = F.normalize(backbone.image(px), dim=-1)
        text = F.normalize(F.normalize(text, dim=-1) + method.teacher_text, dim=-1)
        image = F.normalize(F.normalize(image, dim=-1) + zs, dim=-1)
        logits = backbone.scale * image @ text.T
        cos_t = (text * method.teacher_text).sum(-1).mean()
        cos_i = (image * zs).sum(-1).mean()
    assert torch.allclose(out.logits, logits, atol=1e-4)
    assert float(out.terms["hicropl_distill"].detach()) == pytest.approx(
        12 * float((1 - cos_t) + (1 - cos_i)), rel=1e-4, abs=1e-6
    )
    out.logits.sum().backward()  # the mapping networks are in the graph (they train)
    assert method.text_to_image.linear_q.weight.grad is not None
    assert method.text_pool[0].attn.in_proj_weight.grad is not None


def test_hicropl_trains_with_a_prompt_file(folder_dataset, tiny_clip, prompt_file, tmp_path):
    out = tmp_path / "run"
    result = train(TrainSettings(
        dataset=str(folder_dataset), backbone=f"clip:{tiny_clip}", method="hicropl",
        out=str(out), shots=2, epochs=2, batch_size=3, augment=False,
        options={"prompt_file": str(prompt_file), "n_ctx": 4}, losses=["ce", "mdca"],
    ))  # fmt: skip
    lines = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3, 4]
    assert all(x["loss"] == pytest.approx(x["ce"] + x["mdca"] + x["hicropl_distill"], rel=1e-6)
               for x in lines)  # fmt: skip
    config = json.loads((out / "config.json").read_text())
    assert config["options"]["optimizer"] == "adam" and config["options"]["adam_eps"] == 1e-3
    assert 0 <= result["accuracy"]["test"] <= 1


def test_bad_prompt_files_are_named(backbone, prompt_file, tmp_path):
    with pytest.raises(ValueError, match="--set prompt_file=FILE"):
        make(backbone, "")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benign lesion": ["x."]}))
    with pytest.raises(ValueError, match="bad.json: no descriptions for class\\(es\\) 'malignant"):
        make(backbone, bad)
    bad.write_text(json.dumps({**DESCRIPTIONS, "benign lesion": []}))
    with pytest.raises(ValueError, match="class 'benign lesion' needs a non-empty list"):
        make(backbone, bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: does not read as JSON"):
        make(backbone, bad)
    with pytest.raises(ValueError, match="heads=3 does not divide the text tower's width 32"):
        make(backbone, prompt_file, heads=3)
