"""HiCroPL (Zheng et al., ICCV 2025: hierarchical cross-modal prompt learning), following its
official code (``trainers/hicropl.py`` of zzeoZheng/HiCroPL).

Text prompts ``t_0..t_{J-1}`` (``(n, D_t)``; ``t_0`` is the first layer's context, the rest
``N(0, 0.02^2)``) and vision prompts ``v_0..v_{J-1}`` (``(n, D_v)``, one ``N(0, 0.02^2)`` draw
as their common start) enter every layer of both towers. Knowledge flows both ways between
them:

* layers ``< k`` (``cross_layer``), text to image: each layer's text prompts are pooled into one
  proxy token by attention (LKP: a learned query, ``q + MHA(ln(q), ln(t), ln(t))``, then a
  LayerNorm), and the vision prompts of those layers attend to the ``k`` proxies through the
  knowledge mapper (``q = W_q v``, ``q + MHA(ln(q), ln(W_k p), ln(W_v p))``, then ``q +
  FFN(ln(q))`` with QuickGELU), which gives those layers' vision prompts;
* layers ``>= k``, image to text: the same with the roles swapped.

The frozen teacher is the class's LLM-written descriptions (``prompt_file``: JSON, class name
-> list of sentences, the CuPL/CoPrompt files the official code reads from ``gpt_file/``), each
encoded and L2-normalised, averaged and normalised again. The prompted text and image features
are each normalised, added to the teacher's (text) or the frozen image features (image),
normalised again; logits = scale * cosine. The method's term is ``lambd * ((1 - mean cos(text,
teacher)) + (1 - mean cos(image, frozen image)))``. Defaults: the few-shot config
``vit_b16_c2_ep50_batch32_16ctx_few_shot`` (16 random context tokens, depth 12, cross layer 6,
lambda 12, 8 attention heads, Adam at 0.0025 with eps 1e-3, 50 epochs, batch 32).

Deviations, named: the official forward writes the mapped prompts into the prompt parameters
(``.data.copy_``) and returns the parameters, so no gradient reaches the mapper or LKP networks
and every forward pass (evaluation included) maps the prompts again; here the mapped prompts
are computed in the graph at each forward pass and the parameters are left as learned, so the
networks train and evaluation is repeatable. The official vision prompts and proxy tokens of
all layers share one tensor's storage; here each layer has its own parameter (same start).
A depth larger than the towers is lowered to their layer count and the cross layer to at most
depth - 1 (noted in ``notes``).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from medibench.prompt_tuning._deep import MaPLe
from medibench.prompt_tuning._method import Output
from medibench.prompt_tuning._openclip_towers import QuickGELU
from medibench.prompt_tuning._prompts import template_features

__all__ = ["HiCroPL", "read_class_prompts"]


def read_class_prompts(path: str | Path, class_names: list[str]) -> dict[str, list[str]]:
    """The LLM-written descriptions per class from the JSON file ``path``.

    Raises:
        ValueError: not a JSON object of lists of strings, a class without descriptions.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ValueError(f"hicropl prompt_file {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"hicropl prompt_file {path}: does not read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object mapping class names to lists of sentences")
    out = {}
    missing = []
    for name in class_names:
        texts = data.get(name, data.get(name.replace(" ", "_")))
        if texts is None:
            missing.append(name)
            continue
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{path}: class {name!r} needs a non-empty list of sentences")
        out[name] = texts
    if missing:
        raise ValueError(f"{path}: no descriptions for class(es) {', '.join(map(repr, missing))}")
    return out


class _Pooling(nn.Module):
    """LKP: one learned query attends to a layer's prompts."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)

    def forward(self, query: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        kv = self.ln_1(tokens)
        query = query + self.attn(self.ln_1(query), kv, kv, need_weights=False)[0]
        return self.ln_2(query)


class _Mapper(nn.Module):
    """The multi-scale knowledge mapper: prompts of one modality attend to the other's proxies."""

    def __init__(self, width: int, source: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.linear_q = nn.Linear(width, width)
        self.linear_k, self.linear_v = nn.Linear(source, width), nn.Linear(source, width)
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.ffn = nn.Sequential(
            OrderedDict(
                [
                    ("c_fc", nn.Linear(width, width * 4)),
                    ("gelu", QuickGELU()),
                    ("c_proj", nn.Linear(width * 4, width)),
                ]
            )
        )

    def forward(self, prompts: torch.Tensor, proxies: torch.Tensor) -> torch.Tensor:
        q = self.linear_q(prompts)
        k, v = self.ln_1(self.linear_k(proxies)), self.ln_1(self.linear_v(proxies))
        q = q + self.attn(self.ln_1(q), k, v, need_weights=False)[0]
        return q + self.ffn(self.ln_2(q))


class HiCroPL(MaPLe):
    name = "hicropl"
    teacher_text: torch.Tensor

    def __init__(self, *args: Any) -> None:
        g, text, image = self._prompted_towers(*args)
        o = self.options
        depth = self._depth("depth", min(text.depth, image.depth))
        if depth < 2:
            raise ValueError("hicropl needs a prompt depth of at least 2 (both directions)")
        cross = int(o["cross_layer"])
        if not 1 <= cross:
            raise ValueError(f"hicropl: cross_layer must be at least 1, got {cross}")
        if cross > depth - 1:
            self.notes.append(f"cross_layer {cross} lowered to depth - 1 = {depth - 1}")
            cross = depth - 1
        self.cross = cross
        heads = int(o["heads"])
        for what, width in (("text", text.width), ("image", image.width)):
            if width % heads:
                raise ValueError(
                    f"hicropl: heads={heads} does not divide the {what} tower's width {width}"
                )
        n = o["n_ctx"]
        init = "template" if n is not None and int(n) <= 4 else "random"  # as the official code
        self.options = {**self.options, "init": init}
        self._text_prompts(depth, g)
        start = torch.randn(self.prompts.n_ctx, image.width, generator=g) * 0.02
        self.vision = nn.ParameterList([nn.Parameter(start.clone()) for _ in range(depth)])
        text_proxy = torch.randn(1, text.width, generator=g)
        vision_proxy = torch.randn(1, image.width, generator=g)
        self.text_proxy = nn.ParameterList([nn.Parameter(text_proxy.clone()) for _ in range(cross)])
        self.vision_proxy = nn.ParameterList(
            [nn.Parameter(vision_proxy.clone()) for _ in range(depth - cross)]
        )
        self.text_pool = nn.ModuleList([_Pooling(text.width, heads) for _ in range(cross)])
        self.vision_pool = nn.ModuleList(
            [_Pooling(image.width, heads) for _ in range(depth - cross)]
        )
        self.text_to_image = _Mapper(image.width, text.width, heads)
        self.image_to_text = _Mapper(text.width, image.width, heads)
        if not o.get("prompt_file"):
            raise ValueError(
                "hicropl needs its LLM-written class descriptions: --set prompt_file=FILE (JSON, "
                "class name -> list of sentences)"
            )
        prompts = read_class_prompts(o["prompt_file"], self.class_names)
        teacher = []
        for name in self.class_names:
            feats = template_features(text, self.bb.tokenizer, prompts[name], "{}")
            teacher.append(F.normalize(feats.mean(dim=0), dim=-1))
        self.register_buffer("teacher_text", torch.stack(teacher), persistent=False)
        self.notes.append(f"hicropl teacher: {sum(map(len, prompts.values()))} descriptions")

    def mapped_prompts(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every layer's text and vision prompts after the two mappings (module doc)."""
        text = [self.prompts.ctx, *self.deep_text]
        vision = list(self.vision)
        k, n = self.cross, self.prompts.n_ctx
        pairs = zip(self.text_pool, self.text_proxy, text[:k], strict=True)
        proxies = torch.cat([pool(query, tokens) for pool, query, tokens in pairs])
        early = self.text_to_image(torch.cat(vision[:k]), proxies).view(k, n, -1)
        pairs = zip(self.vision_pool, self.vision_proxy, vision[k:], strict=True)
        proxies = torch.cat([pool(query, tokens) for pool, query, tokens in pairs])
        late = self.image_to_text(torch.cat(text[k:]), proxies).view(len(text) - k, n, -1)
        return text[:k] + list(late), list(early) + vision[k:]

    def forward(self, pixels: torch.Tensor) -> Output:
        text_prompts, vision_prompts = self.mapped_prompts()
        with torch.no_grad():
            zs_image = F.normalize(self.bb.image(pixels), dim=-1)
        text = self.prompts(ctx=text_prompts[0], deep=text_prompts[1:])
        image = self.bb.image(pixels, prompts=vision_prompts[0], deep=vision_prompts[1:])
        text = F.normalize(F.normalize(text, dim=-1) + self.teacher_text, dim=-1)
        image = F.normalize(F.normalize(image, dim=-1) + zs_image, dim=-1)
        logits = self.bb.scale * image @ text.T + self.bb.bias
        if not self.training:
            return Output(logits, text=text)
        cos_t = F.cosine_similarity(text, self.teacher_text, dim=1, eps=1e-7).mean()
        cos_i = F.cosine_similarity(image, zs_image, dim=1, eps=1e-7).mean()
        distill = float(self.options["lambd"]) * ((1 - cos_t) + (1 - cos_i))
        return Output(logits, {"hicropl_distill": distill}, text=text)
