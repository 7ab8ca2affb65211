"""What every prompt-tuning method is: an ``nn.Module`` holding the frozen backbone outside its
module tree, returning :class:`Output` (the methods: :mod:`._methods` and :mod:`._deep`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from medibench.prompt_tuning._prompts import template_features

__all__ = ["Method", "Output"]


@dataclass
class Output:
    """``logits`` (B, C); ``terms``: the method's own weighted loss terms (name -> scalar);
    ``teacher``: zero-shot logits (B, C) where the method needs them (ProGrad); ``text``: the
    prompted class text features (C, E), not normalised, for the losses that read them."""

    logits: torch.Tensor
    terms: dict[str, torch.Tensor] = field(default_factory=dict)
    teacher: torch.Tensor | None = None
    text: torch.Tensor | None = None


class Method(nn.Module):
    """The base: holds the frozen backbone, the class names, the template and the options."""

    name = ""
    zs_text: torch.Tensor
    projects_gradient = False  # ProGrad's gradient projection in the training step
    has_class_text = True  # one set of class text features per forward (CoCoOp's is per image)

    def __init__(
        self,
        backbone: Any,
        class_names: Sequence[str],
        template: str,
        options: Mapping[str, Any],
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.backbone = _Frozen(backbone)
        self.class_names, self.template, self.options = list(class_names), template, dict(options)
        self.notes: list[str] = []
        self.register_buffer(
            "zs_text",
            template_features(backbone.text, backbone.tokenizer, class_names, template),
            persistent=False,
        )

    @property
    def bb(self) -> Any:
        return self.backbone.value

    def logits(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """``scale * normalise(image) @ normalise(text).T + bias`` for (B, E) and (C, E)."""
        return (
            self.bb.scale * F.normalize(image, dim=-1) @ F.normalize(text, dim=-1).T + self.bb.bias
        )

    def frozen_image(self, pixels: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.bb.image(pixels)

    def zero_shot_logits(self, pixels: torch.Tensor) -> torch.Tensor:
        """The frozen model's hard-prompt logits (B, C), no gradient."""
        with torch.no_grad():
            return self.logits(self.bb.image(pixels), self.zs_text)

    def end_epoch(self, epoch: int, epochs: int) -> None:
        """Called after each epoch (0-based); PromptSRC keeps its running prompt average."""

    def finish(self) -> None:
        """Called once after the last epoch."""


class _Frozen:
    """Holds the backbone outside the module tree (so it is neither trained nor saved)."""

    def __init__(self, value: Any) -> None:
        self.value = value
