"""Tiny random-weight CLIP and SigLIP models built from their real config classes and saved
with ``save_pretrained``: the offline stand-ins the tests, the example and the bench train.

The tokenizer is a character-level ``CLIPTokenizer`` built in memory (no download; SigLIP's
own tokenizer needs ``sentencepiece`` and a trained vocabulary, so the SigLIP stand-in is saved
with this one, which ``AutoTokenizer`` loads the same way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["char_vocab", "save_tiny_backbone"]


def char_vocab() -> dict[str, int]:
    """A character-level CLIP BPE vocabulary: each printable ASCII character, alone and as a
    word end (``</w>``), then the start and end tokens (the end token has the highest id, where
    CLIP pools)."""
    vocab: dict[str, int] = {}
    for ch in map(chr, range(33, 127)):
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab


def save_tiny_backbone(
    folder: str | Path,
    family: str = "clip",
    *,
    seed: int = 0,
    width: int = 32,
    layers: int = 2,
    image_size: int = 32,
) -> Path:
    """Build a random ``CLIPModel`` or ``SiglipModel`` (``width``-d, ``layers`` layers,
    ``image_size`` px, patch 8), save it with its tokenizer and image processor in ``folder``."""
    import torch
    import transformers

    vocab = char_vocab()
    tokenizer = transformers.CLIPTokenizer(vocab=vocab, merges=[], model_max_length=64)
    end = vocab["<|endoftext|>"]
    text = dict(
        vocab_size=len(vocab),
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=2,
        max_position_embeddings=64,
    )
    vision = dict(
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=2,
        image_size=image_size,
        patch_size=8,
    )
    torch.manual_seed(seed)
    config: Any
    model: Any
    processor: Any
    if family == "clip":
        text.update(eos_token_id=end, bos_token_id=vocab["<|startoftext|>"], pad_token_id=end)
        config = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
        model = transformers.CLIPModel(config)
        processor = transformers.CLIPImageProcessor(
            size={"shortest_edge": image_size},
            crop_size={"height": image_size, "width": image_size},
        )
    elif family == "siglip":
        text.update(
            pad_token_id=end,
            eos_token_id=end,
            bos_token_id=vocab["<|startoftext|>"],
            projection_size=width,
        )
        config = transformers.SiglipConfig(text_config=text, vision_config=vision)
        model = transformers.SiglipModel(config)
        processor = transformers.SiglipImageProcessor(
            size={"height": image_size, "width": image_size}
        )
    else:
        raise ValueError(f"family must be 'clip' or 'siglip', got {family!r}")
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
