"""``grace@paper``: GRACE (Hartvigsen et al., 2023) as published and as EasyEdit implements it,
written for this harness.

Follows zjunlp/EasyEdit's ``easyeditor/models/grace/GRACE.py`` (``GRACEAdapter``,
``GRACEMultimodal.edit``) with the settings of its vision-language hyper-parameter files
(``hparams/GRACE/llavaov-7b.yaml``, ``qwen2vl-7b.yaml``, ``qwen3vl-4b.yaml``): one module of
one decoder layer (``layer``, ``module``: the MLP's ``down_proj``, as those files choose) is
wrapped by a codebook of (key, radius, value, answer) entries.

* **Key**: the wrapped module's *input* at the prompt's last token (the token before the first
  answer token of the teacher-forced edit sequence).
* **Value**: one vector per edit, the size of the module's output, drawn uniform in [0, 1)
  (EasyEdit's ``val_init: cold``), trained with Adam (``lr``, EasyEdit's ``edit_lr`` 1.0) for
  exactly ``n_iter`` steps (20 in EasyEdit's VLM files) on the cross-entropy of the answer's
  tokens, the model's weights frozen.
* **Lookup** (``replace_last``): each forward pass queries one token per row: the prompt's last
  token in a teacher-forced pass, else the last token of the input, which is the prompt's last
  token on generation's prompt pass and each new token on the later (cached) passes; a model
  that generates without its cache is refused. When the query's nearest key (``distance``:
  ``euclidean``, EasyEdit's; or ``cosine``, 1 - cosine similarity, as M3Bench's reproduction
  configures) is within that key's radius, the module's output at that token becomes the key's
  value. Every other token, and every query outside all radii, keeps the module's output: that
  is what keeps an edit local.
* **Codebook rules** for a new edit whose key is at distance ``d`` from the nearest key: farther
  than ``eps`` plus that key's radius, a new entry with radius ``eps`` (``epsilon_init`` 1.0);
  closer and with another answer, a new entry and both radii split to ``d / 2`` (the older one
  a hair less, 1e-5, so the two balls do not touch); closer with the same answer, no new entry:
  the nearest key's radius grows to ``d`` if smaller (``eps_expand: coverage``) and its value is
  trained on this edit.

Named deviations from EasyEdit's code: its ``dist_fn`` setting is read but never used (the
distance is always Euclidean); here ``distance`` is honoured. Its answer comparison for the
rules above compares the *mean* of the label tensors (prompt positions included) and keeps the
answers in reverse order of the keys after the second edit; here an entry's answer is its token
ids, kept beside its key. A teacher-forced pass after an edit (EasyEdit's own reliability
reading) looks up, in its code, the position of the last edit's key (clipped to the sequence)
whatever the sequence; here each sequence's own prompt's last token. Its value starts from the
global random state; here from a generator seeded by ``seed`` (the same start for every edit:
reproducible). Its loss covers the answer's tokens without the end of turn (the labels are
built from the target text alone); so does this one, so the end of the answer is the model's
own (``converged`` is judged on the same tokens, after the last step). Undo restores the
codebook as it was before the edit (entries, radii and any value trained in place); the last
undo puts the original module back, so the model's state dict is as before, bit for bit.

The editor is a :class:`~medibench.knowledge_edit._memory.MemoryEditor`: ``memory_site`` is the
wrapped module and ``fires`` looks queries up as the codebook's forward pass does.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from medibench.knowledge_edit._answerers import Answerer
from medibench.knowledge_edit._editing import (
    EditCase,
    EditError,
    EditHandle,
    TrainedEditor,
    decoder_layers,
    forward_with_hook,
    train_steps,
)
from medibench.knowledge_edit._memory import MemoryLookup

__all__ = [
    "DISTANCES",
    "CodebookConfig",
    "CodebookEditor",
    "GracePaperConfig",
    "GracePaperEditor",
    "ModuleEditor",
    "answer_batch",
    "install",
    "memory_at",
    "require_cache",
    "wrapped_module",
]

DISTANCES = ("euclidean", "cosine")
#: how much less than half their distance an older radius becomes when a conflicting key splits it
_SPLIT_MARGIN = 1e-5


@dataclass(frozen=True)
class CodebookConfig:
    """What a codebook editor's config holds (``grace@paper``'s, ``balancedit``'s): ``layer``:
    the decoder layer (negative from the end); ``module``: the wrapped module's dotted path
    inside that layer; ``lr``, ``n_iter``: Adam's learning rate and its steps, all run
    (EasyEdit's ``edit_lr``, ``n_iter``); ``distance``: ``euclidean`` or ``cosine``; ``tol``:
    the loss at most which, with every answer token the argmax after the last step, an edit
    counts as converged; ``seed``: the value's random start."""

    editor: ClassVar[str] = "grace@paper"
    layer: int = -2
    module: str = "mlp.down_proj"
    lr: float = 1.0
    n_iter: int = 20
    distance: Literal["euclidean", "cosine"] = "euclidean"
    tol: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.distance not in DISTANCES:
            raise ValueError(f"{self.editor}: distance must be one of {', '.join(DISTANCES)}, "
                             f"got {self.distance!r}")  # fmt: skip
        if self.n_iter < 1:
            raise ValueError(f"{self.editor}: n_iter must be at least 1, got {self.n_iter}")


@dataclass(frozen=True)
class GracePaperConfig(CodebookConfig):
    """:class:`CodebookConfig`'s settings and ``eps``: a new key's radius (``epsilon_init``)."""

    eps: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.eps > 0:
            raise ValueError(f"grace@paper: eps must be positive, got {self.eps}")


class ModuleEditor(TrainedEditor):
    """A trained editor that puts a :meth:`wrapper` module in place of the module at its
    config's ``layer`` / ``module`` and trains what the wrapper holds (:meth:`train`). An edit's
    undo restores the wrapper as it was before the edit and, once it holds no edit, puts the
    original module back (after the wrapper's ``release()``), so the model's state dict and
    modules are as before, bit for bit; a failed edit is undone before its error is raised."""

    #: what the editor does that needs the key-value cache: a model that generates without it
    #: is refused (``None``: any model)
    needs_cache: ClassVar[str | None] = None

    def wrapper(self, torch: Any) -> type:
        """The wrapper module class, made ``wrapper(module, model, *self.wrapper_args())``."""
        raise NotImplementedError

    def wrapper_args(self) -> tuple[Any, ...]:
        return (self.config,)

    def train(self, m: Any, wrapper: Any, request: EditCase) -> tuple[bool, float | None, int]:
        """Train ``request``'s edit into ``wrapper`` on local model ``m``: ``(converged, loss,
        steps)``."""
        raise NotImplementedError

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        t0 = time.perf_counter()
        m = self._local(model)
        if self.needs_cache is not None:
            require_cache(m, self.name, self.needs_cache)
        kind = self.wrapper(m.torch)
        parent, attr, wrapper = install(m, self.config, self.name, kind, *self.wrapper_args())
        saved = wrapper.snapshot()

        def restore() -> None:
            wrapper.restore(saved)
            if not wrapper.holds_edits:
                setattr(parent, attr, wrapper.inner)
                wrapper.release()

        try:
            result = self.train(m, wrapper, request)
        except BaseException:  # a failed edit leaves the model as it was
            restore()
            raise
        return self._applied(model, request, restore, *result, time.perf_counter() - t0)

    def memory(self, model: Answerer) -> Any:
        """The :meth:`wrapper` module at ``layer`` / ``module`` (:class:`EditMemory`), or
        ``None``."""
        m = self._local(model)
        return memory_at(m, self.config, self.wrapper(m.torch))


class CodebookEditor(ModuleEditor):
    """A codebook editor (``grace@paper``, ``balancedit``): :meth:`admit` gives the entry the
    edit's key and answer train, whose value is trained for the config's ``n_iter`` Adam steps
    on the edit's teacher-forced answer, then frozen."""

    def wrapper_args(self) -> tuple[Any, ...]:
        return (self.config.distance,)

    def admit(self, m: Any, codebook: Any, request: EditCase, key: Any,
              answer: tuple[int, ...], width: int) -> int:  # fmt: skip
        """The index of the codebook entry that ``request`` (its ``key``, the ``answer``'s
        token ids, the value's ``width``) trains."""
        raise NotImplementedError

    def train(self, m: Any, codebook: Any, request: EditCase) -> tuple[bool, float | None, int]:
        cfg = self.config
        batch, n = answer_batch(m, request)
        answer = tuple(int(t) for t in batch["labels"][0, n:-1])
        key, width = codebook.probe(m, batch, n)
        entry = self.admit(m, codebook, request, key, answer, width)
        result = train_steps(m, batch, n, [codebook.values[entry]], lr=cfg.lr,
                             steps=cfg.n_iter, tol=cfg.tol)  # fmt: skip
        codebook.values[entry].requires_grad_(False)
        return result


class GracePaperEditor(CodebookEditor):
    name = "grace@paper"
    config_type = GracePaperConfig
    # without the cache every step reruns the prompt, whose last token is not looked up
    needs_cache = "GRACE looks up one token per pass and needs the cache"

    def wrapper(self, torch: Any) -> type:
        return _codebook_class(torch)

    def admit(self, m: Any, codebook: Any, request: EditCase, key: Any,
              answer: tuple[int, ...], width: int) -> int:  # fmt: skip
        return int(codebook.admit(key, answer, width, self.config))

    # -- the memory, as the latent-space analysis reads it (:mod:`._memory`) ------------------
    def memory_site(self, model: Answerer) -> Any:
        """The wrapped module (``layer``'s ``module``) itself, not its codebook: its input at
        the looked-up token is the codebook's query."""
        m = self._local(model)
        _, _, module = wrapped_module(m, self.config)
        return module.inner if isinstance(module, _codebook_class(m.torch)) else module

    def fires(self, model: Answerer, queries: Any) -> MemoryLookup:
        """Whether the codebook answers each query (its nearest key within that key's radius,
        as the lookup decides) and the distance to that key (``distance``: the codebook's own,
        Euclidean or cosine); without a codebook none fires and every distance is NaN."""
        m = self._local(model)
        _, _, module = wrapped_module(m, self.config)
        n = int(queries.shape[0])
        if not isinstance(module, _codebook_class(m.torch)) or not module.keys:
            return MemoryLookup(np.zeros(n, dtype=bool), np.full(n, np.nan))
        with m.torch.no_grad():
            dist, idx = module.nearest(queries)
            radii = m.torch.tensor(module.radii, dtype=dist.dtype, device=dist.device)
            fired = dist <= radii[idx]  # as the forward pass compares, in its dtype
        return MemoryLookup(fired.cpu().numpy(), dist.double().cpu().numpy())


def require_cache(m: Any, editor: str, why: str) -> None:
    """Refuse local model ``m`` when it generates without its key-value cache (``why``: what
    ``editor`` does that needs it)."""
    if getattr(getattr(m.model, "generation_config", None), "use_cache", True) is False:
        raise EditError(f"{editor}: model {m.path} generates without its key-value cache "
                        f"(generation_config.use_cache is false); {why}")  # fmt: skip


def install(m: Any, cfg: Any, editor: str, kind: type, *args: Any) -> tuple[Any, str, Any]:
    """``(parent, attribute, module)``: the ``kind`` module at ``cfg.layer`` / ``cfg.module`` of
    local model ``m``, put in place of the module there (``kind(module, m, *args)``) unless an
    earlier edit did (an error names ``editor``)."""
    parent, attr, inner = wrapped_module(m, cfg, editor)
    module = inner if isinstance(inner, kind) else kind(inner, m, *args)
    setattr(parent, attr, module)
    return parent, attr, module


def answer_batch(m: Any, request: EditCase) -> tuple[Any, int]:
    """The edit's teacher-forced batch on local model ``m`` and its prompt length, labelled on
    the answer's tokens alone: the end of turn is not (EasyEdit's labels are the target
    text's)."""
    batch, n = m.teacher_batch(request.image, request.question, request.target)
    labels = batch["labels"].clone()
    labels[0, -1] = -100
    batch["labels"] = labels
    return batch, n


def memory_at(m: Any, cfg: Any, kind: type) -> Any:
    """The ``kind`` module an editor put at ``cfg.layer`` / ``cfg.module`` of local model
    ``m``, or ``None``."""
    try:
        _, _, module = wrapped_module(m, cfg)
    except EditError:
        return None
    return module if isinstance(module, kind) else None


def wrapped_module(m: Any, cfg: Any, editor: str = "grace@paper") -> tuple[Any, str, Any]:
    """``(parent, attribute, module)`` of ``cfg.module`` in decoder layer ``cfg.layer`` (an
    error names ``editor``)."""
    layers = decoder_layers(m)
    if not -len(layers) <= cfg.layer < len(layers):
        raise EditError(f"{editor}: layer {cfg.layer} out of range ({len(layers)} layers)")
    parent: Any = layers[cfg.layer]
    *path, attr = cfg.module.split(".")
    for part in path:
        parent = getattr(parent, part, None)
        if parent is None:
            break
    if parent is None or not isinstance(getattr(parent, attr, None), m.torch.nn.Module):
        raise EditError(f"{editor}: decoder layer {cfg.layer} of {m.path} has no module "
                        f"{cfg.module!r} (set the `module` option)")  # fmt: skip
    return parent, attr, getattr(parent, attr)


@functools.cache
def _codebook_class(torch: Any) -> Any:
    """The codebook ``torch.nn.Module`` class, made on first use (torch is optional)."""

    class PaperCodebook(torch.nn.Module):
        """A wrapped module with GRACE's codebook; values are kept out of the state dict."""

        def __init__(self, inner: Any, owner: Any, distance: str) -> None:
            super().__init__()
            self.inner = inner
            self.owner = [owner]  # a list: not registered as a sub-module
            self.distance = distance
            self.keys: list[Any] = []
            self.values: list[Any] = []
            self.radii: list[float] = []
            self.answers: list[tuple[int, ...]] = []

        @property
        def weight(self) -> Any:  # code that reads the wrapped layer's weight (its dtype)
            return self.inner.weight

        @property
        def holds_edits(self) -> bool:
            return bool(self.keys)

        def release(self) -> None:
            """Nothing to let go of when the original module is put back."""

        def probe(self, m: Any, batch: Any, n: int) -> tuple[Any, int]:
            """The key (the module's input at the prompt's last token) and the output width."""
            seen: dict[str, Any] = {}

            def hook(_mod: Any, args: Any, out: Any) -> None:
                seen["key"], seen["width"] = args[0][0, n - 1].detach(), out.shape[-1]

            forward_with_hook(m, self.inner, batch, hook)
            return seen["key"], int(seen["width"])

        def snapshot(self) -> tuple[Any, ...]:
            values = [v.detach().clone() for v in self.values]
            return list(self.keys), list(self.values), values, list(self.radii), list(self.answers)

        def restore(self, saved: tuple[Any, ...]) -> None:
            keys, objects, values, radii, answers = saved
            with torch.no_grad():
                for obj, value in zip(objects, values, strict=True):
                    obj.copy_(value)
            self.keys[:], self.values[:], self.radii[:] = keys, objects, radii
            self.answers[:] = answers

        def admit(self, key: Any, answer: tuple[int, ...], width: int, cfg: Any) -> int:
            """The entry the edit trains: a new one, or the nearest of the same answer."""
            if self.keys:
                dist, nearest = self.nearest(key[None])
                d, i = float(dist[0]), int(nearest[0])
                if d <= cfg.eps + self.radii[i]:
                    if self.answers[i] == answer:  # the same answer: widen, train that value
                        self.radii[i] = max(self.radii[i], d)
                        return i
                    self.radii[i] = d / 2 - _SPLIT_MARGIN
                    return self.add(key, answer, width, d / 2, cfg.seed)
            return self.add(key, answer, width, cfg.eps, cfg.seed)

        def add(self, key: Any, answer: tuple[int, ...], width: int, radius: float,
                seed: int) -> int:  # fmt: skip
            gen = torch.Generator(device="cpu").manual_seed(seed)
            value = torch.rand(width, generator=gen, dtype=torch.float32).to(key.device)
            self.keys.append(key.detach().float())
            self.values.append(torch.nn.Parameter(value))
            self.radii.append(float(radius))
            self.answers.append(answer)
            return len(self.keys) - 1

        def nearest(self, queries: Any) -> tuple[Any, Any]:
            """Each query's distance to its nearest key, and that key's index."""
            q, keys = queries.float(), torch.stack(self.keys)
            if self.distance == "cosine":
                sim = (
                    torch.nn.functional.normalize(q, dim=-1)
                    @ torch.nn.functional.normalize(keys, dim=-1).T
                )
                dists = 1 - sim
            else:
                dists = torch.cdist(q, keys)
            return dists.min(dim=1)

        # -- the router's reading (EditMemory) -------------------------------------------
        def query(self, model: Any, image: Any, question: str) -> Any:
            """The wrapped module's input at the last token of ``question``'s prompt: ``(d,)``."""
            seen: dict[str, Any] = {}

            def hook(_mod: Any, args: Any, _out: Any) -> None:
                seen["x"] = args[0][0, -1].detach()

            forward_with_hook(model, self.inner, model.encode([image], [question]), hook)
            return seen["x"]

        def route_distance(self, hidden: Any) -> float:
            """The distance of ``hidden`` (``(d,)``) to the nearest key (``inf``: no key)."""
            if not self.keys:
                return float("inf")
            return float(self.nearest(hidden.reshape(1, -1))[0][0])

        def fires(self, hidden: Any) -> bool:
            """Whether ``hidden`` is within its nearest key's radius."""
            if not self.keys:
                return False
            dist, idx = self.nearest(hidden.reshape(1, -1))
            return bool(float(dist[0]) <= self.radii[int(idx[0])])

        def forward(self, x: Any, *args: Any, **kwargs: Any) -> Any:
            out = self.inner(x, *args, **kwargs)
            if not self.keys:
                return out
            forced = self.owner[0].teacher_prompt_length  # a teacher-forced pass
            pos = forced - 1 if forced is not None else x.shape[1] - 1
            return self.replace_hits(out, x[:, pos, :].detach(), pos)

        def replace_hits(self, out: Any, queries: Any, pos: int) -> Any:
            """``out`` with token ``pos`` of each row whose query (``queries``: ``(rows, d)``)
            is within its nearest key's radius replaced by that key's value."""
            dist, idx = self.nearest(queries)
            radii = torch.tensor(self.radii, dtype=dist.dtype, device=dist.device)
            hit = dist <= radii[idx]
            if not bool(hit.any()):
                return out
            values = torch.stack(self.values)[idx].to(out.dtype)
            replaced = out.clone()
            replaced[:, pos] = torch.where(hit[:, None], values, out[:, pos])
            return replaced

    return PaperCodebook
