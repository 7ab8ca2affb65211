"""What every editor shares: the request and the handle of an applied edit, the editor
interface, and the training loops of the editors that train weights or vectors (:mod:`._editors`
holds the editors, :mod:`._grace_paper` and :mod:`._grace` the two GRACE codebooks).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from medibench.knowledge_edit._answerers import Answerer, TransformersAnswerer

__all__ = [
    "AttentionMaskWatch",
    "EditMemory",
    "forward_with_hook",
    "EditCase",
    "EditError",
    "EditHandle",
    "Editor",
    "TrainConfig",
    "TrainedEditor",
    "decoder_layers",
    "train",
    "train_steps",
]


class EditError(RuntimeError):
    """An edit that cannot be made or undone (wrong model kind, undo out of order)."""


class EditCase(NamedTuple):
    """What an editor needs of a request: its id, image (uint8 RGB), question and target."""

    edit_id: str
    image: np.ndarray
    question: str
    target: str


@dataclass
class EditHandle:
    """An applied edit: whether it converged, its last loss and steps; :meth:`undo`."""

    editor: str
    edit_id: str
    model: Answerer
    restore: Any
    converged: bool = True
    loss: float | None = None
    steps: int = 0
    elapsed_s: float = 0.0
    undone: bool = False

    def undo(self) -> None:
        """Restore the model as it was before this edit (bit for bit)."""
        if self.undone:
            raise EditError(f"edit {self.edit_id} was already undone")
        if not self.model.edits or self.model.edits[-1] is not self:
            raise EditError(f"edit {self.edit_id} is not the last edit still applied: undo the "
                            "newer ones first (last-in first-out)")  # fmt: skip
        self.restore()
        self.model.edits.pop()
        self.undone = True


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of a trained editor (Adam)."""

    lr: float = 1e-2
    max_steps: int = 100
    tol: float = 0.1
    seed: int = 0


class EditMemory(Protocol):
    """The router or codebook of a memory editor (``grace@paper``, ``balancedit``, ``wise``) as
    it sits in an edited model: :meth:`Editor.memory` finds it.

    ``query(model, image, question)``: the hidden state the router reads for that question on
    ``model`` (a tensor: ``(d,)`` for a codebook key, ``(tokens, d)`` for WISE's activations);
    ``route_distance(hidden)``: the router's reading of it (a codebook's distance to its
    nearest key; WISE's activation score of the memory it would pick); ``fires(hidden)``:
    whether the memory would act on it (within the nearest key's radius; WISE: at or above a
    memory's threshold)."""

    def query(self, model: Any, image: np.ndarray, question: str) -> Any: ...

    def route_distance(self, hidden: Any) -> float: ...

    def fires(self, hidden: Any) -> bool: ...


class Editor:
    """The interface: ``edit(model, request) -> EditHandle``; a memory editor's
    :meth:`memory` gives its router (:class:`EditMemory`) in an edited model."""

    name = "editor"

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        raise NotImplementedError

    def memory(self, model: Answerer) -> EditMemory | None:
        """The memory this editor's edits put in ``model`` (``None``: none there, or an editor
        without one)."""
        return None

    def _applied(
        self, model: Answerer, request: EditCase, restore: Any, *result: Any, **more: Any
    ) -> EditHandle:
        """The handle of ``request``'s edit, just applied to ``model``, pushed on its edits;
        ``result``/``more``: :class:`EditHandle`'s converged, loss, steps, elapsed_s."""
        handle = EditHandle(self.name, request.edit_id, model, restore, *result, **more)
        model.edits.append(handle)
        return handle

    def _local(self, model: Answerer) -> TransformersAnswerer:
        """``model``, which must be a local transformers model (its weights are edited)."""
        if not isinstance(model, TransformersAnswerer):
            raise EditError(
                f"the {self.name} editor trains weights: it needs a local transformers model, "
                f"not {type(model).__name__} (use the in-context editor)"
            )
        return model


class TrainedEditor(Editor):
    """An editor that trains weights: its hyper-parameters are one ``config_type`` config."""

    config_type: type[Any] = TrainConfig

    def __init__(self, config: Any = None) -> None:
        self.config: Any = config if config is not None else self.config_type()


def train(m: TransformersAnswerer, request: EditCase, params: list[Any], cfg: TrainConfig,
          ) -> tuple[bool, float | None, int]:  # fmt: skip
    """Adam on the answer's cross-entropy until the teacher-forced answer is the argmax at
    every position and the loss is at most ``cfg.tol``: ``(converged, last loss, steps)``."""
    batch, n = m.teacher_batch(request.image, request.question, request.target)
    opt = m.torch.optim.Adam(params, lr=cfg.lr)
    loss_value: float | None = None
    converged, steps = False, 0
    with _training(m, params):
        for steps in range(cfg.max_steps + 1):
            out = m.forward(batch, n)
            loss = out.loss
            loss_value = float(loss.detach())
            if not math.isfinite(loss_value):
                break
            if _reached(out, batch, n) and loss_value <= cfg.tol:
                converged = True
                break
            if steps == cfg.max_steps:
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return converged, loss_value, steps


def train_steps(m: TransformersAnswerer, batch: Any, n: int, params: list[Any], *, lr: float,
                steps: int, tol: float) -> tuple[bool, float | None, int]:  # fmt: skip
    """Exactly ``steps`` Adam steps on a teacher-forced ``batch`` (prompt ``n`` tokens long,
    the loss on its ``labels``; fewer only when the loss stops being finite), then
    ``(converged, loss, steps taken)`` read from one more pass: converged when every labelled
    token is the argmax and the loss is at most ``tol``."""
    opt = m.torch.optim.Adam(params, lr=lr)
    done = 0
    with _training(m, params):
        while done < steps:
            loss = m.forward(batch, n).loss
            if not math.isfinite(float(loss.detach())):
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            done += 1
        with m.torch.no_grad():
            out = m.forward(batch, n)
    loss_value = float(out.loss)
    converged = math.isfinite(loss_value) and _reached(out, batch, n) and loss_value <= tol
    return converged, loss_value, done


@contextmanager
def _training(m: TransformersAnswerer, params: list[Any]) -> Iterator[None]:
    """Only ``params`` require gradients inside; the model's flags as before after, and the
    trained parameters' gradients dropped."""
    if not params:
        raise EditError("no parameter to train (check the editor's layers and modules)")
    flags = {id(p): p.requires_grad for p in m.model.parameters()}
    for p in m.model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    try:
        yield
    finally:
        for p in m.model.parameters():
            p.requires_grad_(flags.get(id(p), True))
        for p in params:
            p.grad = None


def _reached(out: Any, batch: Any, n: int) -> bool:
    """Whether every labelled answer token is the model's argmax (teacher forcing)."""
    labels = batch["labels"][0, n:]
    pred = out.logits[0, n - 1 : -1].argmax(-1)
    chosen = labels != -100
    return bool((pred[chosen] == labels[chosen]).all())


def decoder_layers(m: TransformersAnswerer) -> Any:
    """The language model's decoder layers (a ``ModuleList``)."""
    decoder = m.model.get_decoder() if hasattr(m.model, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise EditError(f"model {m.path}: no decoder layers found (get_decoder().layers)")
    return layers


def forward_with_hook(m: Any, module: Any, batch: Mapping[str, Any], hook: Any) -> None:
    """Run local model ``m`` on ``batch`` (its labels left out, no gradients) with ``hook`` on
    ``module``'s forward pass, removed afterwards whatever happens."""
    handle = module.register_forward_hook(hook)
    try:
        with m.torch.no_grad():
            m.model(**{k: v for k, v in batch.items() if k != "labels"})
    finally:
        handle.remove()


class AttentionMaskWatch:
    """The attention mask of the model pass under way (a forward pre-hook on the whole model),
    so that a wrapped module can leave padded positions out; :meth:`remove` takes the hook
    away."""

    def __init__(self, model: Any) -> None:
        self.mask: Any = None
        self._handle = model.register_forward_pre_hook(self._seen, with_kwargs=True)

    def _seen(self, _mod: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        self.mask = kwargs.get("attention_mask")

    def rows(self, x: Any) -> Any:
        """``(rows, tokens)`` weights of ``x``'s positions (``(rows, tokens, d)``): 1 for a real
        token, 0 for padding (all 1 when the pass's mask does not cover ``x``'s tokens: a cached
        generation step)."""
        mask = self.mask
        if mask is None or mask.ndim != 2 or tuple(mask.shape) != tuple(x.shape[:2]):
            return x.new_ones(x.shape[:2])
        return mask.to(x.dtype)

    def remove(self) -> None:
        self._handle.remove()
