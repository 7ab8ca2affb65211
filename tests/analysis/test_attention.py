"""Cross-attention capture on a tiny randomly initialised InstructPix2Pix."""

from __future__ import annotations

import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

import torch.nn.functional as F  # noqa: E402

from medibench.analysis import (  # noqa: E402
    AttentionOptions,
    NoCrossAttentionError,
    WordNotInInstructionError,
    capture_attention,
    record_cross_attention,
    select_word,
)
from medibench.analysis._recorder import CrossAttentionRecord  # noqa: E402
from medibench.analysis.attention import heatmap_from_record, latent_grid  # noqa: E402

INSTRUCTION = "remove the lesion"


def _image(shape=(64, 64, 3), seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def test_capture_leaves_the_edited_image_byte_identical(ip2p_model):
    image = _image()
    before = ip2p_model.edit(image, INSTRUCTION, seed=5)
    maps = capture_attention(ip2p_model, image, INSTRUCTION, seed=5, word="lesion")
    after = ip2p_model.edit(image, INSTRUCTION, seed=5)  # processors restored
    assert maps.edited.dtype == np.uint8
    assert maps.edited.tobytes() == before.tobytes() == after.tobytes()
    procs = {type(p).__name__ for p in ip2p_model.pipeline.unet.attn_processors.values()}
    assert procs == {"AttnProcessor2_0"}


def test_maps_sum_to_one_over_tokens_at_every_pixel_and_step(ip2p_model):
    rec = record_cross_attention(ip2p_model, _image(), INSTRUCTION, seed=1, keep_steps=True)
    assert rec.steps == 3 and rec.n_chunks == 3 and rec.chunk == 0 and rec.tokens is None
    assert len(rec.maps) == 4  # down, mid and two up cross-attention layers
    for name, summed in rec.maps.items():
        assert summed.shape[-1] == 16  # every position of the padded prompt
        np.testing.assert_allclose(summed.sum(-1), rec.steps, atol=1e-5)
        steps = rec.per_step[name]
        assert len(steps) == 3
        np.testing.assert_allclose(sum(steps), summed)
        for s in steps:
            np.testing.assert_allclose(s.sum(-1), 1.0, atol=1e-5)


def test_the_chosen_tokens_map_is_the_one_returned(ip2p_model):
    image = _image()
    full = record_cross_attention(ip2p_model, image, INSTRUCTION, seed=2)
    choice = select_word(ip2p_model.pipeline.tokenizer, INSTRUCTION, "lesion")
    assert choice.positions == (3,) and choice.tokens == ("lesion</w>",)
    maps = capture_attention(ip2p_model, image, INSTRUCTION, seed=2, word="lesion", size=(64, 64))
    # by hand: the lesion column of the full record, mean over steps and heads, bilinear to
    # 64x64, mean over layers, min-max
    layers = []
    for m in full.maps.values():
        col = torch.from_numpy(m[..., 3] / full.steps).mean(0)[None, None]
        up = F.interpolate(col, size=(64, 64), mode="bilinear", align_corners=False)
        layers.append(up[0, 0].numpy())
    raw = np.mean(layers, axis=0)
    np.testing.assert_allclose(maps.raw, raw, rtol=1e-12)
    np.testing.assert_allclose(maps.heatmap, (raw - raw.min()) / (raw.max() - raw.min()))
    assert maps.heatmap.min() == 0 and maps.heatmap.max() == 1
    other = capture_attention(ip2p_model, image, INSTRUCTION, seed=2, word="remove")
    assert not np.allclose(other.raw, maps.raw)


def test_sub_word_tokens_are_merged_and_recorded(ip2p_model):
    text = "remove the polyp"  # 'polyp' is not in the tiny vocabulary: five character tokens
    image = _image()
    maps = capture_attention(ip2p_model, image, text, seed=0, word="Polyp")
    assert maps.word.tokens == ("p", "o", "l", "y", "p</w>")
    assert maps.word.positions == (3, 4, 5, 6, 7)
    full = record_cross_attention(ip2p_model, image, text, seed=0)
    by_hand = []
    for m in full.maps.values():
        merged = torch.from_numpy((m[..., 3:8] / full.steps).mean(0).mean(-1))[None, None]
        by_hand.append(F.interpolate(merged, size=(64, 64), mode="bilinear")[0, 0].numpy())
    np.testing.assert_allclose(maps.raw, np.mean(by_hand, 0), rtol=1e-12)
    rec = maps.record()
    assert rec["tokens"] == ["p", "o", "l", "y", "p</w>"] and rec["options"]["steps"] == "mean"
    summed = capture_attention(
        ip2p_model, image, text, seed=0, word="polyp", options=AttentionOptions(token_merge="sum")
    )
    np.testing.assert_allclose(summed.raw, maps.raw * 5, rtol=1e-10)


def test_non_square_maps_keep_height_then_width(ip2p_model):
    image = _image((48, 80, 3))
    maps = capture_attention(ip2p_model, image, INSTRUCTION, seed=0, word="lesion")
    assert maps.heatmap.shape == (48, 80)
    assert set(maps.layers.values()) == {(3, 5)}  # latent 6x10, halved once
    # a record hot in the top-right latent cell gives a map hot in the top-right corner
    hot = np.zeros((1, 3, 5, 1))
    hot[0, 0, 4, 0] = 1.0
    rec = CrossAttentionRecord(np.zeros((1, 1, 3), np.uint8), {"a": hot}, 1, 0, 3, (3,))
    heat = heatmap_from_record(rec, (48, 80), AttentionOptions())
    y, x = np.unravel_index(np.argmax(heat), heat.shape)
    assert y < 16 and x >= 64
    assert latent_grid(6, 10, 15) == (3, 5) and latent_grid(7, 9, 20) == (4, 5)
    with pytest.raises(ValueError, match="fit no downsampling"):
        latent_grid(6, 10, 14)


def test_step_sum_and_bicubic_are_options_and_presets_name_them(ip2p_model):
    image = _image()
    mean = capture_attention(ip2p_model, image, INSTRUCTION, seed=0, word="lesion")
    daam = AttentionOptions.preset("daam")
    assert daam.steps == "sum" and daam.upsample == "bicubic"
    summed = capture_attention(
        ip2p_model, image, INSTRUCTION, seed=0, word="lesion", options=AttentionOptions(steps="sum")
    )
    np.testing.assert_allclose(summed.raw, mean.raw * 3, rtol=1e-10)
    bicubic = capture_attention(ip2p_model, image, INSTRUCTION, seed=0, word="lesion", options=daam)
    assert not np.allclose(bicubic.heatmap, mean.heatmap)
    ups = capture_attention(
        ip2p_model,
        image,
        INSTRUCTION,
        seed=0,
        word="lesion",
        options=AttentionOptions(layers=("up",)),
    )
    assert sorted(ups.layers) == [n for n in mean.layers if n.startswith("up_blocks")]
    with pytest.raises(NoCrossAttentionError, match="max_side=2"):
        capture_attention(
            ip2p_model,
            image,
            INSTRUCTION,
            seed=0,
            word="lesion",
            options=AttentionOptions(max_side=2),
        )
    with pytest.raises(ValueError, match="unknown attention preset 'x'"):
        AttentionOptions.preset("x")
    with pytest.raises(ValueError, match="layers"):
        AttentionOptions(layers=("left",))  # type: ignore[arg-type]


def test_guidance_chunk_is_explicit(ip2p_model):
    image = _image()
    cond = record_cross_attention(ip2p_model, image, INSTRUCTION, seed=0, tokens=[3])
    first = record_cross_attention(ip2p_model, image, INSTRUCTION, seed=0, tokens=[3], chunk=0)
    uncond = record_cross_attention(ip2p_model, image, INSTRUCTION, seed=0, tokens=[3], chunk=2)
    for name in cond.maps:
        np.testing.assert_array_equal(cond.maps[name], first.maps[name])
        assert not np.allclose(cond.maps[name], uncond.maps[name])
    with pytest.raises(ValueError, match="chunk 3 out of range: the batch has 3"):
        record_cross_attention(ip2p_model, image, INSTRUCTION, seed=0, chunk=3)


def test_a_word_absent_from_the_instruction_lists_its_words(ip2p_model):
    with pytest.raises(
        WordNotInInstructionError,
        match=r"word 'tumor' is not in the instruction 'remove the lesion'; "
        r"its words: remove, the, lesion",
    ):
        capture_attention(ip2p_model, _image(), INSTRUCTION, seed=0, word="tumor")


def test_a_word_cut_off_by_the_tokenizer_is_refused(ip2p_model):
    long = "remove the " * 8 + "lesion"  # past the tiny encoder's 16 positions
    with pytest.raises(ValueError, match="past the text encoder's 16 tokens"):
        select_word(ip2p_model.pipeline.tokenizer, long, "lesion")


def test_a_model_without_cross_attention_is_refused(ip2p_model):
    pipe = types.SimpleNamespace(unet=torch.nn.Sequential(torch.nn.Conv2d(8, 4, 1)))
    pipe.tokenizer = ip2p_model.pipeline.tokenizer
    fake = types.SimpleNamespace(pipeline=pipe, _prepare=ip2p_model._prepare)
    with pytest.raises(NoCrossAttentionError, match="has no cross-attention layers"):
        capture_attention(fake, _image(), INSTRUCTION, seed=0, word="lesion")
    with pytest.raises(NoCrossAttentionError, match="not a diffusers text-conditioned pipeline"):
        capture_attention(object(), _image(), INSTRUCTION, seed=0, word="lesion")


def test_attention_that_exposes_no_probabilities_is_refused(ip2p_model):
    from diffusers.models.attention_processor import AttnProcessor2_0

    class Opaque(AttnProcessor2_0):
        pass

    unet = ip2p_model.pipeline.unet
    name = "mid_block.attentions.0.transformer_blocks.0.attn2"
    attn = unet.get_submodule(name)
    original = attn.processor
    attn.set_processor(Opaque())
    try:
        with pytest.raises(NoCrossAttentionError, match="runs through Opaque"):
            record_cross_attention(ip2p_model, _image(), INSTRUCTION, seed=0)
    finally:
        attn.set_processor(original)


def test_transformer_denoisers_with_cross_attention_are_found():
    from diffusers import PixArtTransformer2DModel

    from medibench.analysis._recorder import _block, _cross_attention_layers

    torch.manual_seed(0)
    dit = PixArtTransformer2DModel(
        sample_size=8,
        num_layers=2,
        attention_head_dim=8,
        num_attention_heads=2,
        in_channels=4,
        out_channels=8,
        cross_attention_dim=16,
        caption_channels=16,
        patch_size=2,
        norm_num_groups=2,
    )
    found = _cross_attention_layers(types.SimpleNamespace(), dit)
    assert list(found) == ["transformer_blocks.0.attn2", "transformer_blocks.1.attn2"]
    assert _block("transformer_blocks.0.attn2") is None  # not a UNet block: always kept
    assert latent_grid(8, 8, 16) == (4, 4)  # patch size 2 over an 8x8 latent


def test_the_conditional_chunk_of_each_guidance_layout():
    from medibench.analysis._recorder import _Recorder

    def chunk(n, ip2p, choice="conditional"):
        rec = _Recorder(
            latent=(8, 8), tokens=None, chunk=choice, ip2p=ip2p, max_side=None, keep_steps=False
        )
        return rec._chunk_index(n)

    assert chunk(3, ip2p=True) == 0  # [text + image, image only, unconditional]
    assert chunk(2, ip2p=False) == 1  # [unconditional, conditional]
    assert chunk(1, ip2p=False) == 0  # guidance off
    assert chunk(3, ip2p=True, choice=1) == 1
    with pytest.raises(ValueError, match="cannot tell the conditional chunk of a batch of 2"):
        chunk(2, ip2p=True)
    with pytest.raises(ValueError, match="chunk must be an index or 'conditional'"):
        chunk(3, ip2p=True, choice="uncond")
