"""The two towers of a CLIP-family model, opened up so prompts can enter at any layer.

The contract every backbone meets (``module:callable`` backbones return objects that do):

* text tower: ``width`` (token width D), ``depth`` (layers), ``max_length``, ``pad_to_max``
  (SigLIP pads to its full length), ``embed(ids) -> (N, L, D)`` token embeddings and
  ``forward(embeds, pool_index, deep=None, ctx_start=0) -> (N, E)`` projected features, where
  ``deep[j]`` (``(n, D)`` or ``(N, n, D)``) replaces the ``n`` tokens from ``ctx_start`` at the
  input of layer ``j + 1`` (MaPLe's and PromptSRC's deep prompts);
* image tower: ``width``, ``depth``, ``preprocess(images) -> (B, 3, H, W)`` and
  ``forward(pixels, prompts=None, deep=None) -> (B, E)``, where ``prompts`` ``(n, D)`` are
  appended to the token sequence after the position embeddings and ``deep[j]`` replaces those
  last ``n`` tokens at the input of layer ``j + 1``.

:class:`HFTextTower` and :class:`HFImageTower` implement it for ``transformers``' CLIP and
SigLIP, computing exactly what ``CLIPModel``/``SiglipModel`` compute when no prompt is given
(tested against ``get_text_features``/``get_image_features``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["HFImageTower", "HFTextTower"]


class HFTextTower(nn.Module):
    """The text tower of a ``CLIPModel`` (causal, pooled at the end-of-text token, projected)
    or a ``SiglipModel`` (bidirectional, pooled at the last position, ``head``)."""

    def __init__(self, model: Any, family: str) -> None:
        super().__init__()
        self.family = family
        self.text = model.text_model
        self.projection = model.text_projection if family == "clip" else model.text_model.head
        cfg = self.text.config
        self.width, self.depth = cfg.hidden_size, cfg.num_hidden_layers
        self.max_length = cfg.max_position_embeddings
        self.pad_to_max = family == "siglip"
        self.causal = family == "clip"

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text.embeddings.token_embedding(ids)

    def forward(
        self,
        embeds: torch.Tensor,
        pool_index: torch.Tensor,
        deep: Sequence[torch.Tensor] | None = None,
        ctx_start: int = 0,
    ) -> torch.Tensor:
        n, length, _ = embeds.shape
        h = embeds + self.text.embeddings.position_embedding.weight[:length]
        mask = None
        if self.causal:
            mask = torch.full(
                (length, length), torch.finfo(h.dtype).min, dtype=h.dtype, device=h.device
            )
            mask = mask.triu(1)[None, None]
        for j, layer in enumerate(self.text.encoder.layers):
            if deep is not None and 0 < j <= len(deep):
                h = _replace(h, deep[j - 1], ctx_start)
            h = layer(h, mask)
        h = self.text.final_layer_norm(h)
        pooled = h[torch.arange(n), pool_index]
        return self.projection(pooled)


class HFImageTower(nn.Module):
    """The vision tower of a ``CLIPModel`` (class token, pre-norm, projection) or a
    ``SiglipModel`` (no class token, attention-pooling head), with its image processor."""

    def __init__(self, model: Any, family: str, processor: Any) -> None:
        super().__init__()
        self.family = family
        self.vision = model.vision_model
        self.projection: Any = model.visual_projection if family == "clip" else None
        self.processor = processor
        cfg = self.vision.config
        self.width, self.depth = cfg.hidden_size, cfg.num_hidden_layers

    def preprocess(self, images: Sequence[np.ndarray]) -> torch.Tensor:
        """uint8 RGB arrays -> the processor's normalised pixels ``(B, 3, H, W)`` float32."""
        return self.processor(images=list(images), return_tensors="pt").pixel_values

    def forward(
        self,
        pixels: torch.Tensor,
        prompts: torch.Tensor | None = None,
        deep: Sequence[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        h = self.vision.embeddings(pixels)
        n_prompt = 0
        if prompts is not None:
            n_prompt = prompts.shape[-2]
            p = prompts.expand(h.shape[0], -1, -1) if prompts.dim() == 2 else prompts
            h = torch.cat([h, p.to(h.dtype)], dim=1)
        if self.family == "clip":
            h = self.vision.pre_layrnorm(h)
        for j, layer in enumerate(self.vision.encoder.layers):
            if deep is not None and n_prompt and 0 < j <= len(deep):
                h = _replace(h, deep[j - 1], h.shape[1] - n_prompt)
            h = layer(h, None)
        if self.family == "clip":
            return self.projection(self.vision.post_layernorm(h[:, 0, :]))
        return self.vision.head(self.vision.post_layernorm(h))


def _replace(h: torch.Tensor, prompt: torch.Tensor, start: int) -> torch.Tensor:
    """``h`` with tokens ``start : start + n`` replaced by ``prompt`` (``(n, D)``/``(B, n, D)``)."""
    n = prompt.shape[-2]
    p = prompt.expand(h.shape[0], -1, -1) if prompt.dim() == 2 else prompt
    return torch.cat([h[:, :start], p.to(h.dtype), h[:, start + n :]], dim=1)
