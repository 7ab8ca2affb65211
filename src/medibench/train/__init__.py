"""Fine-tuning editors and inpainting experts on medibench datasets (``medibench train``).

:func:`train` fine-tunes a diffusers editing model on the triplets (input, instruction,
target) of any medibench dataset, with the objective its pipeline was trained with
(:mod:`medibench.train._families`): InstructPix2Pix in full or with LoRA, FLUX.1 Kontext with
LoRA (:mod:`._flow`), Qwen-Image-Edit with LoRA (:mod:`._qwen`), and SD and SDXL inpainting
and FLUX.1 Fill pipelines with LoRA (the modality experts of the modification build,
:mod:`._inpaint`, :mod:`._flow`).

The training folder ``DIR`` holds ``train_config.json`` (every setting, the objective, the base
weights' and the dataset's hashes), ``train.jsonl`` (one line per step: ``step``, ``loss``,
``lr``, ``samples_seen``, ``time_per_step_s``), ``checkpoint-N/`` (:mod:`._checkpoint`: weights
in the diffusers layout or a LoRA file, a model card, the training state) and ``eval/step-N/``,
the runs of ``--eval-every`` (:mod:`._eval`, through :func:`medibench.runs.run`). A killed
training re-run with the same settings resumes from its last checkpoint and ends with the
weights an uninterrupted one has (:mod:`._data`: batches and noise are seeded per step).
Data parallelism, mixed precision and gradient accumulation come from ``accelerate``
(``accelerate launch -m medibench train ...``).
"""

from medibench.train._config import TRAINABLE, TrainConfig, TrainError, parse_bins, parse_mix
from medibench.train._eval import checkpoint_model_spec, evaluate_checkpoint
from medibench.train._loop import TrainResult, check_training, train

__all__ = [
    "TRAINABLE",
    "TrainConfig",
    "TrainError",
    "TrainResult",
    "check_training",
    "checkpoint_model_spec",
    "evaluate_checkpoint",
    "parse_bins",
    "parse_mix",
    "train",
]
