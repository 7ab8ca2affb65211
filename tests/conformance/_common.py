"""What every conformance builder shares: the text model's sizes, saving in the Hub layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TEXT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 512,
        "initializer_range": 0.5}  # fmt: skip
CLIP = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "image_size": 32, "patch_size": 8}  # fmt: skip


def ids(tok: Any, *names: str) -> list[int]:
    """The ids of ``names`` in ``tok``."""
    return [tok.convert_tokens_to_ids(n) for n in names]


def save(folder: Path, model: Any, processor: Any, *, eos: list[int], bos: int | None,
         pad: int | None) -> Path:  # fmt: skip
    """Save the model (its generation config with the Hub's stop ids) and the processor."""
    model.generation_config.eos_token_id = eos if len(eos) > 1 else eos[0]
    model.generation_config.bos_token_id = bos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def make_model(cls: Any, config: Any, seed: int = 0) -> Any:
    """``cls(config)`` with weights drawn from ``seed``, in eval mode."""
    import torch

    torch.manual_seed(seed)
    return cls(config).eval()


QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]  # fmt: skip
