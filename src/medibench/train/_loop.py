"""The training loop: checks, resume, micro-batches with gradient accumulation (and data
parallelism through ``accelerate``), the log, checkpoints, evaluation at checkpoints.

One optimizer step of ``P`` processes with ``A`` micro-batches each averages ``P * A``
micro-batch losses, micro-batch ``a`` of process ``r`` being number ``a * P + r`` of the step
(its data and its noise are seeded by that number, :mod:`medibench.train._data`): the same
weights, up to float summation order, as one process with ``P * A`` micro-batches.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medibench._console import err, labelled
from medibench.train._checkpoint import (
    CheckpointDamaged,
    DamagedFile,
    check_weights_files,
    complete_checkpoints,
    latest_checkpoint,
    model_card,
    read_checkpoint,
    save_checkpoint,
    weights_hash,
)
from medibench.train._config import TrainConfig, TrainError
from medibench.train._data import (
    TrainingData,
    dataset_fingerprint,
    dataset_hash,
    flipped,
    open_training_data,
)
from medibench.train._families import family_class

__all__ = ["TrainResult", "check_training", "train"]

CONFIG_FILE = "train_config.json"
LOG_FILE = "train.jsonl"


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` did: the folder, the first and last step of this call, the last
    checkpoint, and the evaluation runs it wrote."""

    out: Path
    start_step: int
    final_step: int
    checkpoint: Path
    evaluations: tuple[Path, ...]
    #: this process is the main one (the one that writes; always true without data parallelism)
    main_process: bool = True


@dataclass
class Checked:
    """What the checks found, before any weights are loaded."""

    config: TrainConfig
    weights: Path | str
    data: TrainingData
    eval_samples: int
    #: sha256 over the base weights' files, and over the training samples' records and files
    base_hash: str
    dataset_fingerprint: str


def check_training(config: TrainConfig, *, overwrite: bool = False) -> Checked:
    """Every check that needs no weights loaded: the base weights' folder, the resolution bins
    against the model's multiple, the dataset (targets, masks, ``--mix``), the evaluation
    dataset (never the training samples), and a folder trained before with other settings,
    other base weights or another dataset (unless ``overwrite``). Raises :class:`TrainError`
    naming the problem."""
    from medibench.models._weights import WeightsNotFoundError, resolve_weights

    try:
        weights = resolve_weights(config.weights, model=config.family)
    except WeightsNotFoundError as exc:
        raise TrainError(f"--model {config.model!r}: {exc}") from None
    if not Path(str(weights)).is_dir():
        raise TrainError(f"--model {config.model!r}: training needs the weights on disk")
    cls = family_class(config.family, Path(weights))
    cls.check(Path(weights))
    try:
        check_weights_files(weights)
    except DamagedFile as exc:
        raise TrainError(f"--model {config.model!r}: {exc}") from None
    data, _ = open_training_data(
        config.dataset,
        options=config.dataset_options,
        bins=config.bins,
        multiple=cls.multiple(Path(weights)),
        mix=config.mix,
        seed=config.seed,
        need_mask=cls.needs_mask,
    )
    eval_samples = _check_eval_dataset(config, data) if config.eval_dataset else 0
    checked = Checked(
        config, weights, data, eval_samples, weights_hash(weights), dataset_fingerprint(data)
    )
    if not overwrite:
        _check_folder(checked)
    return checked


def _check_folder(checked: Checked) -> None:
    """Refuse to resume a folder whose record is missing (with checkpoints), damaged, or made
    with other settings, other base weights or another dataset."""
    config = checked.config
    recorded = config.out / CONFIG_FILE
    afresh = "give --overwrite to start afresh, or another --out"
    if not recorded.is_file():
        if complete_checkpoints(config.out):
            raise TrainError(
                f"{recorded} is missing but {config.out} holds checkpoints: the settings they "
                f"were trained with cannot be checked; {afresh}"
            )
        return
    try:
        record = json.loads(recorded.read_text(encoding="utf-8"))
        before = TrainConfig.from_dict(record)
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TrainError(f"{recorded} is damaged ({why}); {afresh}") from None
    diff = config.differences(before)
    if diff:
        raise TrainError(
            f"{config.out} was trained with other settings ({'; '.join(diff)}); "
            f"use the same settings to resume, or {afresh}"
        )
    changed = {
        "base_hash": f"the base weights {checked.weights}",
        "dataset_fingerprint": f"the dataset {config.dataset}",
    }
    now = {"base_hash": checked.base_hash, "dataset_fingerprint": checked.dataset_fingerprint}
    for key, what in changed.items():
        if key in record and record[key] != now[key]:  # older records lack the fingerprint
            raise TrainError(
                f"{what} changed since {config.out} was trained on it ({key} {record[key]} "
                f"in {recorded}, now {now[key]}); resume with the same files, or {afresh}"
            )


def _start_afresh(out: Path) -> None:
    """``--overwrite``: remove what a training wrote in ``out`` (checkpoints, the log, the
    record, the evaluations); other files stay."""
    import shutil

    for path in out.glob("checkpoint-*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    for name in (CONFIG_FILE, LOG_FILE):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "eval", ignore_errors=True)


def train(
    config: TrainConfig,
    *,
    eval_model_options: tuple[str, ...] = (),
    console: Any = None,
    overwrite: bool = False,
) -> TrainResult:
    """Train (or resume) as ``config`` says; see :mod:`medibench.train`. ``overwrite``: start
    afresh, removing the checkpoints, log and record a training left in ``config.out``.

    Holds the folder's lock (the main process of a data-parallel launch). Raises
    :class:`TrainError` before the first step for every bad input it can see.
    """
    import os

    import torch
    from accelerate import Accelerator

    from medibench.runs import run_folder_lock

    # Processes launched on a machine without CUDA (torchrun, accelerate launch --multi_gpu)
    # train on CPU over gloo; accelerate only takes that road when told the device is the CPU.
    parallel = int(os.environ.get("WORLD_SIZE", "1")) > 1
    cpu = not torch.cuda.is_available() and parallel
    if not parallel:  # accelerate keeps one state per process: a second training may differ
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)
    if config.mixed_precision == "fp16" and not torch.cuda.is_available():
        raise TrainError(
            "--mixed-precision fp16 needs a CUDA GPU (CPU autocast has no float16 "
            "matmuls for mixed weights); use bf16 or no on this machine"
        )
    accelerator = Accelerator(mixed_precision=config.mixed_precision, cpu=cpu)
    lock = run_folder_lock(config.out) if accelerator.is_main_process else contextlib.nullcontext()
    with lock:
        checked = check_training(config, overwrite=overwrite)
        if overwrite and accelerator.is_main_process:
            _start_afresh(config.out)
        accelerator.wait_for_everyone()
        return _Training(checked, accelerator, eval_model_options, console).run()


class _Training:
    def __init__(
        self, checked: Checked, accelerator: Any, eval_options: tuple[str, ...], console: Any
    ) -> None:
        import torch

        self.checked, self.cfg, self.data = checked, checked.config, checked.data
        self.acc, self.eval_options, self.console = accelerator, eval_options, console
        dtype = {"no": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
        cls = family_class(self.cfg.family, checked.weights)
        self.family = cls(
            checked.weights, self.cfg, accelerator.device, dtype[self.cfg.mixed_precision]
        )
        params = self.family.trainable_parameters()
        self.optimizer = _optimizer(self.cfg, params)
        self.family.net, self.optimizer = accelerator.prepare(self.family.denoiser, self.optimizer)
        self.params = params
        self.scheduler = _lr_scheduler(self.cfg, self.optimizer)
        self.ema = _ema(params) if self.cfg.ema else None

    def run(self) -> TrainResult:
        cfg, acc = self.cfg, self.acc
        out = cfg.out
        start, seen = self._resume()
        if acc.is_main_process:
            out.mkdir(parents=True, exist_ok=True)
            self._record(start)
        acc.wait_for_everyone()
        world, rank = acc.num_processes, acc.process_index
        evaluations = list(self._evaluate_done(start))
        last = latest_checkpoint(out)
        for step in range(start, cfg.max_steps):
            t0 = time.perf_counter()
            lr = self.scheduler.get_last_lr()[0]
            loss = self._step(step, world, rank)
            seen += cfg.batch_size * cfg.grad_accum * world
            done = step + 1
            if acc.is_main_process:
                self._log(
                    {
                        "step": done,
                        "loss": loss,
                        "lr": lr,
                        "samples_seen": seen,
                        "time_per_step_s": round(time.perf_counter() - t0, 6),
                    }
                )
            if self._checkpoint_due(done):
                path = self._save(done, seen)
                last = (done, path)
                if cfg.eval_every and done % cfg.eval_every == 0:
                    evaluations.append(self._evaluate(done, path))
        if last is None or last[0] != cfg.max_steps:
            last = (cfg.max_steps, out / f"checkpoint-{cfg.max_steps}")
        return TrainResult(
            out, start, cfg.max_steps, last[1], tuple(evaluations), acc.is_main_process
        )

    # -- one step -------------------------------------------------------------------------------
    def _step(self, step: int, world: int, rank: int) -> float:
        import torch

        cfg, fam = self.cfg, self.family
        total = torch.zeros((), device=self.acc.device)
        for a in range(cfg.grad_accum):
            micro = a * world + rank
            idx = self.data.batch(step, micro, cfg.batch_size)
            pixels = [self.data.pixels(i, mask=fam.needs_mask) for i in idx]
            if cfg.random_flip:
                pixels = flipped(pixels, cfg.seed, step, micro)
            prompts = [self.data.items[i].sample.instruction for i in idx]
            gen = torch.Generator(self.acc.device).manual_seed(_micro_seed(cfg.seed, step, micro))
            sync = a == cfg.grad_accum - 1
            with contextlib.nullcontext() if sync else self.acc.no_sync(fam.net):
                with self.acc.autocast():
                    loss = fam.loss(pixels, prompts, gen)
                self.acc.backward(loss / cfg.grad_accum)
            total += loss.detach().float()
        if cfg.max_grad_norm:
            self.acc.clip_grad_norm_(self.params, cfg.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.step(self.params)
        mean = self.acc.reduce(total / cfg.grad_accum, reduction="mean")
        return float(mean)

    def _checkpoint_due(self, done: int) -> bool:
        cfg = self.cfg
        return (
            done % cfg.checkpoint_every == 0
            or done == cfg.max_steps
            or bool(cfg.eval_every and done % cfg.eval_every == 0)
        )

    # -- resume, records, checkpoints -----------------------------------------------------------
    def _resume(self) -> tuple[int, int]:
        """Load the newest checkpoint that reads back whole (a damaged one is named and passed
        over) and cut the log to its step; no checkpoint: step 0 and an empty log."""
        out, main = self.cfg.out, self.acc.is_main_process
        step, seen = 0, 0
        for step_, folder in sorted(complete_checkpoints(out), reverse=True):
            if step_ > self.cfg.max_steps:
                raise TrainError(f"{folder} is past --max-steps {self.cfg.max_steps}")
            try:
                state, weights = read_checkpoint(folder, self.family)
            except CheckpointDamaged as exc:
                if main:
                    err.print(labelled("note", f"{exc}: passed over", "yellow"))
                continue
            self.family.load_trainable_state(weights)
            self.optimizer.load_state_dict(state["optimizer"])
            if "lr_scheduler" in state:  # older checkpoints: the constant schedule
                self.scheduler.load_state_dict(state["lr_scheduler"])
            if self.ema is not None:
                self.ema.load_state_dict(state["ema"])
                self.ema.to(self.acc.device)
            step, seen = step_, int(state["samples_seen"])
            break
        if main and step == 0 and complete_checkpoints(out):
            note = "no checkpoint reads back whole: training from step 0"
            err.print(labelled("note", note, "yellow"))
        elif main and step and folder != latest_checkpoint(out)[1]:  # type: ignore[index]
            err.print(labelled("note", f"resuming from {folder}", "yellow"))
        if main:
            _truncate_log(out / LOG_FILE, step)
        return step, seen

    def _record(self, start: int) -> None:
        path = self.cfg.out / CONFIG_FILE
        if path.is_file():
            return
        from medibench import __version__
        from medibench.io import atomic_write_text

        record = {
            **self.cfg.to_dict(),
            "objective": self.family.objective(),
            "base_hash": self.checked.base_hash,
            "dataset_hash": dataset_hash(self.data),
            "dataset_fingerprint": self.checked.dataset_fingerprint,
            "samples": len(self.data),
            "medibench_version": __version__,
            "processes": self.acc.num_processes,
        }
        atomic_write_text(path, json.dumps(record, indent=2) + "\n")

    def _save(self, step: int, seen: int) -> Path:
        acc = self.acc
        path = self.cfg.out / f"checkpoint-{step}"
        acc.wait_for_everyone()
        if acc.is_main_process:
            from medibench import __version__

            rec = json.loads((self.cfg.out / CONFIG_FILE).read_text(encoding="utf-8"))
            card = model_card(
                step=step,
                config=self.cfg.to_dict(),
                objective=rec["objective"],
                base_hash=rec["base_hash"],
                dataset_hash=rec["dataset_hash"],
                samples=rec["samples"],
                version=__version__,
            )
            state = {
                "step": step,
                "samples_seen": seen,
                "optimizer": self.optimizer.state_dict(),
                "lr_scheduler": self.scheduler.state_dict(),
            }
            net = acc.unwrap_model(self.family.net)
            if self.ema is None:
                save_checkpoint(self.cfg.out, step, self.family, net, state, card)
            else:  # the EMA weights saved (the example's output), the raw ones to resume from
                state["trainable"] = self.family.trainable_state()
                state["ema"] = self.ema.state_dict()
                self.ema.store(self.params)
                self.ema.copy_to(self.params)
                try:
                    save_checkpoint(self.cfg.out, step, self.family, net, state, card)
                finally:
                    self.ema.restore(self.params)
        acc.wait_for_everyone()
        return path

    def _log(self, record: dict[str, Any]) -> None:
        with (self.cfg.out / LOG_FILE).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()

    # -- evaluation -----------------------------------------------------------------------------
    def _evaluate(self, step: int, checkpoint: Path) -> Path:
        from medibench.train._eval import evaluate_checkpoint

        folder = self.cfg.out / "eval" / f"step-{step}"
        if self.acc.is_main_process:
            evaluate_checkpoint(self.cfg, checkpoint, folder, self.eval_options, self.console)
        self.acc.wait_for_everyone()
        return folder

    def _evaluate_done(self, start: int):
        """The base model's evaluation (step 0), then the evaluations of checkpoints made before
        a resume (each finishes what it has not done: a run resumes)."""
        from medibench.train._eval import BASE_STEP, evaluate_base

        every = self.cfg.eval_every
        if not every:
            return
        folder = self.cfg.out / "eval" / f"step-{BASE_STEP}"
        if self.acc.is_main_process:
            evaluate_base(self.cfg, folder, self.eval_options, self.console)
        self.acc.wait_for_everyone()
        yield folder
        for step in range(every, start + 1, every):
            ckpt = self.cfg.out / f"checkpoint-{step}"
            if ckpt.is_dir():
                yield self._evaluate(step, ckpt)


def _check_eval_dataset(config: TrainConfig, data: TrainingData) -> int:
    from medibench.datasets import load_dataset

    try:
        samples = list(load_dataset(config.eval_dataset))
    except (KeyError, ValueError, FileNotFoundError) as exc:
        raise TrainError(f"--eval-dataset {config.eval_dataset!r}: {exc}") from None
    trained = _Inputs(Path(s.sample.input) for s in data.items)
    shared = [s.sample_id for s in samples if trained.holds(Path(s.input))]
    if shared:
        raise TrainError(
            f"--eval-dataset {config.eval_dataset!r} holds {len(shared)} of the "
            f"training samples (first: {shared[0]!r}): evaluating on the training split is "
            "refused (the same files or byte-identical copies); evaluate on a held-out split"
        )
    return len(samples)


class _Inputs:
    """The training inputs, to ask whether a file is one of them or a byte-identical copy (its
    size first; a file of a training input's size is compared by sha256)."""

    def __init__(self, paths) -> None:
        self.resolved = set()
        self.by_size: dict[int, list[Path]] = {}
        for path in paths:
            self.resolved.add(path.resolve())
            self.by_size.setdefault(_size(path), []).append(path)
        self._hashed: set[int] = set()
        self.digests: set[str] = set()

    def holds(self, path: Path) -> bool:
        from medibench.io import sha256_file

        if path.resolve() in self.resolved:
            return True
        size = _size(path)
        if size < 0 or size not in self.by_size:
            return False
        if size not in self._hashed:  # hash the training inputs of this size, once
            self._hashed.add(size)
            self.digests.update(sha256_file(p) for p in self.by_size[size])
        return sha256_file(path) in self.digests


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _optimizer(cfg: TrainConfig, params: list[Any]):
    import torch

    kwargs = {
        "lr": cfg.lr,
        "betas": (cfg.adam_beta1, cfg.adam_beta2),
        "weight_decay": cfg.weight_decay,
        "eps": cfg.adam_epsilon,
    }
    if cfg.use_8bit_adam:
        try:
            import bitsandbytes as bnb
        except ImportError:
            raise TrainError(
                "--use-8bit-adam needs bitsandbytes: pip install bitsandbytes"
            ) from None
        return bnb.optim.AdamW8bit(params, **kwargs)
    # The fused kernel (CPU and CUDA): one pass over every tensor instead of a loop of small
    # ops per parameter; the same update up to float rounding.
    return torch.optim.AdamW(params, **kwargs, fused=True)


def _lr_scheduler(cfg: TrainConfig, optimizer: Any):
    """diffusers' ``get_scheduler`` over ``max_steps`` optimizer steps (stepped once per
    step: the example's schedule on one process)."""
    from diffusers.optimization import get_scheduler

    return get_scheduler(
        cfg.lr_scheduler,
        optimizer=optimizer,
        num_warmup_steps=cfg.lr_warmup_steps,
        num_training_steps=cfg.max_steps,
    )


def _ema(params: list[Any]):
    """diffusers' ``EMAModel`` of the learning weights with its defaults, as the example
    builds it for ``--use_ema``."""
    from diffusers.training_utils import EMAModel

    return EMAModel(params)


def _micro_seed(seed: int, step: int, micro: int) -> int:
    import numpy as np

    return int(np.random.SeedSequence([seed, step, micro, 1]).generate_state(1, np.uint64)[0] >> 1)


def _truncate_log(path: Path, step: int) -> None:
    """Drop the log lines of steps after ``step`` (made after the checkpoint resumed from)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line)
        except (json.JSONDecodeError, KeyError):  # a line cut short by the kill
            continue
    from medibench.io import atomic_write_text

    atomic_write_text(path, "".join(line + "\n" for line in kept))
