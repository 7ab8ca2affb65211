"""``wise``: WISE (Wang et al., NeurIPS 2024, "WISE: Rethinking the Knowledge Memory for Lifelong
Model Editing of Large Language Models") as EasyEdit implements it for vision-language models,
written for this harness.

Follows zjunlp/EasyEdit's ``easyeditor/models/wise/WISE.py`` (``WISEAdapter``,
``WISEMultimodal.edit``), ``utils.py`` (``multimodal_tokenize``, ``EarlyStopMeter``,
``EditingMeanAct``) and ``merge/gta.py`` (TIES merging), with the settings of its
vision-language hyper-parameter files (``hparams/WISE/llavaov-7b.yaml``, ``qwen2vl-7b.yaml``,
``qwen3vl-4b.yaml``: ``retrieve: true``, the WISE-Retrieve variant).

* **Side memory**: a copy of one module's weight (``layer``, ``module``: the MLP's
  ``down_proj``), trained in place of the original for each edit; the model's weights never
  change. Only a random fraction ``mask_ratio`` of its entries is trained (the knowledge shard's
  mask, drawn anew every ``save_freq`` edits), by SGD (``lr``, weight decay 1e-5) for at most
  ``n_iter`` steps, each entry kept within ``norm_constraint`` of the original.
* **Loss**: the answer's cross-entropy (its tokens without the end of turn, as EasyEdit's
  labels) plus the activation margins: with ``s(x)`` the mean over a sequence's tokens of
  ``|act(W' x) - act(W x)|`` (``act``: the model's hidden activation, ``W'`` the side memory),
  ``relu(s_out - s_in + gamma) + relu(s_out - alpha) + relu(beta - s_in)`` (``act_margin``:
  ``[alpha, beta, gamma]``) for the edit's sequence (``s_in``) and an out-of-scope one
  (``s_out``). Training stops early when the loss changed by at most 1e-4 and is at most 0.02.
* **Routing**: the memory's threshold is ``act_ratio`` times the least ``s_in`` of its edits
  (read at the last step). A pass's score is its ``s`` (its tokens' maximum beyond 100 tokens);
  below the threshold the original output stands, else the side memory's; a saved shard whose
  score is higher still and above its own threshold wins over both.
* **Sharding and merging**: every ``save_freq`` edits the side memory is saved as a shard and a
  fresh copy of the original starts; every ``merge_freq`` edits the last ``merge_freq /
  save_freq`` shards are merged into one by TIES (each change from the original trimmed to its
  ``densities`` largest entries, the sign elected by the weighted sum, the agreeing entries
  averaged, weight ``weights / shards`` each), its threshold the least of theirs.

Named deviations from EasyEdit's code: its out-of-scope sequence is the request's own locality
prompt from the dataset (the prompt its locality score then reads); medibench's editors see the
edit request alone, so here it is ``locality_question`` on a blank image (every pixel
``locality_fill``) of the edit's size. Its router decides once for the whole batch (one
``.item()``: batches of one); here each row decides for itself and a row's padding is left out
of its score (the same as one row alone). Its masks come from numpy's global random state; here
from a generator seeded by ``seed`` and the edit count. WISE-Merge (``retrieve: false``) and
replay are not offered (the vision-language files set ``retrieve: true``, ``replay: false``).
Those files name layer 23 of their 28-layer 7B models; here ``layer`` defaults to the
second-to-last (as ``grace@paper``; the tiny test models have two). EasyEdit reports no
convergence; here ``converged`` and the loss are read from one more teacher-forced pass through
the router after training (every answer token the argmax and the loss at most ``tol``).
Undo restores the side memory, its mask, shards, thresholds and counts as they were; the last
undo puts the original module back, so the model's state dict is as before, bit for bit.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from medibench.knowledge_edit._editing import (
    AttentionMaskWatch,
    EditCase,
    _reached,
    _training,
    forward_with_hook,
)
from medibench.knowledge_edit._grace_paper import ModuleEditor, answer_batch

__all__ = ["WiseConfig", "WiseEditor", "margin_loss", "ties_merge"]

#: EasyEdit's early stop: the loss changed by at most this and is at most ``_STOP_LOSS``
_STOP_CHANGE, _STOP_LOSS = 1e-4, 0.02
#: a score over more tokens than this is their maximum, not their mean (EasyEdit's ``euc``)
_LONG = 100


@dataclass(frozen=True)
class WiseConfig:
    """EasyEdit's WISE settings (its vision-language files' values): ``layer``, ``module``;
    ``mask_ratio``; ``lr`` (``edit_lr``); ``n_iter``; ``norm_constraint``; ``act_margin``
    (``alpha``, ``beta``, ``gamma``); ``act_ratio``; ``save_freq``; ``merge_freq``;
    ``densities``, ``weights`` (TIES); plus ``locality_question`` and ``locality_fill`` (the
    out-of-scope sequence), ``tol`` (the loss at most which, with every answer token the argmax,
    an edit counts as converged) and ``seed`` (the masks)."""

    layer: int = -2
    module: str = "mlp.down_proj"
    mask_ratio: float = 0.2
    lr: float = 1.0
    n_iter: int = 10
    norm_constraint: float = 1.0
    act_margin: tuple[float, float, float] = (5.0, 20.0, 10.0)
    act_ratio: float = 0.4
    save_freq: int = 500
    merge_freq: int = 1000
    densities: float = 0.53
    weights: float = 1.0
    locality_question: str = "What is shown in the image?"
    locality_fill: int = 128
    tol: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "act_margin", tuple(float(x) for x in self.act_margin))
        problems = []
        if not 0 < self.mask_ratio <= 1:
            problems.append(f"mask_ratio must be in (0, 1], got {self.mask_ratio}")
        if len(self.act_margin) != 3:
            problems.append(f"act_margin must be [alpha, beta, gamma], got {list(self.act_margin)}")
        if self.n_iter < 1:
            problems.append(f"n_iter must be at least 1, got {self.n_iter}")
        if self.save_freq < 1 or self.merge_freq < 1 or self.merge_freq % self.save_freq:
            problems.append(f"merge_freq ({self.merge_freq}) must be a positive multiple of "
                            f"save_freq ({self.save_freq})")  # fmt: skip
        if not 0 < self.densities <= 1:
            problems.append(f"densities must be in (0, 1], got {self.densities}")
        if not 0 <= self.locality_fill <= 255:
            problems.append(f"locality_fill must be a grey level 0-255, got {self.locality_fill}")
        if problems:
            raise ValueError("wise: " + "; ".join(problems))


class WiseEditor(ModuleEditor):
    name = "wise"
    config_type = WiseConfig

    def wrapper(self, torch: Any) -> type:
        return _adapter_class(torch)

    def train(self, m: Any, adapter: Any, request: EditCase) -> tuple[bool, float | None, int]:
        cfg = self.config
        batch, n = answer_batch(m, request)
        blank = np.full_like(request.image, cfg.locality_fill, dtype=np.uint8)
        outside = m.encode([blank], [cfg.locality_question])
        steps, _ = adapter.train(m, batch, n, outside)
        with m.torch.no_grad():
            out = m.forward(batch, n)
        last = float(out.loss)
        converged = math.isfinite(last) and _reached(out, batch, n) and last <= cfg.tol
        return converged, last, steps


def margin_loss(torch: Any, s_in: Any, s_out: Any, margin: tuple[float, float, float]) -> Any:
    """WISE's activation margins for one edit's score ``s_in`` and one out-of-scope score
    ``s_out``: ``relu(s_out - s_in + gamma) + relu(s_out - alpha) + relu(beta - s_in)``."""
    alpha, beta, gamma = margin
    relu = torch.nn.functional.relu
    return relu(s_out - s_in + gamma) + relu(s_out - alpha) + relu(beta - s_in)


def ties_merge(torch: Any, base: Any, tensors: list[Any], weights: list[float],
               density: float) -> Any:  # fmt: skip
    """TIES merging of ``tensors`` into ``base``: each change ``t - base`` keeps its
    ``density`` largest-magnitude entries, is weighted, the sign of each entry is the sign of
    the weighted sum (0 counts as +), and the weighted changes that agree with it are summed
    and divided by the sum of their weights (1 where none agrees)."""
    deltas = []
    for t in tensors:
        delta = t - base
        if density < 1:
            k = int(density * delta.numel())
            keep = torch.zeros(delta.numel(), dtype=delta.dtype, device=delta.device)
            keep[torch.topk(delta.abs().reshape(-1).float(), k=k).indices] = 1
            delta = delta * keep.view_as(delta)
        deltas.append(delta)
    stacked = torch.stack(deltas)
    w = torch.tensor(weights, dtype=stacked.dtype, device=stacked.device).view(-1, 1, 1)
    weighted = stacked * w
    elected = (weighted.sum(0) >= 0).to(stacked.dtype) * 2 - 1
    agree = (weighted.sign() == elected).to(stacked.dtype)
    divisor = (w * agree).sum(0)
    divisor[divisor == 0] = 1
    return (base + (weighted * agree).sum(0) / divisor).to(base.dtype)


@functools.cache
def _adapter_class(torch: Any) -> Any:
    """The WISE adapter ``torch.nn.Module`` class, made on first use (torch is optional)."""
    from transformers.activations import ACT2FN

    class WiseAdapter(torch.nn.Module):
        """A wrapped linear module with WISE's side memory and shards (not in the state
        dict: plain attributes)."""

        def __init__(self, inner: Any, owner: Any, cfg: WiseConfig) -> None:
            super().__init__()
            self.inner = inner
            self.owner = [owner]  # a list: not registered as a sub-module
            self.cfg = cfg
            text = getattr(owner.model.config, "text_config", owner.model.config)
            act = getattr(text, "hidden_act", None) or getattr(text, "hidden_activation", None)
            self.act = ACT2FN[act or "silu"]
            self.side = inner.weight.detach().clone()
            self.mask: Any = None
            self.shards: list[tuple[Any, float]] = []  # (weight, least in-scope score)
            self.least = math.inf  # the side memory's least in-scope score
            self.count = 0
            self.merges = 0
            self.editing = False
            self.seen: list[Any] = []  # (original, side) outputs of the passes while editing
            self.watch = AttentionMaskWatch(owner.model)

        @property
        def weight(self) -> Any:  # code that reads the wrapped layer's weight (its dtype)
            return self.inner.weight

        @property
        def holds_edits(self) -> bool:
            return self.count != 0

        def release(self) -> None:
            """Remove the attention-mask hook (the original module is put back)."""
            self.watch.remove()

        def snapshot(self) -> tuple[Any, ...]:
            return (self.side.clone(), self.mask, list(self.shards), self.least, self.count,
                    self.merges)  # fmt: skip

        def restore(self, saved: tuple[Any, ...]) -> None:
            side, self.mask, shards, self.least, self.count, self.merges = saved
            self.side = side.clone()
            self.shards[:] = shards

        # -- scores --------------------------------------------------------------------
        def score(self, original: Any, other: Any, weights: Any, *, infer: bool = True) -> Any:
            """Each row's activation score: the mean over its tokens (``weights`` 1, padding 0)
            of ``|act(other) - act(original)|``; when routing (``infer``), their maximum beyond
            100 tokens."""
            gap = torch.linalg.vector_norm(self.act(other) - self.act(original), dim=-1)
            if infer and gap.shape[1] > _LONG:
                return torch.where(weights > 0, gap, -math.inf).amax(dim=1)
            return (gap * weights).sum(1) / weights.sum(1).clamp_min(1)

        def route(self, x: Any, weights: Any) -> tuple[Any, Any]:
            """Each row's output choice (``-1``: the original, ``0``: the side memory, ``i``:
            shard ``i - 1``) and its score."""
            original = self.inner(x)
            best = self.score(original, torch.nn.functional.linear(x, self.side), weights)
            choice = torch.where(best < self.least * self.cfg.act_ratio, -1, 0)
            for i, (shard, least) in enumerate(self.shards, start=1):
                s = self.score(original, torch.nn.functional.linear(x, shard), weights)
                wins = (s > best) & (s > least * self.cfg.act_ratio)
                choice = torch.where(wins, i, choice)
                best = torch.where(wins, s, best)
            return choice, best

        # -- the router's reading (EditMemory) -------------------------------------------
        def query(self, model: Any, image: Any, question: str) -> Any:
            """The module's input at every token of ``question``'s prompt: ``(tokens, d)``."""
            seen: dict[str, Any] = {}

            def hook(_mod: Any, args: Any, _out: Any) -> None:
                seen["x"] = args[0][0].detach()

            forward_with_hook(model, self.inner, model.encode([image], [question]), hook)
            return seen["x"]

        #: the router's reading grows towards firing (an activation score, not a distance)
        higher_fires = True

        def route_distance(self, hidden: Any) -> float:
            """The activation score of the memory ``hidden`` (``(tokens, d)`` or ``(d,)``)
            would be routed to (the side memory's when none)."""
            x = hidden.reshape(1, -1, hidden.shape[-1]).to(self.side.dtype)
            with torch.no_grad():
                return float(self.route(x, _ones(x))[1][0])

        def fires(self, hidden: Any) -> bool:
            """Whether the side memory or a shard takes ``hidden``'s pass."""
            x = hidden.reshape(1, -1, hidden.shape[-1]).to(self.side.dtype)
            with torch.no_grad():
                return bool(self.route(x, _ones(x))[0][0] >= 0)

        # -- editing ---------------------------------------------------------------------
        def train(self, m: Any, batch: Any, n: int, outside: Any) -> tuple[int, float]:
            """Train the side memory on one edit (EasyEdit's ``WISEMultimodal.edit``): the steps
            taken and the last loss."""
            cfg = self.cfg
            if self.count % cfg.save_freq == 0:  # a new shard: a new mask
                gen = torch.Generator(device="cpu").manual_seed(cfg.seed + self.count)
                draw = torch.rand(self.side.shape, generator=gen, dtype=torch.float64)
                self.mask = (draw < cfg.mask_ratio).to(self.side.device)
            side = self.side.clone().requires_grad_(True)
            self.side = side
            opt = torch.optim.SGD([side], lr=cfg.lr, weight_decay=1e-5)
            previous, current, steps, in_score = math.inf, math.inf, 0, math.nan
            self.editing = True
            try:
                with _training(m, [side]):
                    for i in range(cfg.n_iter):
                        self.seen = []
                        ft_loss = m.forward(batch, n).loss
                        m.model(**outside)
                        (o_in, s_in), (o_out, s_out) = self.seen
                        s_in_row = self.score(o_in, s_in, _ones(o_in), infer=False)[0]
                        s_out_row = self.score(o_out, s_out, _ones(o_out), infer=False)[0]
                        loss = ft_loss + margin_loss(torch, s_in_row, s_out_row, cfg.act_margin)
                        stop = abs(current - previous) <= _STOP_CHANGE and current <= _STOP_LOSS
                        if stop or i == cfg.n_iter - 1:
                            in_score = float(s_in_row.detach())
                        if stop:
                            break
                        opt.zero_grad(set_to_none=True)
                        loss.backward()
                        side.grad = side.grad * self.mask.to(side.grad.dtype)
                        opt.step()
                        steps += 1
                        previous, current = current, float(loss.detach())
                        with torch.no_grad():
                            w = self.inner.weight
                            side.copy_(torch.clamp(side, w - cfg.norm_constraint,
                                                   w + cfg.norm_constraint))  # fmt: skip
            finally:
                self.editing, self.seen = False, []
                self.side = side.detach()
            self.least = min(self.least, in_score)
            self.count += 1
            if self.count % cfg.save_freq == 0:
                self.shards.append((self.side, self.least))
                self.side, self.least = self.inner.weight.detach().clone(), math.inf
            if self.count % cfg.merge_freq == 0:
                self.merge()
            return steps, current

        def merge(self) -> None:
            """The last ``merge_freq / save_freq`` shards, merged into one by TIES."""
            k = self.cfg.merge_freq // self.cfg.save_freq
            merging, self.shards[:] = self.shards[-k:], self.shards[:-k]
            weight = ties_merge(torch, self.inner.weight.detach(), [w for w, _ in merging],
                                [self.cfg.weights / k] * k, self.cfg.densities)  # fmt: skip
            self.shards.append((weight, min(least for _, least in merging)))
            self.merges += 1

        def forward(self, x: Any, *args: Any, **kwargs: Any) -> Any:
            if self.editing:
                original = self.inner(x, *args, **kwargs)
                side = torch.nn.functional.linear(x, self.side)
                self.seen.append((original, side))
                return side
            if self.count == 0:
                return self.inner(x, *args, **kwargs)
            with torch.no_grad():
                choice, _ = self.route(x.detach(), self.watch.rows(x))
            out = self.inner(x, *args, **kwargs)
            if bool((choice < 0).all()):
                return out
            out = out.clone()
            for i, weight in enumerate([self.side, *(w for w, _ in self.shards)]):
                rows = choice == i
                if bool(rows.any()):
                    out[rows] = torch.nn.functional.linear(x[rows], weight).to(out.dtype)
            return out

    return WiseAdapter


def _ones(x: Any) -> Any:
    """Weight 1 for every token of ``x`` (``(rows, tokens, d)``)."""
    return x.new_ones(x.shape[:2])
