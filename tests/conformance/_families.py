"""Tiny random-weight models of the image-text-to-text families medical VLMs are built on.

Each builder makes the family's model from its real transformers config class (one or two
layers, hidden sizes of 16-32), its real processor, image processor and a word-level tokenizer
with the family's special tokens, its chat template written in the family's format where the
Hub repo ships one, and a generation config with the Hub's stop ids; then saves it all with
``save_pretrained`` into ``folder`` (the Hub layout). ``FAMILIES`` maps a family's name to its
builder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from medibench.models._hf_processor import images_only
from tests.conformance import _templates as T
from tests.conformance._common import CLIP, QWEN_SPECIALS, TEXT, ids, make_model, save
from tests.conformance._tokenizer import word_tokenizer


def build_llava(folder: Path) -> Path:
    """LLaVA-1.5 (``llava-hf/llava-1.5-7b-hf``): CLIP + Llama, ``USER: <image>\\n...
    ASSISTANT:``."""
    import transformers as tf

    tok = word_tokenizer(["<s>", "</s>", "<pad>", "<image>"], bos="<s>", eos="</s>", pad="<pad>")
    processor = tf.LlavaProcessor(
        image_processor=tf.CLIPImageProcessorPil(size={"shortest_edge": 32},
                                                 crop_size={"height": 32, "width": 32}),
        tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
        image_token="<image>", num_additional_image_tokens=1, chat_template=T.LLAVA_15,
    )  # fmt: skip
    s, e, p, img = ids(tok, "<s>", "</s>", "<pad>", "<image>")
    config = tf.LlavaConfig(
        vision_config=tf.CLIPVisionConfig(**CLIP),
        text_config=tf.LlamaConfig(vocab_size=len(tok), bos_token_id=s, eos_token_id=e,
                                   pad_token_id=p, **TEXT),
        image_token_index=img, vision_feature_select_strategy="default", vision_feature_layer=-1,
    )  # fmt: skip
    model = make_model(tf.LlavaForConditionalGeneration, config)
    return save(folder, model, processor, eos=[e], bos=s, pad=p)


def build_llava_next(folder: Path) -> Path:
    """LLaVA-NeXT (``llava-hf/llava-v1.6-mistral-7b-hf``): any-resolution tiles, Mistral."""
    import transformers as tf

    tok = word_tokenizer(["<s>", "</s>", "<image>", "[INST]", "[/INST]"], bos="<s>",
                         eos="</s>", pad=None)  # fmt: skip
    grid = [[32, 32], [32, 64], [64, 32]]
    processor = tf.LlavaNextProcessor(
        image_processor=tf.LlavaNextImageProcessorPil(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32},
            image_grid_pinpoints=grid),
        tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
        image_token="<image>", num_additional_image_tokens=1, chat_template=T.LLAVA_NEXT_MISTRAL,
    )  # fmt: skip
    s, e, img = ids(tok, "<s>", "</s>", "<image>")
    config = tf.LlavaNextConfig(
        vision_config=tf.CLIPVisionConfig(**CLIP),
        text_config=tf.MistralConfig(vocab_size=len(tok), bos_token_id=s, eos_token_id=e,
                                     **TEXT),
        image_token_index=img, image_grid_pinpoints=grid,
        vision_feature_select_strategy="default", vision_feature_layer=-1,
    )  # fmt: skip
    model = make_model(tf.LlavaNextForConditionalGeneration, config)
    return save(folder, model, processor, eos=[e], bos=s, pad=None)


def _qwen_tokenizer() -> Any:
    return word_tokenizer(QWEN_SPECIALS, bos=None, eos="<|im_end|>", pad="<|endoftext|>")


def _qwen_vl(folder: Path, kind: str) -> Path:
    import transformers as tf

    tok = _qwen_tokenizer()
    end, im_end, vs, ve, ip, vp = ids(
        tok, "<|endoftext|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
        "<|video_pad|>")  # fmt: skip
    image_processor = tf.Qwen2VLImageProcessorPil(min_pixels=16 * 16, max_pixels=32 * 32,
                                                  patch_size=8, merge_size=2)  # fmt: skip
    tokens = {"image_token_id": ip, "video_token_id": vp, "vision_start_token_id": vs,
              "vision_end_token_id": ve}  # fmt: skip
    text = {**TEXT, "vocab_size": len(tok), "bos_token_id": end, "eos_token_id": im_end,
            "pad_token_id": end}  # fmt: skip
    vision = {"depth": 1, "num_heads": 2, "patch_size": 8, "spatial_merge_size": 2,
              "temporal_patch_size": 2, "in_channels": 3}  # fmt: skip
    if kind == "qwen2_vl":
        config = tf.Qwen2VLConfig(
            text_config={**text, "rope_parameters": {"rope_type": "default",
                                                     "mrope_section": [2, 3, 3]}},
            vision_config={**vision, "embed_dim": 16, "hidden_size": 32, "mlp_ratio": 2},
            **tokens)  # fmt: skip
        cls, proc = tf.Qwen2VLForConditionalGeneration, tf.Qwen2VLProcessor
    elif kind == "qwen2_5_vl":
        config = tf.Qwen2_5_VLConfig(
            text_config={**text, "rope_parameters": {"rope_type": "default",
                                                     "mrope_section": [2, 3, 3]}},
            vision_config={**vision, "hidden_size": 16, "intermediate_size": 32,
                           "out_hidden_size": 32, "window_size": 16,
                           "fullatt_block_indexes": [0]},
            **tokens)  # fmt: skip
        cls, proc = tf.Qwen2_5_VLForConditionalGeneration, tf.Qwen2_5_VLProcessor
    else:
        config = tf.Qwen3VLConfig(
            text_config={**text, "head_dim": 16,
                         "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3],
                                             "mrope_interleaved": True}},
            vision_config={**vision, "hidden_size": 16, "intermediate_size": 32,
                           "out_hidden_size": 32, "num_position_embeddings": 16,
                           "deepstack_visual_indexes": [0]},
            **tokens)  # fmt: skip
        cls, proc = tf.Qwen3VLForConditionalGeneration, tf.Qwen3VLProcessor
    processor = images_only(proc)(image_processor=image_processor, tokenizer=tok,
                                  chat_template=T.QWEN2_VL)  # fmt: skip
    model = make_model(cls, config)
    return save(folder, model, processor, eos=[im_end, end], bos=end, pad=end)


def build_qwen2_vl(folder: Path) -> Path:
    """Qwen2-VL (``Qwen/Qwen2-VL-2B-Instruct``): ChatML, stops at ``<|im_end|>``."""
    return _qwen_vl(folder, "qwen2_vl")


def build_qwen2_5_vl(folder: Path) -> Path:
    """Qwen2.5-VL (``Qwen/Qwen2.5-VL-3B-Instruct``): windowed vision attention."""
    return _qwen_vl(folder, "qwen2_5_vl")


def build_qwen3_vl(folder: Path) -> Path:
    """Qwen3-VL (``Qwen/Qwen3-VL-2B-Instruct``): deepstack vision features, interleaved MRoPE."""
    return _qwen_vl(folder, "qwen3_vl")


from tests.conformance._families_more import (  # noqa: E402 - they share _common
    build_gemma3,
    build_idefics3,
    build_internvl,
    build_llava_onevision,
    build_mllama,
    build_paligemma,
    build_smolvlm,
)

#: The families' builders, by name.
FAMILIES: dict[str, Callable[[Path], Path]] = {
    "llava": build_llava,
    "llava_next": build_llava_next,
    "llava_onevision": build_llava_onevision,
    "qwen2_vl": build_qwen2_vl,
    "qwen2_5_vl": build_qwen2_5_vl,
    "qwen3_vl": build_qwen3_vl,
    "gemma3": build_gemma3,
    "paligemma": build_paligemma,
    "idefics3": build_idefics3,
    "smolvlm": build_smolvlm,
    "mllama": build_mllama,
    "internvl": build_internvl,
}
