"""The methods' defaults, as MVC-Bench's scripts run them (see :mod:`._methods`; HiCroPL: its
own few-shot config, :mod:`._hicropl`); torch-free, so the CLI can list them without importing
torch."""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULTS", "LOSSES", "METHODS", "option_value"]

_TRAIN = {
    "optimizer": "sgd",
    "momentum": 0.9,
    "weight_decay": 5e-4,
    "schedule": "cosine",
    "warmup_epochs": 1,
    "warmup_lr": 1e-5,
}

#: Per method: training settings and the method's options (overridable with ``--set``).
DEFAULTS: dict[str, dict[str, Any]] = {
    "zero-shot": {"epochs": 0, "lr": 0.0, "batch_size": 32},
    "linear-probe": {"epochs": 50, "lr": 0.002, "batch_size": 32},
    "coop": {
        "epochs": 50,
        "lr": 0.002,
        "batch_size": 32,
        "n_ctx": 16,
        "init": "random",
        "position": "middle",
    },
    "cocoop": {
        "epochs": 10,
        "lr": 0.002,
        "batch_size": 1,
        "n_ctx": 4,
        "init": "template",
        "position": "end",
    },
    "kgcoop": {
        "epochs": 100,
        "lr": 0.002,
        "batch_size": 128,
        "n_ctx": None,
        "init": "template",
        "position": "end",
        "w": 8.0,
    },
    "prograd": {
        "epochs": 100,
        "lr": 0.002,
        "batch_size": 32,
        "n_ctx": None,
        "init": "template",
        "position": "end",
        "lambda": 1.0,
        "T": 1.0,
    },
    "maple": {
        "epochs": 5,
        "lr": 0.0035,
        "batch_size": 4,
        "n_ctx": 2,
        "init": "template",
        "depth": 9,
    },
    "promptsrc": {
        "epochs": 20,
        "lr": 0.0025,
        "batch_size": 4,
        "n_ctx": 4,
        "n_ctx_vision": 4,
        "init": "template",
        "text_depth": 9,
        "vision_depth": 9,
        "text_weight": 25.0,
        "image_weight": 10.0,
        "gpa_mean": 15.0,
        "gpa_std": 1.0,
        "teacher_templates": "imagenet60",
    },
    "hicropl": {
        "epochs": 50,
        "lr": 0.0025,
        "batch_size": 32,
        "n_ctx": 16,
        "depth": 12,
        "cross_layer": 6,
        "lambd": 12.0,
        "heads": 8,
        "prompt_file": None,
        "optimizer": "adam",
        "adam_eps": 1e-3,
    },
}
for _d in DEFAULTS.values():
    _d.update({k: v for k, v in _TRAIN.items() if k not in _d})

METHODS = tuple(DEFAULTS)

#: The ``--loss`` names (:mod:`._losses`).
LOSSES = (
    "ce",
    "mcm",
    "focal",
    "ls",
    "mbls",
    "dca",
    "mdca",
    "smac",
    "mmce",
    "logitnorm",
    "eccv-penalty",
    "eccv-zs",
    "angular",
    "otpt",
    "tmm",
)


def option_value(text: str) -> Any:
    """A ``key=value`` value: ``true``/``false``, an int, a float, else the text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text
