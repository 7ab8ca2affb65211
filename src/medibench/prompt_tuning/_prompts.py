"""Class prompts with learnable context tokens: the text side shared by every method.

A hard template ``"a photo of a {}."`` splits into the words before ``{}`` (``"a photo of
a"``) and after it (``"."``). The token sequence of class ``c`` is the tokenizer's leading
special tokens, then ``n_ctx`` context slots, the template words not replaced by context, the
class name, the words after ``{}`` and the trailing special tokens, padded (to the longest, or
to the full length for SigLIP). Context vectors ``(n_ctx, D)`` are written into the slots:

* ``init="template"`` (CoCoOp, KgCoOp, ProGrad, MaPLe, PromptSRC): the slots replace the first
  ``n_ctx`` template words and start from their token embeddings (MaPLe's two-token context
  replaces "a photo" and keeps "of a"); ``n_ctx=None`` means all of them;
* ``init="random"`` (CoOp): the template's leading words are dropped and the context starts
  from ``N(0, 0.02^2)``.

``position`` places the class name after the context (``"end"``), before it (``"front"``) or
between its two halves (``"middle"``), as CoOp's ``CLASS_TOKEN_POSITION``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import nn

__all__ = ["ClassPrompts", "check_template", "template_features"]

Position = Literal["end", "middle", "front"]


def check_template(template: str) -> tuple[str, str]:
    """``(before, after)`` the one ``{}`` of ``template``."""
    if template.count("{}") != 1:
        raise ValueError(f"template {template!r} must contain exactly one '{{}}' for the class")
    before, after = template.split("{}")
    return before.strip(), after.strip()


class ClassPrompts(nn.Module):
    """The prompts of ``class_names`` for ``text_tower`` (module doc).

    Attributes:
        ctx: the learnable context ``(n_ctx, D)`` (a parameter; absent when ``n_ctx == 0``).
        ids: token ids ``(C, L)`` (slots hold the pad id); ``slots``: the context positions
            ``(C, n_ctx)``; ``pool``: the pooled position per class ``(C,)``;
            ``ctx_start``: the first slot of the ``"end"`` layout (for deep prompts).
    """

    ids: torch.Tensor
    slots: torch.Tensor
    pool: torch.Tensor
    base: torch.Tensor
    ctx: nn.Parameter

    def __init__(
        self,
        text_tower: Any,
        tokenizer: Any,
        class_names: Sequence[str],
        template: str,
        *,
        n_ctx: int | None,
        init: Literal["template", "random"],
        position: Position = "end",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if position not in ("end", "middle", "front"):
            raise ValueError(f"class token position must be end, middle or front, not {position!r}")
        before, after = check_template(template)
        words = _plain(tokenizer, before)
        if n_ctx is None:
            n_ctx = len(words) if init == "template" else 16
        if init == "template" and n_ctx > len(words):
            raise ValueError(
                f"context of {n_ctx} tokens initialised from the template, but {before!r} has "
                f"{len(words)} tokens; lower n_ctx or use a longer template"
            )
        lead, trail = _specials(tokenizer)
        fixed = words[n_ctx:] if init == "template" else []
        tail = _plain(tokenizer, after)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        rows, slots = [], []
        half = n_ctx // 2
        for name in class_names:
            cls = fixed + _plain(tokenizer, name)
            body = {
                "end": [None] * n_ctx + cls,
                "front": cls + [None] * n_ctx,
                "middle": [None] * half + cls + [None] * (n_ctx - half),
            }[position]
            seq = lead + body + tail + trail
            slots.append([len(lead) + i for i, t in enumerate(body) if t is None])
            rows.append([pad if t is None else t for t in seq])
        longest = max(len(r) for r in rows)
        length = text_tower.max_length if text_tower.pad_to_max else longest
        if longest > text_tower.max_length:
            raise ValueError(
                f"a prompt has {longest} tokens, more than the text tower's "
                f"{text_tower.max_length}; shorten the template or the class names"
            )
        ids = torch.tensor([r + [pad] * (length - len(r)) for r in rows], dtype=torch.long)
        pool = [length - 1 if text_tower.pad_to_max else len(r) - 1 for r in rows]
        self.register_buffer("ids", ids, persistent=False)
        self.register_buffer(
            "slots", torch.tensor(slots, dtype=torch.long).view(len(rows), n_ctx), persistent=False
        )
        self.register_buffer("pool", torch.tensor(pool, dtype=torch.long), persistent=False)
        with torch.no_grad():
            self.register_buffer("base", text_tower.embed(ids).detach().clone(), persistent=False)
        self.n_ctx, self.ctx_start, self.width = n_ctx, len(lead), text_tower.width
        self.contiguous = all(row == list(range(len(lead), len(lead) + n_ctx)) for row in slots)
        self.tower = [text_tower]  # a list, so the frozen tower is not a sub-module
        if n_ctx:
            if init == "template":
                with torch.no_grad():
                    start = text_tower.embed(torch.tensor([words[:n_ctx]])).detach()[0].clone()
            else:
                start = torch.randn(n_ctx, self.width, generator=generator) * 0.02
            self.ctx = nn.Parameter(start)

    @property
    def n_classes(self) -> int:
        return int(self.ids.shape[0])

    def embeddings(self, ctx: torch.Tensor | None = None) -> torch.Tensor:
        """Token embeddings ``(C, L, D)`` with ``ctx`` (default ``self.ctx``) in the slots;
        ``ctx`` may be ``(n, D)`` or per-row ``(R, n, D)`` for ``R`` sets of all ``C`` prompts
        (CoCoOp's per-image context), giving ``(R * C, L, D)``."""
        if not self.n_ctx:
            return self.base
        ctx = self.ctx if ctx is None else ctx
        c, _, d = self.base.shape
        if ctx.dim() == 2 and self.contiguous:  # the "end" layout: one slice for every class
            start, stop = self.ctx_start, self.ctx_start + self.n_ctx
            src = ctx.unsqueeze(0).expand(c, -1, -1)
            return torch.cat([self.base[:, :start], src, self.base[:, stop:]], dim=1)
        if ctx.dim() == 2:
            src = ctx.unsqueeze(0).expand(c, -1, -1)
            return self.base.scatter(1, self.slots.unsqueeze(-1).expand(-1, -1, d), src)
        r = ctx.shape[0]
        src = ctx.unsqueeze(1).expand(r, c, -1, -1).reshape(r * c, self.n_ctx, d)
        index = self.slots.unsqueeze(-1).expand(-1, -1, d).repeat(r, 1, 1)
        return self.base.repeat(r, 1, 1).scatter(1, index, src)

    def forward(
        self, ctx: torch.Tensor | None = None, deep: Sequence[torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Projected text features (not normalised): ``(C, E)``, or ``(R * C, E)``."""
        emb = self.embeddings(ctx)
        pool = self.pool.repeat(emb.shape[0] // self.n_classes)
        return self.tower[0](emb, pool, deep=deep, ctx_start=self.ctx_start)


def template_features(
    text_tower: Any, tokenizer: Any, class_names: Sequence[str], template: str
) -> torch.Tensor:
    """L2-normalised features ``(C, E)`` of the hard prompts ``template.format(name)``."""
    prompts = ClassPrompts(text_tower, tokenizer, class_names, template, n_ctx=0, init="template")
    with torch.no_grad():
        return nn.functional.normalize(prompts(), dim=-1)


def _plain(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def _specials(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special tokens a tokenizer puts before and after a text."""
    full = list(tokenizer("a")["input_ids"])
    plain = _plain(tokenizer, "a")
    for k in range(len(full) - len(plain) + 1):
        if full[k : k + len(plain)] == plain:
            return full[:k], full[k + len(plain) :]
    raise ValueError("cannot locate the text between the tokenizer's special tokens")
