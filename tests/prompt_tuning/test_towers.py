"""The opened-up towers compute what transformers' CLIPModel and SiglipModel compute; the
prompt layouts put the context where CoOp's class-token positions say."""

from __future__ import annotations

import pytest
import torch
import transformers

from medibench.prompt_tuning._backbone import load_backbone
from medibench.prompt_tuning._prompts import ClassPrompts, template_features
from tests.prompt_tuning.conftest import pixels

NAMES = ["cat", "dog house"]


@pytest.mark.parametrize("family", ["clip", "siglip"])
def test_towers_equal_the_model_features(family, tiny_clip, tiny_siglip):
    folder = tiny_clip if family == "clip" else tiny_siglip
    bb = load_backbone(f"{family}:{folder}")
    model = getattr(transformers, {"clip": "CLIPModel", "siglip": "SiglipModel"}[family])
    model = model.from_pretrained(folder).eval()
    texts = [f"a photo of a {n}." for n in NAMES]
    enc = bb.tokenizer(
        texts,
        padding="max_length" if family == "siglip" else True,
        max_length=64,
        return_tensors="pt",
    )
    px = pixels(bb, 2)
    with torch.no_grad():
        ref_t = model.get_text_features(input_ids=enc.input_ids)
        ref_i = model.get_image_features(pixel_values=px)
        ref_t = getattr(ref_t, "pooler_output", ref_t)
        ref_i = getattr(ref_i, "pooler_output", ref_i)
        mine_t = template_features(bb.text, bb.tokenizer, NAMES, "a photo of a {}.")
        mine_i = bb.image(px)
    assert torch.allclose(mine_t, torch.nn.functional.normalize(ref_t, dim=-1), atol=1e-6)
    assert torch.allclose(mine_i, ref_i, atol=1e-5)
    assert bb.bias == (float(model.logit_bias) if family == "siglip" else 0.0)


def test_class_token_positions(backbone):
    tok = backbone.tokenizer
    cls = tok("cat", add_special_tokens=False)["input_ids"]
    dot = tok(".", add_special_tokens=False)["input_ids"]
    bos, eos = tok.bos_token_id, tok.eos_token_id
    for position, body in (
        ("end", [None] * 4 + cls),
        ("front", cls + [None] * 4),
        ("middle", [None] * 2 + cls + [None] * 2),
    ):
        p = ClassPrompts(
            backbone.text,
            tok,
            ["cat"],
            "a photo of a {}.",
            n_ctx=4,
            init="random",
            position=position,
            generator=torch.Generator().manual_seed(0),
        )
        seq = [bos] + body + dot + [eos]
        assert p.slots.tolist() == [[i for i, t in enumerate(seq) if t is None]]
        assert [t for t, s in zip(p.ids[0].tolist(), seq, strict=True) if s is not None] == [
            s for s in seq if s is not None
        ]
        assert int(p.pool[0]) == len(seq) - 1
        assert p.ctx.shape == (4, backbone.text.width)


def test_template_context_starts_as_the_hard_prompt(backbone):
    """Context initialised from the template's words: at init the class features are exactly
    the hard prompt's (the slots hold the words' own embeddings)."""
    p = ClassPrompts(
        backbone.text, backbone.tokenizer, NAMES, "a photo of a {}.", n_ctx=None, init="template"
    )
    with torch.no_grad():
        got = torch.nn.functional.normalize(p(), dim=-1)
    want = template_features(backbone.text, backbone.tokenizer, NAMES, "a photo of a {}.")
    assert p.n_ctx == len(backbone.tokenizer("a photo of a", add_special_tokens=False)["input_ids"])
    assert torch.allclose(got, want, atol=1e-6)
    with pytest.raises(ValueError, match="context of 99 tokens initialised from the template"):
        ClassPrompts(
            backbone.text, backbone.tokenizer, NAMES, "a photo of a {}.", n_ctx=99, init="template"
        )
    with pytest.raises(ValueError, match="exactly one"):
        ClassPrompts(backbone.text, backbone.tokenizer, NAMES, "a photo", n_ctx=2, init="random")


def test_bad_backbone_specs(tmp_path):
    with pytest.raises(ValueError, match="expected clip:PATH"):
        load_backbone("nothing")
    with pytest.raises(Exception, match="config.json"):
        load_backbone(f"clip:{tmp_path}")
    with pytest.raises(ValueError, match="cannot import"):
        load_backbone("medibench_no_such_module:make")


def test_hf_spec_reads_the_family_from_the_config(tiny_siglip, tmp_path):
    assert load_backbone(f"hf:{tiny_siglip}").family == "siglip"
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="model_type 'bert' is not a two-tower family"):
        load_backbone(f"hf:{tmp_path}")
