"""A tiny randomly initialised LLaVA (CLIP vision tower + Llama text model) and a word-level
tokenizer, built and saved locally: nothing is downloaded."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

SPECIAL = ("<pad>", "<unk>", "<s>", "</s>", "<image>")
BASE_WORDS = ("user", "assistant", ":", "?", ".", ",", '"', "new", "fact", "answer", "to", "is")


def vocabulary(texts: Iterable[str]) -> list[str]:
    """Special tokens, the prompt's words, then every word of ``texts`` (lower case)."""
    words: dict[str, None] = dict.fromkeys([*SPECIAL, *BASE_WORDS])
    for t in texts:
        for w in re.findall(r"\w+|[^\w\s]", t.lower()):
            words.setdefault(w)
    return list(words)


def build_tiny_llava(folder: Path, words: list[str], *, seed: int = 0) -> Path:
    """Save a tiny LLaVA and its processor (word-level tokenizer) into ``folder``."""
    import torch
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers
    from transformers import (
        CLIPImageProcessorPil,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(w, special=True, normalized=False) for w in SPECIAL])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=fast,
        patch_size=8,
        vision_feature_select_strategy="default",
        image_token="<image>",
        num_additional_image_tokens=1,
    )
    vision = CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
    )
    text = LlamaConfig(
        vocab_size=len(words),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
        initializer_range=0.5,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
