"""``mend:DIR``: MEND (Mitchell et al., 2022, "Fast Model Editing at Scale"), written for this
harness; ``medibench edit train-mend`` (:mod:`._mend_train`) trains the hypernetwork in ``DIR``.

Follows eric-mitchell/mend (``algs/mend.py``: ``GradientTransform``, ``MEND.edit``; ``nn.py``:
``IDMLP``, ``LRLinear``; ``hooks.py``; ``config/alg/mend.yaml``) and zjunlp/EasyEdit's port
(``easyeditor/trainer/algs/MEND.py``, the vision-language files of ``hparams/TRAINING/MEND/``,
which edit the ``up_proj`` and ``down_proj`` weights of the last decoder layers' MLPs):

* **Gradient factors.** The edited weights are linear modules' (``layers`` x ``modules``). One
  teacher-forced pass over the request (prompt, answer, end of turn; the loss on the answer)
  records each module's input ``x`` per token and, by backpropagation, the loss's gradient
  with respect to its output ``delta`` per token: the weight's gradient is the sum over tokens
  of the outer products ``delta x^T``. Tokens where ``x`` or ``delta`` is all zeros are left
  out, as the official code does.
* **Gradient transform**, one per distinct weight shape, shared by the weights of that shape
  (``shared: True``), each weight with its own scale and shift (``n_modes``): the factors are
  normalised by running means and standard deviations (updated while training, frozen when
  editing; ``norm: True``), concatenated (``combine: True``) and passed through ``n_hidden + 1``
  residual low-rank layers ``x + clamp(scale * (u v x + b) + shift, min=0)`` with ``u`` zero
  (identity at the start; ``init: id``), ``v`` standard normal (seeded), rank
  ``min(rank, width)``; the output splits back into ``x~`` and ``delta~``.
* **Edit**: each weight ``W`` (``out x in``) becomes ``W - edit_lr_i * sum_t delta~_t x~_t^T``
  with a learned step ``edit_lr_i`` per weight (initialised to ``edit_lr``), in one step.

Named deviations: the update is *subtracted* (a descent step when the transform is the
identity), where the official code adds it and training learns the sign; a short training on a
small model gets there from the first step. Only the published setting is offered (combined,
shared, identity-initialised, normalised); the one-sided and ``x_only``/``delta_only``
variants are not. Running statistics are merged a batch of tokens at a time (Chan et al.'s
pairwise update), the same statistics as the official token-by-token loop. Undo writes the
edited weights back from copies, so the model is as before bit for bit.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

from medibench.io import sha256_file
from medibench.knowledge_edit._answerers import Answerer, TransformersAnswerer
from medibench.knowledge_edit._editing import (
    EditCase,
    EditError,
    EditHandle,
    Editor,
    _reached,
    decoder_layers,
)

__all__ = ["HYPERNETWORK_FILE", "RECORD_FILE", "MendEditor", "edited_weights", "factors",
           "hypernetwork", "read_hypernetwork", "transformed_updates"]  # fmt: skip

RECORD_FILE = "mend.json"
HYPERNETWORK_FILE = "hypernetwork.safetensors"


class MendEditor(Editor):
    """MEND with the hypernetwork that ``medibench edit train-mend`` left in ``folder``."""

    name = "mend"

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.record, self.state = read_hypernetwork(self.folder)
        self.settings = self.record["settings"]
        #: what the run store records of this editor (another hypernetwork: another config)
        self.hypernetwork = str(self.folder)
        self.hypernetwork_sha256 = sha256_file(self.folder / HYPERNETWORK_FILE)
        self._built: Any = None  # the hypernetwork, built on the first edit (torch is optional)

    def edit(self, model: Answerer, request: EditCase) -> EditHandle:
        m = self._local(model)
        torch = m.torch
        t0 = time.perf_counter()
        weights = edited_weights(m, self.settings)
        recorded = {w["name"]: tuple(w["shape"]) for w in self.record["weights"]}
        found = {n: tuple(p.shape) for n, p in weights.items()}
        if found != recorded:
            raise EditError(
                f"mend:{self.folder}: its hypernetwork was trained for the weights {recorded}; "
                f"this model's are {found} (train one for this model with edit train-mend)"
            )
        net = self._net(torch, weights)
        batch, n = m.teacher_batch(request.image, request.question, request.target)
        with torch.no_grad():
            updates = transformed_updates(net, factors(m, batch, n, weights))
        saved = {k: p.detach().clone() for k, p in weights.items()}

        def restore() -> None:
            with torch.no_grad():
                for k, p in weights.items():
                    p.copy_(saved[k])

        try:
            with torch.no_grad():
                for k, p in weights.items():
                    p.sub_(updates[k].to(p.dtype))
                out = m.forward(batch, n)
            loss = float(out.loss)
            converged = _reached(out, batch, n)
        except BaseException:  # a failed edit leaves the model as it was
            restore()
            raise
        return self._applied(model, request, restore, converged, loss, 1,
                             time.perf_counter() - t0)  # fmt: skip

    def _net(self, torch: Any, weights: dict[str, Any]) -> Any:
        if self._built is None:
            net = hypernetwork(torch, weights, self.settings)
            net.load_state_dict(self.state)
            self._built = net.eval()
        return self._built


def read_hypernetwork(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The training record and the hypernetwork's tensors of a finished ``train-mend``."""
    record_path, weights_path = folder / RECORD_FILE, folder / HYPERNETWORK_FILE
    for there, why in (
        (folder.is_dir(), "no such folder (edit train-mend --out makes one)"),
        (record_path.is_file(), f"not a MEND training folder ({RECORD_FILE} missing)"),
        (
            weights_path.is_file(),
            f"its training has not finished ({HYPERNETWORK_FILE} missing): run the same edit "
            "train-mend command again to finish it",
        ),
    ):
        if not there:
            raise ValueError(f"mend:{folder}: {why}")
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        from safetensors.torch import load_file

        state = load_file(str(weights_path))
    except Exception as exc:  # noqa: BLE001 - any unreadable file is one named error
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"mend:{folder}: damaged training files ({why})") from None
    return record, state


def edited_weights(m: TransformersAnswerer, settings: dict[str, Any]) -> dict[str, Any]:
    """``{parameter name: weight}`` of the linear modules MEND edits: ``modules`` (paths inside
    a decoder layer, e.g. ``mlp.down_proj``) of each of ``layers`` (negative from the end)."""
    layers = decoder_layers(m)
    names = {id(mod): n for n, mod in m.model.named_modules()}
    out: dict[str, Any] = {}
    for i in settings["layers"]:
        if not -len(layers) <= i < len(layers):
            raise EditError(f"mend: layer {i} out of range: the model has {len(layers)} "
                            "decoder layers")  # fmt: skip
        for path in settings["modules"]:
            mod = layers[i]
            for part in path.split("."):
                mod = getattr(mod, part, None)
            if mod is None or not isinstance(getattr(mod, "weight", None), m.torch.nn.Parameter) \
                    or getattr(mod.weight, "ndim", 0) != 2:  # fmt: skip
                raise EditError(f"mend: decoder layer {i} has no linear module {path!r}")
            out[f"{names[id(mod)]}.weight"] = mod.weight
    return out


def factors(m: TransformersAnswerer, batch: Any, n: int, weights: dict[str, Any]
            ) -> dict[str, tuple[Any, Any]]:  # fmt: skip
    """``{name: (x, delta)}``: each edited module's inputs (tokens x in) and the gradient of the
    teacher-forced answer loss with respect to its outputs (tokens x out), detached; the tokens
    where either is all zeros left out."""
    torch = m.torch
    modules = {n_: mod for n_, mod in m.model.named_modules()}
    seen: dict[str, list[Any]] = {}
    hooks = []
    for name in weights:

        def hook(_mod: Any, args: Any, out: Any, name: str = name) -> None:
            seen[name] = [args[0].detach(), out]

        hooks.append(modules[name.removesuffix(".weight")].register_forward_hook(hook))
    flags = [p.requires_grad for p in weights.values()]
    try:
        with torch.enable_grad():
            for p in weights.values():
                p.requires_grad_(True)
            loss = m.forward(batch, n).loss
            grads = torch.autograd.grad(loss, [seen[k][1] for k in weights])
    finally:
        for h in hooks:
            h.remove()
        for p, flag in zip(weights.values(), flags, strict=True):
            p.requires_grad_(flag)
    out = {}
    for name, delta in zip(weights, grads, strict=True):
        x = seen[name][0]
        x = x.reshape(-1, x.shape[-1]).float()
        delta = delta.detach().reshape(-1, delta.shape[-1]).float()
        keep = (x != 0).any(-1) & (delta != 0).any(-1)
        out[name] = (x[keep], delta[keep])
    return out


def transformed_updates(net: Any, found: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """``{name: edit_lr_i * sum_t delta~_t x~_t^T}`` (out x in) from the factors, through the
    hypernetwork (its statistics updated when it is in training mode)."""
    out = {}
    for name, (x, delta) in found.items():
        key, mode = net.place[name]
        i = net.order[name]
        tx, td = net.transforms[key](x, delta, mode)
        out[name] = net.edit_lrs[i] * (td.T @ tx)
    return out


def hypernetwork(torch: Any, weights: dict[str, Any], settings: dict[str, Any]) -> Any:
    """A new hypernetwork for ``weights`` (seeded by ``settings["seed"]``)."""
    torch.manual_seed(int(settings["seed"]))
    return _classes(torch)[1](
        [(n, int(p.shape[1]), int(p.shape[0])) for n, p in weights.items()], settings
    )


@functools.cache
def _classes(torch: Any) -> tuple[Any, Any]:
    """The hypernetwork's ``torch.nn.Module`` classes, made on first use (torch is optional)."""
    nn = torch.nn

    class Transform(torch.nn.Module):
        """Normalise (x, delta) by running statistics, concatenate, residual low-rank MLP."""

        mean: Any  # running statistics (buffers): mean, summed squared deviations, rows seen
        m2: Any
        count: Any

        def __init__(self, x_dim: int, d_dim: int, n_modes: int, s: dict[str, Any]) -> None:
            super().__init__()
            self.x_dim, width = x_dim, x_dim + d_dim
            rank = min(int(s["rank"]), width)
            self.u = nn.ParameterList(nn.Parameter(torch.zeros(width, rank))
                                      for _ in range(int(s["n_hidden"]) + 1))  # fmt: skip
            self.v = nn.ParameterList(nn.Parameter(torch.randn(rank, width))
                                      for _ in range(int(s["n_hidden"]) + 1))  # fmt: skip
            self.b = nn.ParameterList(nn.Parameter(torch.zeros(width))
                                      for _ in range(int(s["n_hidden"]) + 1))  # fmt: skip
            self.scale = nn.ParameterList(nn.Parameter(torch.ones(n_modes, width))
                                          for _ in range(int(s["n_hidden"]) + 1))  # fmt: skip
            self.shift = nn.ParameterList(nn.Parameter(torch.zeros(n_modes, width))
                                          for _ in range(int(s["n_hidden"]) + 1))  # fmt: skip
            for name in ("mean", "m2"):
                self.register_buffer(name, torch.zeros(width))
            self.register_buffer("count", torch.zeros(()))

        def forward(self, x: Any, delta: Any, mode: int) -> tuple[Any, Any]:
            z = torch.cat([x, delta], dim=-1)
            if self.training and z.shape[0]:
                self._observe(z.detach())
            if self.count < 2:
                raise EditError("mend: the hypernetwork's statistics need at least two tokens")
            std = (self.m2 / (self.count - 1)).sqrt()
            h = (z - self.mean) / (std + 1e-7)
            for u, v, b, scale, shift in zip(self.u, self.v, self.b, self.scale, self.shift,
                                             strict=True):  # fmt: skip
                pre = (h @ v.T) @ u.T + b
                h = h + (pre * scale[mode] + shift[mode]).clamp(min=0)
            return h[:, : self.x_dim], h[:, self.x_dim :]

        def _observe(self, z: Any) -> None:
            """Merge a batch of rows into the running mean and sum of squared deviations."""
            k, n = self.count, z.shape[0]
            mean, m2 = z.mean(0), ((z - z.mean(0)) ** 2).sum(0)
            total = k + n
            diff = mean - self.mean
            self.mean = self.mean + diff * n / total
            self.m2 = self.m2 + m2 + diff**2 * k * n / total
            self.count = total

    class Hypernetwork(torch.nn.Module):
        """One :class:`Transform` per weight shape and a learned step per weight."""

        def __init__(self, weights: list[tuple[str, int, int]], s: dict[str, Any]) -> None:
            super().__init__()
            shapes: dict[str, list[str]] = {}
            for name, x_dim, d_dim in weights:
                shapes.setdefault(f"{x_dim}x{d_dim}", []).append(name)
            dims = {f"{x}x{d}": (x, d) for _, x, d in weights}
            self.transforms = nn.ModuleDict(
                {k: Transform(*dims[k], len(names), s) for k, names in shapes.items()}
            )
            self.place = {n: (k, names.index(n)) for k, names in shapes.items() for n in names}
            self.order = {name: i for i, (name, _, _) in enumerate(weights)}
            self.edit_lrs = nn.Parameter(torch.full((len(weights),), float(s["edit_lr"])))

    return Transform, Hypernetwork
