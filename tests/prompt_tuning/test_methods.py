"""Each method's forward pass against its definition, on a tiny CLIP: shapes, which
parameters train, values; the backbone never changes (hash)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import transformers

from medibench.prompt_tuning import DEFAULTS
from medibench.prompt_tuning._backbone import fingerprint
from medibench.prompt_tuning._methods import build_method
from medibench.prompt_tuning._train import _projected_backward
from tests.prompt_tuning.conftest import pixels

NAMES = ["benign lesion", "malignant lesion", "normal skin"]
TEMPLATE = "a photo of a {}."
TRAINS = {
    "zero-shot": set(),
    "linear-probe": {"weight", "bias"},
    "coop": {"prompts.ctx"},
    "kgcoop": {"prompts.ctx"},
    "prograd": {"prompts.ctx"},
    "cocoop": {
        "prompts.ctx",
        "meta_net.0.weight",
        "meta_net.0.bias",
        "meta_net.2.weight",
        "meta_net.2.bias",
    },
    "maple": {
        "prompts.ctx",
        "deep_text.0",
        "proj.weight",
        "proj.bias",
        "deep_proj.0.weight",
        "deep_proj.0.bias",
    },
    "promptsrc": {"prompts.ctx", "deep_text.0", "vision", "deep_vision.0"},
}


def make(name, backbone, **options):
    torch.manual_seed(0)  # nn.Linear's initialisation (the trainer seeds it the same way)
    return build_method(
        name,
        backbone,
        NAMES,
        TEMPLATE,
        {**DEFAULTS[name], **options},
        torch.Generator().manual_seed(0),
    )


@pytest.mark.parametrize("name", list(TRAINS))
def test_shapes_trainable_parameters_and_frozen_backbone(name, backbone):
    before = fingerprint(backbone)
    method = make(name, backbone).train()
    px = pixels(backbone, 4)
    out = method(px)
    assert out.logits.shape == (4, 3)
    trainable = {n for n, p in method.named_parameters() if p.requires_grad}
    assert trainable == TRAINS[name]
    assert set(method.state_dict()) == TRAINS[name]  # only what is learned is saved
    assert all(not p.requires_grad for t in (backbone.image, backbone.text) for p in t.parameters())
    if trainable:
        loss = F.cross_entropy(out.logits, torch.tensor([0, 1, 2, 0])) + sum(out.terms.values())
        loss.backward()
        params = [p for p in method.parameters() if p.requires_grad]
        assert all(p.grad is not None for p in params)
        # every parameter gets a gradient (CoCoOp's 1-unit meta-net hidden layer may sit in
        # ReLU's flat part for a batch, so its first layer is not required to be non-zero)
        moved = {
            n for n, p in method.named_parameters() if p.requires_grad and p.grad.abs().sum() > 0
        }
        assert moved >= TRAINS[name] - {"meta_net.0.weight", "meta_net.0.bias"}
        torch.optim.SGD(params, lr=10.0).step()
    assert fingerprint(backbone) == before


def test_zero_shot_equals_clip_logits_per_image(backbone, tiny_clip):
    model = transformers.CLIPModel.from_pretrained(tiny_clip).eval()
    px = pixels(backbone, 3)
    enc = backbone.tokenizer([TEMPLATE.format(n) for n in NAMES], padding=True, return_tensors="pt")
    with torch.no_grad():
        want = model(input_ids=enc.input_ids, pixel_values=px).logits_per_image
        got = make("zero-shot", backbone)(px).logits
        probe = make("linear-probe", backbone)(px).logits
        coop = make("coop", backbone, init="template", n_ctx=None, position="end")(px).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert torch.allclose(probe, want, atol=1e-4)  # W starts at the class features, b at 0
    assert torch.allclose(coop, want, atol=1e-4)  # context starts as the template's words


def test_kgcoop_term_is_w_times_one_minus_mean_cosine(backbone):
    method = make("kgcoop", backbone, w=8.0)
    with torch.no_grad():
        assert float(method(pixels(backbone, 2)).terms["kgcoop"]) == pytest.approx(0.0, abs=1e-6)
        method.prompts.ctx.add_(
            torch.randn(method.prompts.ctx.shape, generator=torch.Generator().manual_seed(1))
        )
        text = F.normalize(method.prompts(), dim=-1)
        want = 8.0 * (1 - (text * method.zs_text).sum(-1).mean())
        got = method(pixels(backbone, 2)).terms["kgcoop"]
    assert float(got) == pytest.approx(float(want), rel=1e-5)


def test_cocoop_without_meta_shift_is_coop(backbone):
    cocoop = make("cocoop", backbone)
    coop = make("coop", backbone, n_ctx=4, init="template", position="end")
    with torch.no_grad():
        cocoop.meta_net[2].weight.zero_()
        cocoop.meta_net[2].bias.zero_()
        coop.prompts.ctx.copy_(cocoop.prompts.ctx)
        px = pixels(backbone, 3)
        assert torch.allclose(cocoop(px).logits, coop(px).logits, atol=1e-4)
        # a shift changes the logits (not a constant one: layer norms remove those)
        cocoop.meta_net[2].bias.copy_(torch.randn(32, generator=torch.Generator().manual_seed(2)))
        assert not torch.allclose(cocoop(px).logits, coop(px).logits, atol=1e-3)


def test_maple_couples_vision_prompts_to_text_prompts(backbone):
    method = make("maple", backbone)
    assert method.notes == ["depth 9 lowered to the backbone's 2 layers"]
    px = pixels(backbone, 2)
    with torch.no_grad():
        deep = [method.deep_text[0]]
        text = method.prompts(deep=deep)
        image = backbone.image(
            px, prompts=method.proj(method.prompts.ctx), deep=[method.deep_proj[0](deep[0])]
        )
        want = backbone.scale * F.normalize(image, dim=-1) @ F.normalize(text, dim=-1).T
        assert torch.allclose(method(px).logits, want, atol=1e-5)
        # the vision prompts come from the projection
        method.proj.bias.add_(torch.randn(32, generator=torch.Generator().manual_seed(3)))
        assert not torch.allclose(method(px).logits, want, atol=1e-3)


def test_promptsrc_terms_and_gaussian_prompt_average(backbone):
    method = make("promptsrc", backbone).train()
    px = pixels(backbone, 2)
    out = method(px)
    with torch.no_grad():
        text = F.normalize(method.prompts(deep=list(method.deep_text)), dim=-1)
        image = F.normalize(
            backbone.image(px, prompts=method.vision, deep=list(method.deep_vision)), dim=-1
        )
        zs_image = F.normalize(backbone.image(px), dim=-1)
        zs = backbone.scale * zs_image @ method.teacher_text.T
        p, q = F.softmax(zs, -1), F.log_softmax(out.logits, -1)
        kl = (p * (p.log() - q)).sum() / out.logits.numel()
    assert float(out.terms["scl_text"]) == pytest.approx(
        25 * float((text - method.teacher_text).abs().mean()), rel=1e-5
    )
    assert float(out.terms["scl_image"]) == pytest.approx(
        10 * float((image - zs_image).abs().mean()), rel=1e-5
    )
    assert float(out.terms["scl_logits"]) == pytest.approx(float(kl), rel=1e-4, abs=1e-7)
    weights = [method.gpa_weight(e, 20) for e in range(20)]
    dens = [math.exp(-0.5 * (e + 1 - 15) ** 2) for e in range(20)]
    assert weights == pytest.approx([d / sum(dens) for d in dens])
    # the kept prompt is the weighted average of the epochs' prompts
    states = []
    for e, value in enumerate([1.0, 3.0]):
        with torch.no_grad():
            method.vision.fill_(value)
        states.append(value)
        method.end_epoch(e, 2)
    method.finish()
    w = [method.gpa_weight(e, 2) for e in range(2)]
    assert float(method.vision[0, 0]) == pytest.approx(w[0] * 1.0 + w[1] * 3.0)


def test_prograd_projects_only_conflicting_gradients():
    p = torch.nn.Parameter(torch.zeros(2))
    q = torch.nn.Parameter(torch.zeros(2))
    loss = (p * torch.tensor([1.0, 0.0])).sum() + (q * torch.tensor([1.0, 2.0])).sum()
    general = (p * torch.tensor([-1.0, 1.0])).sum() + (q * torch.tensor([1.0, 1.0])).sum()
    _projected_backward([p, q], loss, general, 1.0)
    # p: g = (1, 0), u = (-1, 1)/sqrt2, g.u < 0 -> g - (g.u) u = (0.5, 0.5); q: agrees, unchanged
    assert p.grad.tolist() == pytest.approx([0.5, 0.5])
    assert q.grad.tolist() == pytest.approx([1.0, 2.0])


@pytest.mark.parametrize("name", list(TRAINS))
def test_every_method_trains_on_siglip(name, tiny_siglip):
    from medibench.prompt_tuning._backbone import load_backbone

    bb = load_backbone(f"siglip:{tiny_siglip}")
    before = fingerprint(bb)
    method = make(name, bb).train()
    out = method(pixels(bb, 2))
    assert out.logits.shape == (2, 3)
    assert {n for n, p in method.named_parameters() if p.requires_grad} == TRAINS[name]
    if TRAINS[name]:
        loss = F.cross_entropy(out.logits, torch.tensor([0, 2])) + sum(out.terms.values())
        loss.backward()
        assert all(p.grad is not None for p in method.parameters())
    assert fingerprint(bb) == before


def _hf_teacher(tiny_clip, templates):
    """PromptSRC's teacher restated on transformers' own CLIPModel: the class text features
    of every template, averaged unnormalised, then normalised."""
    model = transformers.CLIPModel.from_pretrained(tiny_clip)
    tok = transformers.AutoTokenizer.from_pretrained(tiny_clip)
    feats = []
    with torch.no_grad():
        for template in templates:
            batch = tok([template.format(n) for n in NAMES], padding=True, return_tensors="pt")
            out = model.get_text_features(**batch)
            feats.append(getattr(out, "pooler_output", out))
    return F.normalize(torch.stack(feats).mean(0), dim=-1)


def test_promptsrc_teacher_averages_the_imagenet_templates(backbone, tiny_clip, tmp_path):
    from medibench.prompt_tuning._templates import IMAGENET60

    assert (
        len(IMAGENET60) == 60 and IMAGENET60[0] == TEMPLATE and IMAGENET60[-1] == "itap of the {}."
    )
    method = make("promptsrc", backbone)
    assert torch.allclose(method.teacher_text, _hf_teacher(tiny_clip, IMAGENET60), atol=1e-5)
    single = make("promptsrc", backbone, teacher_templates="template")
    assert torch.allclose(single.teacher_text, method.zs_text, atol=1e-6)
    assert not torch.allclose(single.teacher_text, method.teacher_text, atol=1e-3)
    path = tmp_path / "mine.txt"
    path.write_text("# two of them\nan image of {}.\n\na scan of {}.\n")
    mine = make("promptsrc", backbone, teacher_templates=str(path))
    want = _hf_teacher(tiny_clip, ["an image of {}.", "a scan of {}."])
    assert torch.allclose(mine.teacher_text, want, atol=1e-5)


def test_bad_teacher_template_files_are_named(backbone, tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("a photo of a {}.\nno class here\n")
    with pytest.raises(
        ValueError, match="bad.txt line 2: 'no class here' must contain exactly one"
    ):
        make("promptsrc", backbone, teacher_templates=str(path))
    with pytest.raises(ValueError, match="--teacher-templates 'imagenet80': not imagenet60"):
        make("promptsrc", backbone, teacher_templates="imagenet80")
    path.write_text("# nothing\n")
    with pytest.raises(ValueError, match="bad.txt: no template"):
        make("promptsrc", backbone, teacher_templates=str(path))


def test_maple_deeper_projections_are_one_separate_draw(backbone):
    method = make("maple", backbone)
    torch.manual_seed(0)
    first, second = torch.nn.Linear(32, 32), torch.nn.Linear(32, 32)
    assert torch.equal(method.proj.weight, first.weight)
    assert torch.equal(method.deep_proj[0].weight, second.weight)
    assert torch.equal(method.deep_proj[0].bias, second.bias)
