"""Task types of the medibench suite: perception, modification and transformation items with
exact targets, built on the procedural scenes (:mod:`medibench.synth.scenes`).

Importing this package registers every task type in :data:`TASKS` (name -> :class:`TaskType`).
A task's ``make(TaskContext(rng, modality, difficulty, size))`` returns a :class:`TaskItem`.

Example:
    >>> import numpy as np
    >>> ctx = TaskContext(np.random.default_rng(0), "ct", PRESETS["easy"], 128)
    >>> item = get_task("remove-lesion").make(ctx)           # doctest: +SKIP
    >>> item.instruction                                      # doctest: +SKIP
    'Remove the lesion.'
"""

import importlib

from medibench.synth.tasks._base import (
    PRESETS,
    TASKS,
    Difficulty,
    TaskContext,
    TaskItem,
    TaskType,
    get_difficulty,
    get_task,
)

# Importing the task modules registers them, in this order: perception, modification,
# transformation (the order of `medibench suite tasks` and of a suite's samples).
for _module in ("perception", "modification", "transformation"):
    importlib.import_module(f"medibench.synth.tasks.{_module}")

__all__ = [
    "PRESETS",
    "TASKS",
    "Difficulty",
    "TaskContext",
    "TaskItem",
    "TaskType",
    "get_difficulty",
    "get_task",
]
