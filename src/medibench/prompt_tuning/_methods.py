"""The prompt-tuning methods: zero-shot, linear probe, CoOp, CoCoOp, KgCoOp, ProGrad (here),
MaPLe, PromptSRC (:mod:`._deep`) and HiCroPL (:mod:`._hicropl`). Each is an ``nn.Module``
whose parameters are only what it learns (the backbone is held outside the module tree and
never trains); ``forward(pixels)`` returns :class:`Output`: logits ``(B, C)`` =
``exp(logit_scale) * cos(image, text) + bias`` and the method's own loss terms.

Defaults (:data:`DEFAULTS`) are the configurations MVC-Bench's scripts run (CoOp
``vit_b16_ep50`` with 16 random context tokens, the class token in the middle; CoCoOp
``vit_b16_c4_ep10_batch1_ctxv1``; KgCoOp ``vit_b16_ep100_ctxv1`` with ``W = 8``; ProGrad
``rn50_ep100`` with ``lambda = 1``, ``T = 1``; MaPLe ``vit_b16_c2_ep5_batch4_2ctx``;
PromptSRC ``vit_b16_c2_ep20_batch4_4+4ctx``), each trained with SGD (momentum 0.9, weight decay
5e-4), a cosine schedule over epochs and one warm-up epoch at the constant rate 1e-5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from medibench.prompt_tuning._deep import MaPLe, PromptSRC
from medibench.prompt_tuning._defaults import DEFAULTS, METHODS
from medibench.prompt_tuning._method import Method, Output
from medibench.prompt_tuning._prompts import ClassPrompts

__all__ = ["DEFAULTS", "METHODS", "Method", "Output", "build_method"]


class ZeroShot(Method):
    """Hard-prompt zero-shot classification: no parameter, no training."""

    name = "zero-shot"

    def forward(self, pixels: torch.Tensor) -> Output:
        return Output(self.logits(self.frozen_image(pixels), self.zs_text))


class LinearProbe(Method):
    """A linear classifier ``W`` (C, E), ``b`` (C) on the normalised frozen image features,
    ``W`` started from the zero-shot class features and ``b`` from 0, logits scaled as CLIP's
    (medibench's choice: CoOp's probe is an L-BFGS logistic regression, which no calibration
    loss can enter)."""

    name = "linear-probe"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.weight = nn.Parameter(self.zs_text.clone())
        self.bias = nn.Parameter(torch.zeros(len(self.class_names)))

    def forward(self, pixels: torch.Tensor) -> Output:
        image = F.normalize(self.frozen_image(pixels), dim=-1)
        return Output(self.bb.scale * (image @ self.weight.T) + self.bias, text=self.weight)


class CoOp(Method):
    """CoOp (Zhou et al., IJCV 2022): one context ``(n_ctx, D)`` shared by all classes."""

    name = "coop"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        o, g = self.options, args[-1]
        self.prompts = ClassPrompts(
            self.bb.text,
            self.bb.tokenizer,
            self.class_names,
            self.template,
            n_ctx=o["n_ctx"],
            init=o["init"],
            position=o.get("position", "end"),
            generator=g,
        )

    def forward(self, pixels: torch.Tensor) -> Output:
        text = self.prompts()
        return Output(self.logits(self.frozen_image(pixels), text), text=text)


class KgCoOp(CoOp):
    """KgCoOp (Yao et al., CVPR 2023): CoOp plus ``w * (1 - mean_c cos(t_c, t_c^zs))``, the
    learned class features kept near the hard prompt's."""

    name = "kgcoop"

    def forward(self, pixels: torch.Tensor) -> Output:
        text = self.prompts()
        cos = F.cosine_similarity(F.normalize(text, dim=-1), self.zs_text, dim=-1, eps=1e-7)
        kg = self.options["w"] * (1.0 - cos.mean())
        return Output(self.logits(self.frozen_image(pixels), text), {"kgcoop": kg}, text=text)


class ProGrad(CoOp):
    """ProGrad (Zhu et al., ICCV 2023): CoOp whose gradient is projected (per parameter) off the
    direction that conflicts with the gradient of ``T^2 * KL(zero-shot || prompted)``."""

    name = "prograd"
    projects_gradient = True

    def forward(self, pixels: torch.Tensor) -> Output:
        image = self.frozen_image(pixels)
        teacher = self.logits(image, self.zs_text).detach()
        text = self.prompts()
        return Output(self.logits(image, text), teacher=teacher, text=text)

    def general_loss(self, out: Output) -> torch.Tensor:
        """``T^2 * mean_i sum_c -softmax(teacher/T) log softmax(logits/T)`` (ProGrad's KL,
        equal to the KL divergence up to the teacher's entropy, same gradient)."""
        t = float(self.options["T"])
        assert out.teacher is not None
        soft = F.softmax(out.teacher / t, dim=-1)
        return -(soft * F.log_softmax(out.logits / t, dim=-1)).sum(-1).mean() * t * t


class CoCoOp(CoOp):
    """CoCoOp (Zhou et al., CVPR 2022): the context shifted per image by a meta-net
    ``Linear(E, E/16) -> ReLU -> Linear(E/16, D)`` of the image feature."""

    name = "cocoop"
    has_class_text = False

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        dim = int(self.zs_text.shape[1])
        hidden = max(1, dim // 16)
        self.meta_net = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, self.prompts.width)
        )

    def forward(self, pixels: torch.Tensor) -> Output:
        image = self.frozen_image(pixels)
        ctx = self.prompts.ctx.unsqueeze(0) + self.meta_net(F.normalize(image, dim=-1)).unsqueeze(1)
        text = F.normalize(self.prompts(ctx), dim=-1).view(len(image), len(self.class_names), -1)
        img = F.normalize(image, dim=-1).unsqueeze(1)
        return Output(self.bb.scale * (img * text).sum(-1) + self.bb.bias)


def build_method(
    name: str,
    backbone: Any,
    class_names: Sequence[str],
    template: str,
    options: Mapping[str, Any],
    generator: torch.Generator,
) -> Method:
    """The method ``name`` (a key of :data:`METHODS`) with ``options`` (its defaults merged)."""
    from medibench.prompt_tuning._hicropl import HiCroPL

    methods = (ZeroShot, LinearProbe, CoOp, CoCoOp, KgCoOp, ProGrad, MaPLe, PromptSRC, HiCroPL)
    table: dict[str, type[Method]] = {m.name: m for m in methods}
    if name not in table:
        raise ValueError(f"unknown method {name!r} (one of {', '.join(METHODS)})")
    return table[name](backbone, class_names, template, options, generator)
