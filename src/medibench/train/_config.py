"""What a training is asked to do: :class:`TrainConfig`, checked before anything loads."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "LR_SCHEDULERS",
    "TRAINABLE",
    "TrainConfig",
    "TrainError",
    "parse_bins",
    "parse_mix",
]

Method = Literal["full", "lora"]
MixedPrecision = Literal["no", "bf16", "fp16"]

#: family -> the methods it trains with (the pipeline each one loads is in _families).
TRAINABLE: dict[str, tuple[str, ...]] = {
    "ip2p": ("full", "lora"),
    "flux-kontext": ("lora",),
    "qwen-image-edit": ("lora",),
    "diffusers-inpaint": ("lora",),
}
#: diffusers' ``get_scheduler`` names that ``train_instruct_pix2pix.py`` offers (its
#: ``piecewise_constant`` needs step rules no option gives).
LR_SCHEDULERS = (
    "constant",
    "constant_with_warmup",
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
)
#: MieDB-100k trains in three resolution bins.
DEFAULT_BINS = (128, 256, 512)


class TrainError(ValueError):
    """A training that cannot start or go on; one line saying what to change."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training needs; the same config on the same folder resumes it.

    Attributes:
        dataset: a dataset spec (``native:DIR``, a build folder, ``miedb:DIR``, ``hf:...``)
            whose samples have an input, a target and an instruction.
        dataset_options: keywords for its loader (``--dataset-option``; ``split=train``: the
            samples of that split only).
        model: ``FAMILY:PATH``, the base weights (a ``save_pretrained`` folder or a cached id).
        method: ``"full"`` (every weight of the denoiser) or ``"lora"``.
        out: the training folder.
        max_steps: optimizer steps.
        batch_size: samples per micro-batch and process.
        grad_accum: micro-batches per optimizer step.
        lr: AdamW learning rate (the peak of ``lr_scheduler``, reached after the warm-up).
        lr_scheduler: diffusers' ``get_scheduler`` schedule (:data:`LR_SCHEDULERS`) over
            ``max_steps`` optimizer steps, stepped once per optimizer step.
        lr_warmup_steps: steps of linear warm-up from 0 (a schedule with warm-up only).
        random_flip: flip each sample's input and target (and mask) together, left to right,
            with probability 1/2 (diffusers' ``--random_flip``), drawn from the micro-batch's
            seed.
        ema: keep diffusers' ``EMAModel`` of the learning weights with its defaults (decay
            0.9999, reached through ``(1 + n) / (10 + n)`` at update ``n``), as the example's
            ``--use_ema``; checkpoints hold the EMA weights, their training state the raw ones.
        bins: resolution bins, pixels of the longer side (aspect kept, sides rounded to the
            model's multiple); one bin is ``--resolution``.
        mix: sampling weight per perspective or task (``{}``: every sample alike).
        seed: seed of the data order, the noise and the conditioning dropout.
        rank: LoRA rank (alpha = rank).
        checkpoint_every: steps between checkpoints (the last step is always one).
        eval_dataset, eval_every, eval_limit: evaluate checkpoints (``medibench run``) on this
            dataset every ``eval_every`` steps, on its first ``eval_limit`` samples.
        mixed_precision: accelerate's ``no``, ``bf16`` or ``fp16``.
        conditioning_dropout: probability of dropping the text, the image, or both (each
            ``p``; InstructPix2Pix's classifier-free guidance recipe, 0.05 in diffusers').
        snr_gamma: Min-SNR loss weighting (Hang et al. 2023) for epsilon/v models; ``None``:
            plain MSE.
        max_grad_norm: gradient clipping (1.0, diffusers' examples).
        weight_decay, adam_beta1, adam_beta2, adam_epsilon: AdamW's, as diffusers' examples.
        gradient_checkpointing: trade compute for memory in the denoiser.
        use_8bit_adam: bitsandbytes' AdamW8bit (needs bitsandbytes).
    """

    dataset: str
    model: str
    method: Method
    out: Path
    dataset_options: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 1000
    batch_size: int = 1
    grad_accum: int = 1
    lr: float = 1e-4
    bins: tuple[int, ...] = DEFAULT_BINS
    mix: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    rank: int = 16
    checkpoint_every: int = 500
    eval_dataset: str | None = None
    eval_every: int | None = None
    eval_limit: int | None = None
    mixed_precision: MixedPrecision = "no"
    conditioning_dropout: float = 0.05
    snr_gamma: float | None = None
    max_grad_norm: float = 1.0
    weight_decay: float = 1e-2
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    gradient_checkpointing: bool = False
    use_8bit_adam: bool = False
    lr_scheduler: str = "constant"
    lr_warmup_steps: int = 0
    random_flip: bool = False
    ema: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "bins", tuple(int(b) for b in self.bins))
        object.__setattr__(self, "mix", {str(k): float(v) for k, v in self.mix.items()})
        self._check()

    @property
    def family(self) -> str:
        """The model family: the part of ``model`` before the first ``:``."""
        return self.model.partition(":")[0]

    @property
    def weights(self) -> str:
        """The base weights: the part of ``model`` after the first ``:``."""
        return self.model.partition(":")[2]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (what ``train_config.json`` holds and the model card lists)."""
        data = asdict(self)
        data["out"] = str(self.out)
        data["bins"] = list(self.bins)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def differences(self, other: TrainConfig) -> list[str]:
        """The settings that differ from ``other``'s, ``name: mine != theirs``, except
        ``max_steps`` (a resumed training may go further, unless its learning-rate schedule
        is drawn over ``max_steps``) and the evaluation ones."""
        loose = {"max_steps", "eval_dataset", "eval_every", "eval_limit", "out"}
        if self.lr_scheduler not in ("constant", "constant_with_warmup"):
            loose.discard("max_steps")
        a, b = self.to_dict(), other.to_dict()
        return [f"{k}: {a[k]!r} != {b[k]!r}" for k in a if k not in loose and a[k] != b[k]]

    # -- checks -------------------------------------------------------------------------------
    def _check(self) -> None:
        family, sep, weights = self.model.partition(":")
        if not sep or not weights:
            raise TrainError(
                f"--model {self.model!r}: give FAMILY:PATH, FAMILY one of {', '.join(TRAINABLE)}"
            )
        if family not in TRAINABLE:
            raise TrainError(
                f"--model {self.model!r}: family {family!r} cannot be trained; trainable: "
                + ", ".join(f"{f} ({'/'.join(m)})" for f, m in TRAINABLE.items())
            )
        if self.method not in TRAINABLE[family]:
            raise TrainError(
                f"--model {family}: --method {self.method} is not supported; {family} trains "
                f"with {' or '.join(TRAINABLE[family])}"
            )
        positive = {
            "max_steps": self.max_steps,
            "batch_size": self.batch_size,
            "grad_accum": self.grad_accum,
            "checkpoint_every": self.checkpoint_every,
        }
        for name, value in positive.items():
            if value < 1:
                raise TrainError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
        if self.method == "lora" and self.rank < 1:
            raise TrainError(f"--rank must be >= 1 for LoRA, got {self.rank}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise TrainError(f"--lr must be a finite number > 0, got {self.lr}")
        if self.snr_gamma is not None and not (
            math.isfinite(self.snr_gamma) and self.snr_gamma > 0
        ):
            raise TrainError(f"--snr-gamma must be a finite number > 0, got {self.snr_gamma}")
        if self.seed < 0:
            raise TrainError(f"--seed must be >= 0, got {self.seed}")
        self._check_schedule()
        if self.out.exists() and not self.out.is_dir():
            raise TrainError(f"--out {self.out} is a file; give a training folder")
        if not self.bins or any(b < 8 for b in self.bins):
            raise TrainError(f"resolution bins must be >= 8 pixels, got {list(self.bins)}")
        if not 0 <= self.conditioning_dropout < 1 / 3:
            raise TrainError(
                f"conditioning dropout must be in [0, 1/3) (p text, p image, p both), "
                f"got {self.conditioning_dropout}"
            )
        if self.mixed_precision not in ("no", "bf16", "fp16"):
            raise TrainError(
                f"--mixed-precision must be no, bf16 or fp16, not {self.mixed_precision!r}"
            )
        if not all(math.isfinite(w) for w in self.mix.values()):
            raise TrainError(f"--mix weights must be finite numbers, got {self.mix}")
        if any(w < 0 for w in self.mix.values()) or (self.mix and not any(self.mix.values())):
            raise TrainError(f"--mix weights must be >= 0, one of them > 0, got {self.mix}")
        evals = (self.eval_dataset, self.eval_every)
        if any(v is not None for v in evals) and not all(v is not None for v in evals):
            raise TrainError("--eval-dataset and --eval-every go together")
        if self.eval_dataset is not None and family == "diffusers-inpaint":
            raise TrainError(
                "an inpainting expert is evaluated by the build that uses it "
                "(medibench build modification --inpainter diffusers-inpaint:BASE "
                "--lora CHECKPOINT), not by --eval-dataset"
            )
        if self.eval_every is not None and self.eval_every < 1:
            raise TrainError(f"--eval-every must be >= 1, got {self.eval_every}")
        if self.eval_limit is not None and self.eval_limit < 1:
            raise TrainError(f"--eval-limit must be >= 1, got {self.eval_limit}")

    def _check_schedule(self) -> None:
        if self.lr_scheduler not in LR_SCHEDULERS:
            raise TrainError(
                f"--lr-scheduler {self.lr_scheduler!r} is not one of diffusers' schedules: "
                + ", ".join(LR_SCHEDULERS)
            )
        if self.lr_warmup_steps < 0:
            raise TrainError(f"--lr-warmup-steps must be >= 0, got {self.lr_warmup_steps}")
        if self.lr_warmup_steps and self.lr_scheduler == "constant":
            raise TrainError(
                f"--lr-warmup-steps {self.lr_warmup_steps} with --lr-scheduler constant: the "
                "constant schedule has no warm-up (diffusers ignores it); use "
                "constant_with_warmup or another schedule"
            )


def parse_bins(text: str) -> tuple[int, ...]:
    """``"128,256,512"`` -> ``(128, 256, 512)``."""
    try:
        bins = tuple(sorted({int(p) for p in text.split(",") if p.strip()}))
    except ValueError:
        raise TrainError(f"--bins {text!r}: give pixel sizes separated by commas") from None
    if not bins:
        raise TrainError(f"--bins {text!r}: no size given")
    return bins


def parse_mix(text: str | None) -> dict[str, float]:
    """``"perception=1,modification=0.5"`` -> ``{"perception": 1.0, "modification": 0.5}``."""
    if not text:
        return {}
    out: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not key.strip():
            raise TrainError(
                f"--mix {text!r}: give NAME=WEIGHT pairs separated by commas "
                f"(NAME a perspective or a task), bad part {part!r}"
            )
    return out
