"""``medibench edit train-mend``: train MEND's hypernetwork (:mod:`._mend`) on a task set's edit
requests, seeded, checkpointed and resumable.

Each step takes one request (every pass over the requests in an order drawn from
``[seed, pass]``) and one of its locality probes (drawn from ``[seed, pass, position]``), then,
as eric-mitchell/mend's ``EditTrainer.edit_step`` does: the model's logits on the locality
probe before the edit; the edit (the request's gradient factors through the hypernetwork, in
training mode, so its running statistics take them in); the edited model's answer loss on the
request (``l_edit``) and the KL divergence of its locality logits from those before
(``l_loc``, every token of the probe's teacher-forced sequence); ``cedit * l_edit + cloc *
l_loc`` is minimised, the hypernetwork with Adam at ``lr``, the per-weight edit steps with Adam
at ``lr_lr`` (the official ``lr_opt``), gradients clipped to a norm of ``grad_clip``. The
model's own weights never change: the edited weights exist only inside the step
(``torch.func.functional_call``).

Named deviations: the edit loss is on the request itself, where the official training uses a
rephrasing (``edit_outer``): a task set's rephrasings are its generality probes, kept unseen.
One edit per step, without ``accumulate_bs``. The locality inputs are the request's own
locality probes, not a separate corpus (Natural Questions in the official code).

The folder ``DIR``: ``mend.json`` (format, settings, base model and task set hashes, the edited
weights), ``checkpoint.pt`` (step, hypernetwork, both optimizers, the log; replaced atomically
every ``checkpoint_every`` steps and at the end), then ``train.jsonl`` (one line per step) and,
last, ``hypernetwork.safetensors``, whose presence means finished. A killed training re-run with
the same command continues from its checkpoint and ends with the same bytes as one never
stopped; the folder is locked (a second process is refused).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medibench.io import atomic_write_bytes, atomic_write_text, read_image
from medibench.knowledge_edit._mend import (
    HYPERNETWORK_FILE,
    RECORD_FILE,
    edited_weights,
    factors,
    hypernetwork,
    transformed_updates,
)

__all__ = ["CONFIG_FILE", "MendTrainConfig", "MendTrainError", "read_mend_config", "train_mend"]

#: the shipped, versioned training settings (``edit train-mend`` without ``--config``)
CONFIG_FILE = Path(__file__).parent / "configs" / "mend@1.yaml"
CHECKPOINT_FILE = "checkpoint.pt"
LOG_FILE = "train.jsonl"
FORMAT = "medibench-mend@1"
_OURS = {RECORD_FILE, CHECKPOINT_FILE, LOG_FILE, HYPERNETWORK_FILE, ".lock"}


class MendTrainError(ValueError):
    """A training that cannot start or go on; the message names the file, folder or option."""


@dataclass(frozen=True)
class MendTrainConfig:
    """MEND's training settings (defaults: ``configs/mend@1.yaml``)."""

    layers: tuple[int, ...] = (-2, -1)
    modules: tuple[str, ...] = ("mlp.up_proj", "mlp.down_proj")
    max_steps: int = 120
    lr: float = 1e-3
    edit_lr: float = 1e-3
    lr_lr: float = 1e-3
    cedit: float = 0.3
    cloc: float = 1.0
    n_hidden: int = 1
    rank: int = 1920
    grad_clip: float = 100.0
    checkpoint_every: int = 40
    seed: int = 0


def read_mend_config(path: Path | None = None, **overrides: Any) -> MendTrainConfig:
    """The settings of a YAML file (default :data:`CONFIG_FILE`), then ``overrides`` (options
    given as ``None`` are left out); an unknown or ill-typed option names the file."""
    import yaml

    path = CONFIG_FILE if path is None else Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MendTrainError(f"--config {path}: not readable YAML ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise MendTrainError(f"--config {path}: expected a mapping of options")
    data = {k: v for k, v in data.items() if k != "version"}
    data.update({k: v for k, v in overrides.items() if v is not None})
    fields = {f.name: f for f in dataclasses.fields(MendTrainConfig)}
    bad = sorted(set(data) - set(fields))
    if bad:
        raise MendTrainError(f"--config {path}: unknown option(s) {bad}; valid: {sorted(fields)}")
    for k in ("layers", "modules"):
        if k in data:
            if not isinstance(data[k], list | tuple) or not data[k]:
                raise MendTrainError(f"--config {path}: {k} must be a non-empty list")
            data[k] = tuple(data[k])
    for k, low in (("max_steps", 1), ("checkpoint_every", 1), ("n_hidden", 0), ("rank", 1)):
        if k in data and (not isinstance(data[k], int) or data[k] < low):
            raise MendTrainError(f"--config {path}: {k} must be an integer >= {low}, "
                                 f"got {data[k]!r}")  # fmt: skip
    for k in ("lr", "edit_lr", "lr_lr", "cedit", "cloc", "grad_clip"):
        if k in data and (not isinstance(data[k], int | float) or not data[k] >= 0):
            raise MendTrainError(f"--config {path}: {k} must be a number >= 0, got {data[k]!r}")
    return MendTrainConfig(**data)


@dataclass(frozen=True)
class MendTrainResult:
    folder: Path
    steps: int
    resumed_at: int
    last: dict[str, Any]


def train_mend(tasks: Path, model: Path, out: Path, config: MendTrainConfig, *,
               overwrite: bool = False) -> MendTrainResult:  # fmt: skip
    """Train (or resume, or find finished) the hypernetwork in ``out``; see the module's doc.
    Raises :class:`MendTrainError` for a bad input, ``RunFolderInUse`` when another process
    holds ``out``."""
    from medibench.knowledge_edit._tasks import TaskError, read_taskset
    from medibench.runs import run_folder_lock

    if not Path(model).is_dir():
        raise MendTrainError(f"--model {model}: not a folder (MEND trains on a local model)")
    _check_folder(out)
    try:
        ts = read_taskset(tasks)
    except TaskError as exc:
        raise MendTrainError(str(exc)) from None
    with run_folder_lock(out):
        if overwrite:
            for name in _OURS - {".lock"}:
                (out / name).unlink(missing_ok=True)
        return _Training(ts, Path(model), out, config).run()


def _check_folder(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise MendTrainError(f"--out {out}: a file, not a folder")
    if not out.is_dir():
        return
    others = sorted(p.name for p in out.iterdir() if p.name not in _OURS
                    and not (p.name.startswith(".") and p.name.endswith(".tmp")))  # fmt: skip
    if others:
        listed = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise MendTrainError(f"--out {out} holds files that are not a MEND training ({listed}); "
                             "give a new or empty folder")  # fmt: skip


class _Training:
    def __init__(self, ts: Any, model: Path, out: Path, cfg: MendTrainConfig) -> None:
        from medibench.knowledge_edit._answerers import TransformersAnswerer
        from medibench.knowledge_edit._editing import EditError
        from medibench.train._checkpoint import weights_hash

        self.ts, self.out, self.cfg = ts, out, cfg
        self.m = TransformersAnswerer(model)
        self.torch = self.m.torch
        self.m.model.eval()
        try:
            self.weights = edited_weights(self.m, self.settings)
        except EditError as exc:
            raise MendTrainError(f"--model {model}: {exc}") from None
        self.record = {
            "format": FORMAT, "settings": self.settings, "model": str(model),
            "model_hash": weights_hash(model), "tasks": str(ts.root),
            "tasks_hash": weights_hash(ts.root),
            "weights": [{"name": n, "shape": list(p.shape)} for n, p in self.weights.items()],
        }  # fmt: skip
        self.requests, self.locality = self._batches()

    @property
    def settings(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self.cfg).items()}  # fmt: skip

    def run(self) -> MendTrainResult:
        torch, cfg = self.torch, self.cfg
        self._check_record()
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.out / RECORD_FILE, json.dumps(self.record, indent=2) + "\n")
        net = hypernetwork(torch, self.weights, self.settings).train()
        inner = [p for n, p in net.named_parameters() if n != "edit_lrs"]
        opt = torch.optim.Adam(inner, lr=cfg.lr)
        lr_opt = torch.optim.Adam([net.edit_lrs], lr=cfg.lr_lr)
        start, log = self._resume(net, opt, lr_opt)
        flags = {id(p): p.requires_grad for p in self.m.model.parameters()}
        for p in self.m.model.parameters():
            p.requires_grad_(False)
        try:
            for step in range(start, cfg.max_steps):
                log.append(self._step(step, net, opt, lr_opt))
                if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.max_steps:
                    self._checkpoint(step + 1, net, opt, lr_opt, log)
        finally:
            for p in self.m.model.parameters():
                p.requires_grad_(flags[id(p)])
        self._finish(net, log)
        return MendTrainResult(self.out, cfg.max_steps, start, log[-1] if log else {})

    # -- one step ---------------------------------------------------------------------------
    def _step(self, step: int, net: Any, opt: Any, lr_opt: Any) -> dict[str, Any]:
        torch, cfg = self.torch, self.cfg
        i, j = _choice(cfg.seed, step, [len(x) for x in self.locality])
        edit_id, (batch, n) = self.requests[i]
        loc = self.locality[i][j]
        with torch.no_grad():
            base = self.m.model(**_inputs(loc)).logits.float()
        updates = transformed_updates(net, factors(self.m, batch, n, self.weights))
        edited = {k: w - updates[k].to(w.dtype) for k, w in self.weights.items()}
        call = torch.func.functional_call
        post_edit = call(self.m.model, edited, args=(), kwargs=dict(batch))
        post_loc = call(self.m.model, edited, args=(), kwargs=_inputs(loc)).logits.float()
        l_edit = post_edit.loss.float()
        l_loc = _kl(torch, base, post_loc, loc["attention_mask"])
        total = cfg.cedit * l_edit + cfg.cloc * l_loc
        if not math.isfinite(float(total.detach())):
            raise MendTrainError(
                f"the training diverged at step {step + 1} (loss {float(total)}); lower lr or "
                "edit_lr in --config"
            )
        opt.zero_grad(set_to_none=True)
        lr_opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(list(net.parameters()), cfg.grad_clip)
        opt.step()
        lr_opt.step()
        return {"step": step + 1, "edit_id": edit_id, "edit_loss": float(l_edit.detach()),
                "locality_loss": float(l_loc.detach())}  # fmt: skip

    # -- data -------------------------------------------------------------------------------
    def _batches(self) -> tuple[list[tuple[str, Any]], list[list[Any]]]:
        images: dict[str, Any] = {}

        def image(rel: str) -> Any:
            if rel not in images:
                images[rel] = read_image(self.ts.image_path(rel), mode="rgb")
            return images[rel]

        requests, locality = [], []
        for r in self.ts.requests:
            probes = [p for p in r.probes if p.kind == "locality"]
            if not probes:
                raise MendTrainError(
                    f"{self.ts.root}: edit {r.edit_id} has no locality probe; MEND's training "
                    "needs one per edit (its locality loss)"
                )
            requests.append((r.edit_id, self.m.teacher_batch(image(r.image), r.question,
                                                             r.target)))  # fmt: skip
            locality.append([self.m.teacher_batch(image(p.image), p.question, p.answer)[0]
                             for p in probes])  # fmt: skip
        return requests, locality

    # -- the folder -------------------------------------------------------------------------
    def _check_record(self) -> None:
        path = self.out / RECORD_FILE
        if not path.is_file():
            if (self.out / CHECKPOINT_FILE).is_file():
                raise MendTrainError(f"{path} is missing but {self.out} holds a checkpoint: its "
                                     "settings cannot be checked; give --overwrite or another "
                                     "--out")  # fmt: skip
            return
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
            assert isinstance(before, dict) and before.get("format") == FORMAT
        except (ValueError, UnicodeDecodeError, AssertionError) as exc:
            why = _first_line(exc) or "not a MEND record"
            raise MendTrainError(f"{path} is damaged ({why}); give --overwrite to start "
                                 "afresh, or another --out") from None  # fmt: skip
        diff = [f"{k} {before.get(k)!r} -> {v!r}" for k, v in self.record.items()
                if k not in ("model", "tasks") and before.get(k) != v]  # fmt: skip
        if diff:
            raise MendTrainError(f"{self.out} was trained with other settings or files "
                                 f"({'; '.join(diff)}); use the same to resume, or --overwrite "
                                 "to start afresh")  # fmt: skip

    def _resume(self, net: Any, opt: Any, lr_opt: Any) -> tuple[int, list[dict[str, Any]]]:
        path = self.out / CHECKPOINT_FILE
        if not path.is_file():
            return 0, []
        try:
            state = self.torch.load(path, map_location="cpu", weights_only=False)
            net.load_state_dict(state["hypernetwork"])
            opt.load_state_dict(state["optimizer"])
            lr_opt.load_state_dict(state["lr_optimizer"])
            return int(state["step"]), list(state["log"])
        except Exception as exc:  # noqa: BLE001 - a damaged checkpoint is one named error
            raise MendTrainError(f"{path} is damaged ({_first_line(exc)}); give --overwrite to "
                                 "start afresh") from None  # fmt: skip

    def _checkpoint(self, step: int, net: Any, opt: Any, lr_opt: Any, log: list[Any]) -> None:
        state = {"step": step, "hypernetwork": net.state_dict(), "optimizer": opt.state_dict(),
                 "lr_optimizer": lr_opt.state_dict(), "log": log}  # fmt: skip
        buffer = io.BytesIO()
        self.torch.save(state, buffer)
        atomic_write_bytes(self.out / CHECKPOINT_FILE, buffer.getvalue())

    def _finish(self, net: Any, log: list[dict[str, Any]]) -> None:
        from safetensors.torch import save

        lines = "".join(json.dumps(x) + "\n" for x in log)
        atomic_write_text(self.out / LOG_FILE, lines)
        tensors = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
        atomic_write_bytes(self.out / HYPERNETWORK_FILE, save(tensors, {"format": FORMAT}))


def _choice(seed: int, step: int, sizes: list[int]) -> tuple[int, int]:
    """Step ``step``'s request (a seeded order per pass) and locality probe (seeded draw)."""
    n = len(sizes)
    rounds, pos = divmod(step, n)
    i = int(np.random.default_rng([seed, rounds]).permutation(n)[pos])
    j = int(np.random.default_rng([seed, rounds, pos]).integers(sizes[i]))
    return i, j


def _inputs(batch: Any) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if k != "labels"}


def _kl(torch: Any, base: Any, post: Any, mask: Any) -> Any:
    """Mean over the unmasked tokens of KL(base || post) of the next-token distributions."""
    kl = (base.softmax(-1) * (base.log_softmax(-1) - post.log_softmax(-1))).sum(-1)
    mask = mask.to(kl.dtype)
    return (kl * mask).sum() / mask.sum()


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
