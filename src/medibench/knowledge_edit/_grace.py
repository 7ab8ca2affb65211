"""``grace-tokens``: a GRACE-style codebook with one value vector per answer token (Hartvigsen et
al., 2023, varied), written for this harness; ``grace@paper`` (:mod:`._grace_paper`) is GRACE as
published. ``grace`` was this editor's name before ``grace@paper`` existed and still selects it.

One decoder layer's MLP is wrapped (``layer``). Its codebook holds, per edit, a key (the MLP's
input at the prompt's last token), a radius and a value trained to the target. When a new
sequence is run (the prompt pass of a generation, or a teacher-forced pass), the query is the
MLP input at the prompt's last token; if its nearest key is within that key's radius, the MLP's
output is replaced by the key's value from that token on, one value vector per token of the
answer (its end-of-turn token included): the first at the prompt's last token, the next at the
first answer token, and so on; generated tokens past the answer's length are left alone. A
query outside every radius leaves the layer as it was, which is what keeps edits local.

Why a vector per token: a single vector written at every position (GRACE's ``replace_all``) is
looked up anew on each pass at generation time, and a cached generation step runs one generated
token, whose own lookup misses the prompt's key: the vector trained to be written everywhere is
written at the prompt's last token alone. Deciding once on the prompt and writing one vector per
answer token, without further lookups, makes generation do what training did. (GRACE's own
``replace_last`` with one vector, as ``grace@paper`` runs it, reaches the answer on a model
that ends its answers, such as the taught tiny LLaVA; keyed at ``down_proj``'s input it is also
the more local of the two.)

Each row of a batch decides for itself (a batch mixing edited and unrelated questions answers
each with its own entry, or none). A new key within an older key's radius splits the two: both
radii become half their distance (GRACE's rule for conflicting keys). The value is trained with
Adam on the answer's cross-entropy (the weights never change); undo removes the entry and
restores the radii it split, and the last undo puts the original MLP back.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

from medibench.knowledge_edit._answerers import Answerer
from medibench.knowledge_edit._editing import (
    EditCase,
    EditError,
    EditHandle,
    TrainConfig,
    TrainedEditor,
    decoder_layers,
    forward_with_hook,
    train,
)

__all__ = ["GraceTokensConfig", "GraceTokensEditor"]


@dataclass(frozen=True)
class GraceTokensConfig(TrainConfig):
    """``layer``: the decoder layer whose MLP gets the codebook; ``eps``: a new key's radius
    (Euclidean, in the layer's hidden units)."""

    layer: int = -2
    eps: float = 1.0
    lr: float = 1.0


class GraceTokensEditor(TrainedEditor):
    name = "grace-tokens"
    config_type = GraceTokensConfig

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        m = self._local(model)
        torch, cfg = m.torch, self.config
        t0 = time.perf_counter()
        layers = decoder_layers(m)
        if not -len(layers) <= cfg.layer < len(layers):
            raise EditError(f"grace-tokens: layer {cfg.layer} out of range ({len(layers)} layers)")
        layer = layers[cfg.layer]
        book = _module_class(torch)
        codebook = layer.mlp if isinstance(layer.mlp, book) else book(layer.mlp, m)
        layer.mlp = codebook
        batch, n = m.teacher_batch(request.image, request.question, request.target)
        key, first_value = codebook.probe(m, batch, n)  # first_value: (answer tokens, hidden)
        radii_before = list(codebook.radii)
        radius = cfg.eps
        for i, other in enumerate(codebook.keys):
            d = float(torch.linalg.vector_norm(other - key))
            if d < radius + codebook.radii[i]:
                codebook.radii[i] = min(codebook.radii[i], d / 2)
                radius = min(radius, d / 2)
        value = torch.nn.Parameter(first_value.clone())
        codebook.add(key, value, radius)

        def restore() -> None:
            codebook.pop()
            codebook.radii[:] = radii_before
            if not codebook.keys:
                layer.mlp = codebook.inner

        try:
            converged, loss, steps = train(m, request, [value], cfg)
        except BaseException:  # a failed edit leaves the model as it was
            restore()
            raise
        value.requires_grad_(False)
        return self._applied(
            model, request, restore, converged, loss, steps, time.perf_counter() - t0
        )


@functools.cache
def _module_class(torch: Any) -> Any:
    """The codebook ``torch.nn.Module`` class, made on first use (torch is optional)."""

    class Codebook(torch.nn.Module):
        def __init__(self, inner: Any, owner: Any) -> None:
            super().__init__()
            self.inner = inner
            self.owner = [owner]  # a list: not registered as a sub-module
            self.keys: list[Any] = []
            self.values: list[Any] = []  # trained vectors (not model weights)
            self.radii: list[float] = []
            self._hits: list[tuple[int, int]] = []  # (row, entry) of the sequence being run
            self._step = 0  # tokens generated since the prompt pass

        def add(self, key: Any, value: Any, radius: float) -> None:
            self.keys.append(key.detach())
            self.values.append(value)
            self.radii.append(float(radius))

        def pop(self) -> None:
            self.keys.pop()
            self.radii.pop()
            self.values.pop()

        def probe(self, m: Any, batch: Any, n: int) -> tuple[Any, Any]:
            """The key (MLP input at the prompt's last token) and the MLP's outputs from there
            to the answer's last token (the value's start)."""
            seen: dict[str, Any] = {}

            def hook(_mod: Any, args: Any, out: Any) -> None:
                seen["x"], seen["y"] = args[0][0, n - 1].detach(), out[0, n - 1 : -1].detach()

            forward_with_hook(m, self.inner, batch, hook)
            return seen["x"], seen["y"]

        def forward(self, x: Any, *args: Any, **kwargs: Any) -> Any:
            out = self.inner(x, *args, **kwargs)
            if not self.keys:
                return out
            if x.shape[1] > 1:  # a new sequence: each row looks its key up
                forced = self.owner[0].teacher_prompt_length  # a teacher-forced pass
                pos = forced - 1 if forced is not None else x.shape[1] - 1
                keys = torch.stack(self.keys).to(x.dtype)
                best, idx = torch.cdist(x[:, pos, :].detach(), keys).min(dim=1)
                radii = torch.tensor(self.radii, dtype=x.dtype, device=x.device)
                hits = torch.nonzero(best <= radii[idx]).flatten()
                self._hits = [(int(r), int(idx[r])) for r in hits]
                self._step = 0
                start = pos
            else:  # one generated token: the next vector of each hit row's value
                self._step += 1
                start = 0
            if not self._hits:
                return out
            replaced = out.clone()
            for row, entry in self._hits:
                value = self.values[entry][self._step :]
                span = min(value.shape[0], out.shape[1] - start)
                if span > 0:
                    replaced[row, start : start + span, :] = value[:span].to(out.dtype)
            return replaced

    return Codebook
