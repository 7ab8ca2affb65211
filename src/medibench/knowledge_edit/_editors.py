"""Editors behind one interface: ``edit(model, request) -> handle``; ``handle.undo()`` restores
the model bit for bit.

* ``ft``: fine-tune the parameters of chosen decoder layers' modules (the others frozen); the
  handle keeps copies of those parameters and writes them back on undo.
* ``lora``: LoRA adapters (peft) on the chosen layers' linear modules, trained, then merged;
  the handle keeps the merged weights' originals.
* ``grace``: a GRACE-style codebook on one layer's MLP (:mod:`._grace`); the weights are never
  touched; undo removes the entry (and the wrapper with the last one).
* ``in-context``: the fact is written before every question (no weights touched).
* ``easyedit``: one of EasyEdit's multimodal algorithms, where EasyEdit is installed.

A trained editor stops when the teacher-forced answer (its end token included) is the model's
argmax at every position and the loss is at most ``tol``; otherwise, after ``max_steps``, the
handle says ``converged=False`` with the last loss and the run records it and goes on. Edits on
one model are undone last-in first-out (an older edit cannot be undone under a newer one).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from medibench.knowledge_edit._answerers import Answerer, TransformersAnswerer

__all__ = [
    "EDITORS",
    "EditCase",
    "EditError",
    "EditHandle",
    "Editor",
    "FineTuneConfig",
    "FineTuneEditor",
    "InContextEditor",
    "LoraEditor",
    "TrainConfig",
    "load_editor",
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


@dataclass(frozen=True)
class FineTuneConfig(TrainConfig):
    """``layers``: decoder layer indices (negative from the end); ``modules``: the sub-module
    names within each layer whose parameters are trained (``mlp``, ``self_attn``, ...)."""

    layers: tuple[int, ...] = (-1,)
    modules: tuple[str, ...] = ("mlp",)


@dataclass(frozen=True)
class LoraConfig(FineTuneConfig):
    """LoRA rank and scale on the linear modules of the chosen layers' ``modules``."""

    rank: int = 4
    alpha: int = 8
    lr: float = 5e-2


class Editor:
    """The interface: ``edit(model, request) -> EditHandle``."""

    name = "editor"

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        raise NotImplementedError


class TrainedEditor(Editor):
    """An editor that trains weights: its hyper-parameters are one ``config_type`` config."""

    config_type: type[TrainConfig] = TrainConfig

    def __init__(self, config: TrainConfig | None = None) -> None:
        self.config: Any = config if config is not None else self.config_type()


class FineTuneEditor(TrainedEditor):
    name = "ft"
    config_type = FineTuneConfig

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        m = _transformers(model, self.name)
        t0 = time.perf_counter()
        params = dict(_chosen_parameters(m, self.config))
        saved = {k: p.detach().clone() for k, p in params.items()}

        def restore() -> None:
            with m.torch.no_grad():
                for k, p in params.items():
                    p.copy_(saved[k])

        try:
            converged, loss, steps = train(m, request, list(params.values()), self.config)
        except BaseException:  # a failed edit leaves the model as it was
            restore()
            raise
        return _push(model, EditHandle(self.name, request.edit_id, model, restore, converged,
                                       loss, steps, time.perf_counter() - t0))  # fmt: skip


class LoraEditor(TrainedEditor):
    name = "lora"
    config_type = LoraConfig

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        m = _transformers(model, self.name)
        try:
            import peft
        except ImportError:
            raise ImportError(
                "the lora editor needs peft: pip install 'medibench[torch]'"
            ) from None
        torch, cfg = m.torch, self.config
        t0 = time.perf_counter()
        targets = [n for n, mod in _chosen_modules(m, cfg) if isinstance(mod, torch.nn.Linear)]
        if not targets:
            raise EditError(f"lora: no linear module in layers {cfg.layers} / {cfg.modules}")
        modules = dict(m.model.named_modules())
        saved = {n: modules[n].weight.detach().clone() for n in targets}
        flags = {n: p.requires_grad for n, p in m.model.named_parameters()}
        torch.manual_seed(cfg.seed)
        wrapped = peft.get_peft_model(m.model, peft.LoraConfig(
            r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=0.0, target_modules=targets,
        ))  # fmt: skip
        lora = [p for n, p in wrapped.named_parameters() if "lora_" in n]
        try:
            converged, loss, steps = train(m, request, lora, cfg)
        except BaseException:  # a failed edit: the adapters go, unmerged
            m.model = wrapped.unload()
            _unwrapped(m.model, flags)
            raise
        m.model = wrapped.merge_and_unload()
        _unwrapped(m.model, flags)
        current = dict(m.model.named_modules())

        def restore() -> None:
            with torch.no_grad():
                for n in targets:
                    current[n].weight.copy_(saved[n])

        return _push(model, EditHandle(self.name, request.edit_id, model, restore, converged,
                                       loss, steps, time.perf_counter() - t0))  # fmt: skip


class InContextEditor(Editor):
    """The fact, written before every later question (``template`` with ``{question}`` and
    ``{target}``)."""

    name = "in-context"

    def __init__(self, template: str = 'New fact: the answer to "{question}" is {target}.') -> None:
        self.template = template

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        fact = self.template.format(question=request.question, target=request.target)
        model.context.append(fact)

        def restore() -> None:
            model.context.pop()

        return _push(model, EditHandle(self.name, request.edit_id, model, restore))


class EasyEditEditor(Editor):
    """One of EasyEdit's multimodal algorithms (``alg``: ``LoRA``, ``GRACE``, ``WISE``, ...)
    with its hyper-parameters file; undo writes back the weights it reports having changed."""

    name = "easyedit"

    def __init__(self, alg: str = "LoRA", hparams: str | os.PathLike | None = None) -> None:
        try:
            easyeditor = importlib.import_module("easyeditor")
        except ImportError:
            raise ImportError(
                "the easyedit editor needs EasyEdit (not installed): pip install easyeditor, or "
                "clone https://github.com/zjunlp/EasyEdit and pip install -e it"
            ) from None
        if hparams is None or not Path(hparams).is_file():
            raise FileNotFoundError(f"easyedit: the hparams file {hparams} does not exist")
        self.alg = alg
        self.module = easyeditor
        self.hparams = _easyedit_hparams(easyeditor, alg, Path(hparams))

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        m = _transformers(model, self.name)
        algorithms = importlib.import_module("easyeditor.util.alg_dict").ALG_MULTIMODAL_DICT
        t0 = time.perf_counter()
        apply = algorithms[self.alg]
        item = {"prompt": request.question, "target": request.target, "image": request.image}
        _, weights = apply(m.model, m.processor, [item], self.hparams, copy=False,
                           return_orig_weights=True)  # fmt: skip
        params = dict(m.model.named_parameters())
        saved = {k: v.detach().clone() for k, v in (weights or {}).items()}

        def restore() -> None:
            with m.torch.no_grad():
                for k, v in saved.items():
                    params[k].copy_(v)

        return _push(model, EditHandle(self.name, request.edit_id, model, restore,
                                       elapsed_s=time.perf_counter() - t0))  # fmt: skip


EDITORS = ("ft", "lora", "grace", "in-context", "easyedit")


def load_editor(name: str, config: dict[str, Any] | None = None) -> Editor:
    """An editor by name with its hyper-parameters (a mapping, e.g. from a YAML file)."""
    config = dict(config or {})
    if name in ("ft", "lora", "grace"):
        from medibench.knowledge_edit._grace import GraceConfig, GraceEditor

        cls = {"ft": FineTuneConfig, "lora": LoraConfig, "grace": GraceConfig}[name]
        known = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(config) - known)
        if bad:
            raise ValueError(f"editor {name}: unknown option(s) {bad}; valid: {sorted(known)}")
        for k in ("layers", "modules"):
            if k in config:
                config[k] = tuple(config[k])
        made = cls(**config)
        return {"ft": FineTuneEditor, "lora": LoraEditor, "grace": GraceEditor}[name](made)
    if name == "in-context":
        return InContextEditor(**config)
    if name == "easyedit":
        return EasyEditEditor(**config)
    raise ValueError(f"unknown editor {name!r}; valid: {', '.join(EDITORS)}")


# -- training and helpers ---------------------------------------------------------------------


def train(m: TransformersAnswerer, request: EditCase, params: list[Any], cfg: TrainConfig,
          ) -> tuple[bool, float | None, int]:  # fmt: skip
    """Adam on the answer's cross-entropy until the teacher-forced answer is the argmax at
    every position and the loss is at most ``cfg.tol``: ``(converged, last loss, steps)``."""
    torch = m.torch
    if not params:
        raise EditError("no parameter to train (check the editor's layers and modules)")
    flags = {id(p): p.requires_grad for p in m.model.parameters()}
    for p in m.model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    batch, n = m.teacher_batch(request.image, request.question, request.target)
    opt = torch.optim.Adam(params, lr=cfg.lr)
    loss_value: float | None = None
    converged, steps = False, 0
    try:
        for steps in range(cfg.max_steps + 1):
            out = m.forward(batch, n)
            loss = out.loss
            loss_value = float(loss.detach())
            if not math.isfinite(loss_value):
                break
            pred = out.logits[0, n - 1 : -1].argmax(-1)
            if bool((pred == batch["labels"][0, n:]).all()) and loss_value <= cfg.tol:
                converged = True
                break
            if steps == cfg.max_steps:
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    finally:
        for p in m.model.parameters():
            p.requires_grad_(flags.get(id(p), True))
        for p in params:
            p.grad = None
    return converged, loss_value, steps


def decoder_layers(m: TransformersAnswerer) -> Any:
    """The language model's decoder layers (a ``ModuleList``)."""
    decoder = m.model.get_decoder() if hasattr(m.model, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise EditError(f"model {m.path}: no decoder layers found (get_decoder().layers)")
    return layers


def _chosen_modules(m: TransformersAnswerer, cfg: FineTuneConfig) -> list[tuple[str, Any]]:
    layers = decoder_layers(m)
    names = {id(mod): n for n, mod in m.model.named_modules()}
    out = []
    for i in cfg.layers:
        if not -len(layers) <= i < len(layers):
            raise EditError(f"layer {i} out of range: the model has {len(layers)} decoder layers")
        layer = layers[i]
        for sub in cfg.modules:
            if not hasattr(layer, sub):
                raise EditError(f"decoder layer {i} has no module {sub!r}")
            for _, mod in getattr(layer, sub).named_modules():
                out.append((names[id(mod)], mod))
    return out


def _chosen_parameters(m: TransformersAnswerer, cfg: FineTuneConfig) -> list[tuple[str, Any]]:
    seen: dict[str, Any] = {}
    for name, mod in _chosen_modules(m, cfg):
        for pn, p in mod.named_parameters(recurse=False):
            seen[f"{name}.{pn}"] = p
    return list(seen.items())


def _transformers(model: Answerer, editor: str) -> TransformersAnswerer:
    if not isinstance(model, TransformersAnswerer):
        raise EditError(f"the {editor} editor trains weights: it needs a local transformers model, "
                        f"not {type(model).__name__} (use the in-context editor)")  # fmt: skip
    return model


def _unwrapped(model: Any, flags: dict[str, bool]) -> None:
    """A model peft unwrapped: its attributes and ``requires_grad`` flags as before."""
    for attr in ("peft_config", "_hf_peft_config_loaded"):
        if attr in vars(model):
            delattr(model, attr)
    for n, p in model.named_parameters():
        p.requires_grad_(flags.get(n, False))


def _push(model: Answerer, handle: EditHandle) -> EditHandle:
    model.edits.append(handle)
    return handle


def _easyedit_hparams(module: Any, alg: str, path: Path) -> Any:
    cls = getattr(module, f"{alg}MultimodalHyperParams", None) or getattr(
        module, f"{alg}HyperParams", None
    )
    if cls is None:
        raise ValueError(f"easyedit: no hyper-parameter class for algorithm {alg!r}")
    return cls.from_hparams(str(path))
