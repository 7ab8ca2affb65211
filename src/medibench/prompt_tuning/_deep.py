"""Multi-modal deep prompting: MaPLe and PromptSRC.

* MaPLe (Khattak et al., CVPR 2023): text context ``(n, D_t)`` in the first layer and deep
  text prompts ``(n, D_t)`` for layers ``2..J`` (``N(0, 0.02^2)``); the vision prompts of each
  of those layers are linear maps ``D_t -> D_v`` of the text ones (one map per layer), so the
  two branches are coupled. Prompt depth ``J = 9``. As the official code
  (``trainers/maple.py``, ``MultiModalPromptLearner``): the first layer's map is one
  ``nn.Linear``, the deeper layers' maps are copies of a second, separately initialised one.
* PromptSRC (Khattak et al., ICCV 2023): independent text and vision prompts (4 + 4 tokens,
  depth 9 each), regularised towards the frozen model: ``text_weight * L1(t, t_zs)`` on the
  normalised class features, ``image_weight * L1(v, v_zs)`` on the normalised image features
  and ``KL(zero-shot || prompted) / (B * C)`` on the logits; the frozen text features ``t_zs``
  (in the L1 term and the zero-shot logits) are the teacher of the official code
  (``trainers/promptsrc.py``): the class's text features averaged, before normalising, over
  the ``teacher_templates`` (default the 60 ImageNet templates, :mod:`._templates`); the
  prompts kept at the end are the Gaussian-weighted average (GPA) of each epoch's prompts,
  weights ``N(epoch; gpa_mean, gpa_std)`` over epochs 1..E, normalised.

A depth larger than a tower's layer count is lowered to it and the change recorded in
``notes`` (tiny test backbones have 1-2 layers).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from medibench.prompt_tuning._method import Method, Output
from medibench.prompt_tuning._prompts import ClassPrompts
from medibench.prompt_tuning._templates import teacher_templates

__all__ = ["MaPLe", "PromptSRC"]


class MaPLe(Method):
    name = "maple"

    def __init__(self, *args: Any) -> None:
        g, text, image = self._prompted_towers(*args)
        depth = self._depth("depth", min(text.depth, image.depth))
        self._text_prompts(depth, g)
        self.proj = nn.Linear(text.width, image.width)
        deeper = nn.Linear(text.width, image.width)  # one more draw, as the official code
        self.deep_proj = nn.ModuleList([copy.deepcopy(deeper) for _ in range(depth - 1)])

    def forward(self, pixels: torch.Tensor) -> Output:
        deep_text = list(self.deep_text)
        vision = self.proj(self.prompts.ctx)
        deep_vision = [p(t) for p, t in zip(self.deep_proj, deep_text, strict=True)]
        text = self.prompts(deep=deep_text)
        image = self.bb.image(pixels, prompts=vision, deep=deep_vision)
        return Output(self.logits(image, text), text=text)

    def _prompted_towers(self, *args: Any) -> tuple[torch.Generator, Any, Any]:
        """:class:`Method`'s set-up for a method that prompts both towers (a ResNet image tower
        is refused): the generator (the last argument) and the text and image towers."""
        Method.__init__(self, *args)
        if not getattr(self.bb.image, "takes_prompts", True):
            raise ValueError(
                f"{self.name} prompts the image tower, which {self.bb.spec} (a ResNet) does not "
                "take; use a ViT backbone"
            )
        return args[-1], self.bb.text, self.bb.image

    def _text_prompts(self, depth: int, g: torch.Generator) -> None:
        """The first layer's context (``prompts``) and ``depth - 1`` deep text prompts."""
        text, o = self.bb.text, self.options
        self.prompts = ClassPrompts(
            text,
            self.bb.tokenizer,
            self.class_names,
            self.template,
            n_ctx=o["n_ctx"],
            init=o["init"],
            generator=g,
        )
        self.deep_text = nn.ParameterList(
            [_normal(self.prompts.n_ctx, text.width, g) for _ in range(depth - 1)]
        )

    def _depth(self, key: str, layers: int) -> int:
        depth = int(self.options[key])
        if depth < 1:
            raise ValueError(f"{self.name}: {key} must be at least 1, got {depth}")
        if depth > layers:
            self.notes.append(f"{key} {depth} lowered to the backbone's {layers} layers")
            depth = layers
        return depth


class PromptSRC(MaPLe):
    name = "promptsrc"
    teacher_text: torch.Tensor

    def __init__(self, *args: Any) -> None:
        g, text, image = self._prompted_towers(*args)
        o = self.options
        t_depth = self._depth("text_depth", text.depth)
        v_depth = self._depth("vision_depth", image.depth)
        self._text_prompts(t_depth, g)
        nv = int(o["n_ctx_vision"])
        self.vision = _normal(nv, image.width, g)
        self.deep_vision = nn.ParameterList(
            [_normal(nv, image.width, g) for _ in range(v_depth - 1)]
        )
        self._gpa: dict[str, torch.Tensor] | None = None
        self._gpa_total = 0.0
        templates = teacher_templates(str(o["teacher_templates"]), self.template)
        self.register_buffer("teacher_text", self._teacher(templates), persistent=False)

    def _teacher(self, templates: list[str]) -> torch.Tensor:
        """The frozen class features averaged over ``templates`` (not normalised per
        template, as the official code), then L2-normalised: ``(C, E)``."""
        total = None
        with torch.no_grad():
            for template in templates:
                prompts = ClassPrompts(
                    self.bb.text, self.bb.tokenizer, self.class_names, template, n_ctx=0,
                    init="template",
                )  # fmt: skip
                feats = prompts()
                total = feats if total is None else total + feats
        assert total is not None
        return F.normalize(total / len(templates), dim=-1)

    def forward(self, pixels: torch.Tensor) -> Output:
        text = self.prompts(deep=list(self.deep_text))
        image = self.bb.image(pixels, prompts=self.vision, deep=list(self.deep_vision))
        logits = self.logits(image, text)
        if not self.training:
            return Output(logits, text=text)
        with torch.no_grad():
            zs_image = F.normalize(self.bb.image(pixels), dim=-1)
            zs_logits = self.logits(zs_image, self.teacher_text)
        o = self.options
        terms = {
            "scl_text": o["text_weight"] * F.l1_loss(F.normalize(text, dim=-1), self.teacher_text),
            "scl_image": o["image_weight"] * F.l1_loss(F.normalize(image, dim=-1), zs_image),
            "scl_logits": F.kl_div(
                F.log_softmax(logits, -1),
                F.log_softmax(zs_logits, -1),
                reduction="sum",
                log_target=True,
            )
            / logits.numel(),
        }
        return Output(logits, terms, text=text)

    def gpa_weight(self, epoch: int, epochs: int) -> float:
        """Epoch ``epoch``'s (0-based) share of the Gaussian prompt average."""
        mean, std = float(self.options["gpa_mean"]), float(self.options["gpa_std"])
        logs = [-0.5 * ((e + 1 - mean) / std) ** 2 for e in range(epochs)]
        top = max(logs)
        return math.exp(logs[epoch] - top) / sum(math.exp(v - top) for v in logs)

    def end_epoch(self, epoch: int, epochs: int) -> None:
        w = self.gpa_weight(epoch, epochs)
        state = {k: v.detach().clone() for k, v in self.state_dict().items()}
        if self._gpa is None:
            self._gpa = {k: w * v for k, v in state.items()}
        else:
            for k, v in state.items():
                self._gpa[k] += w * v
        self._gpa_total += w

    def finish(self) -> None:
        if self._gpa is not None and self._gpa_total > 0:
            self.load_state_dict({k: v / self._gpa_total for k, v in self._gpa.items()})

    def gpa_state(self) -> dict[str, Any]:
        """The running average, for a checkpoint."""
        return {"sum": self._gpa, "total": self._gpa_total}

    def load_gpa_state(self, state: dict[str, Any]) -> None:
        self._gpa, self._gpa_total = state["sum"], float(state["total"])


def _normal(n: int, width: int, g: torch.Generator) -> nn.Parameter:
    """Prompt vectors ``(n, width)`` from ``N(0, 0.02^2)``."""
    return nn.Parameter(torch.randn(n, width, generator=g) * 0.02)
