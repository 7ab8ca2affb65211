"""Editors behind one interface: ``edit(model, request) -> handle``; ``handle.undo()`` restores
the model bit for bit.

* ``ft``: fine-tune the parameters of chosen decoder layers' modules (the others frozen); the
  handle keeps copies of those parameters and writes them back on undo.
* ``lora``: LoRA adapters (peft) on the chosen layers' linear modules, trained, then merged;
  the handle keeps the merged weights' originals.
* ``grace@paper``: GRACE as published and as EasyEdit implements it (:mod:`._grace_paper`): a
  codebook keyed on the input of one layer's ``down_proj``, one value vector per edit written at
  the looked-up token; the weights are never touched; undo restores the codebook (and takes the
  wrapper away with the last entry).
* ``grace-tokens`` (alias ``grace``, its name before ``grace@paper`` existed): a GRACE-style
  codebook on one layer's MLP keyed on the MLP's input, one value vector per answer token
  (:mod:`._grace`); undo as ``grace@paper``'s.
* ``balancedit``: BalancEdit (:mod:`._balancedit`): ``grace@paper``'s codebook keyed on the
  prompt's pooled input, each key's radius ``(1 - alpha) * d_neg + alpha * d_pos`` from a
  positive and a negative sample of the edit; undo as ``grace@paper``'s.
* ``wise``: WISE as EasyEdit implements it (:mod:`._wise`): a side memory (a copy of one
  ``down_proj``'s weight) trained on a random mask of its entries, routed by activation score,
  saved as shards and merged (TIES); undo restores the memory (the last undo, the module).
* ``mend:DIR``: MEND (:mod:`._mend`), the hypernetwork ``edit train-mend`` trained in ``DIR``
  turns the request's gradient into a weight update in one step; the handle keeps the edited
  weights' originals.
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
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medibench.knowledge_edit._answerers import Answerer, TransformersAnswerer
from medibench.knowledge_edit._balancedit import BalancEditConfig, BalancEditEditor
from medibench.knowledge_edit._editing import (
    EditCase,
    EditError,
    EditHandle,
    Editor,
    TrainConfig,
    TrainedEditor,
    decoder_layers,
    train,
)
from medibench.knowledge_edit._grace import GraceTokensConfig, GraceTokensEditor
from medibench.knowledge_edit._grace_paper import GracePaperConfig, GracePaperEditor
from medibench.knowledge_edit._mend import MendEditor
from medibench.knowledge_edit._wise import WiseConfig, WiseEditor

__all__ = [
    "EDITORS",
    "EDITOR_ALIASES",
    "EDITOR_CONFIGS",
    "EditCase",
    "EditError",
    "EditHandle",
    "Editor",
    "FineTuneConfig",
    "FineTuneEditor",
    "InContextEditor",
    "LoraEditor",
    "TrainConfig",
    "editor_config",
    "load_editor",
]


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


class FineTuneEditor(TrainedEditor):
    name = "ft"
    config_type = FineTuneConfig

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        m = self._local(model)
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
        return self._applied(
            model, request, restore, converged, loss, steps, time.perf_counter() - t0
        )


class LoraEditor(TrainedEditor):
    name = "lora"
    config_type = LoraConfig

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        m = self._local(model)
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

        return self._applied(
            model, request, restore, converged, loss, steps, time.perf_counter() - t0
        )


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

        return self._applied(model, request, restore)


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
        m = self._local(model)
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

        return self._applied(model, request, restore, elapsed_s=time.perf_counter() - t0)


EDITORS = ("ft", "lora", "grace@paper", "grace-tokens", "balancedit", "wise", "mend:DIR",
           "in-context", "easyedit")  # fmt: skip
#: old editor names, kept working: name -> the editor it now means
EDITOR_ALIASES = {"grace": "grace-tokens"}
_TRAINED: dict[str, tuple[type[TrainedEditor], type[Any]]] = {
    "ft": (FineTuneEditor, FineTuneConfig),
    "lora": (LoraEditor, LoraConfig),
    "grace@paper": (GracePaperEditor, GracePaperConfig),
    "grace-tokens": (GraceTokensEditor, GraceTokensConfig),
    "balancedit": (BalancEditEditor, BalancEditConfig),
    "wise": (WiseEditor, WiseConfig),
}


#: editors whose hyper-parameters are a versioned file of ``knowledge_edit/configs/``: the
#: defaults that ``--config`` options override
EDITOR_CONFIGS = {"balancedit": "balancedit@1", "wise": "wise@1"}


def editor_config(name: str) -> dict[str, Any]:
    """The hyper-parameters of :data:`EDITOR_CONFIGS`'s file for editor ``name``."""
    import yaml

    path = Path(__file__).with_name("configs") / f"{EDITOR_CONFIGS[name]}.yaml"
    return dict(yaml.safe_load(path.read_text(encoding="utf-8")))


def config_fields(name: str) -> set[str] | None:
    """The options of editor ``name``'s config (an alias resolved), ``None`` for an editor
    without a config dataclass (``in-context``, ``easyedit``)."""
    entry = _TRAINED.get(EDITOR_ALIASES.get(name, name))
    return None if entry is None else {f.name for f in dataclasses.fields(entry[1])}


def load_editor(name: str, config: dict[str, Any] | None = None) -> Editor:
    """An editor by name (or an alias of :data:`EDITOR_ALIASES`) with its hyper-parameters (a
    mapping, e.g. from a YAML file; over the versioned file of :data:`EDITOR_CONFIGS`)."""
    config = dict(config or {})
    name = EDITOR_ALIASES.get(name, name)
    if name in EDITOR_CONFIGS:
        config = {**editor_config(name), **config}
    if name in _TRAINED:
        editor, cls = _TRAINED[name]
        known = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(config) - known)
        if bad:
            raise ValueError(f"editor {name}: unknown option(s) {bad}; valid: {sorted(known)}")
        for k in ("layers", "modules"):
            if k in config:
                config[k] = tuple(config[k])
        return editor(cls(**config))
    if name == "mend" or name.startswith("mend:"):
        folder = name.partition(":")[2]
        if not folder:
            raise ValueError("the mend editor needs its trained hypernetwork: --editor mend:DIR "
                             "(medibench edit train-mend --out DIR trains one)")  # fmt: skip
        if config:
            raise ValueError(f"editor mend: its settings are those of its training ({folder}/"
                             f"mend.json); it takes no options, got {sorted(config)}")  # fmt: skip
        return MendEditor(folder)
    if name == "in-context":
        return InContextEditor(**config)
    if name == "easyedit":
        return EasyEditEditor(**config)
    raise ValueError(f"unknown editor {name!r}; valid: {', '.join(EDITORS)}")


# -- training and helpers ---------------------------------------------------------------------


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


def _unwrapped(model: Any, flags: dict[str, bool]) -> None:
    """A model peft unwrapped: its attributes and ``requires_grad`` flags as before."""
    for attr in ("peft_config", "_hf_peft_config_loaded"):
        if attr in vars(model):
            delattr(model, attr)
    for n, p in model.named_parameters():
        p.requires_grad_(flags.get(n, False))


def _easyedit_hparams(module: Any, alg: str, path: Path) -> Any:
    cls = getattr(module, f"{alg}MultimodalHyperParams", None) or getattr(
        module, f"{alg}HyperParams", None
    )
    if cls is None:
        raise ValueError(f"easyedit: no hyper-parameter class for algorithm {alg!r}")
    return cls.from_hparams(str(path))
