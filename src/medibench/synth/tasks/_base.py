"""The task framework: a task type turns a seeded generator into one exact editing item.

A :class:`TaskType` has a name, a perspective, the scene modalities it supports and a ``make``
function ``make(ctx: TaskContext) -> TaskItem``. ``ctx.rng`` is the item's generator (seeded by
the suite from the item's identity); every random choice of the item comes from it, so the item
is a pure function of ``(task, modality, difficulty, size, rng seed)``.

Task types register in :data:`TASKS` with :func:`task`, or a family's table of rows with
:func:`register_tasks`; :func:`get_task` looks one up with an error listing the valid names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from medibench.samples import Perspective

#: The pure colours of perception overlays.
OverlayColour = Literal["red", "green", "blue"]


@dataclass(frozen=True)
class Difficulty:
    """The difficulty knobs of generated items.

    Attributes:
        name: the preset name (``"easy"``, ``"medium"``, ``"hard"``) or ``"custom"``.
        lesion_radius: ``(low, high)`` lesion radius as a fraction of the image side.
        lesion_contrast: ``(low, high)`` multiplier of the modality's typical lesion contrast.
        n_lesions: ``(low, high)`` number of lesions in tasks about several lesions (inclusive).
        n_distractors: ``(low, high)`` other lesions next to the one a task is about.
        noise: scene noise multiplier (1 is the modality's typical acquisition noise).
        clutter: scene clutter in ``[0, 1]`` (hairs, highlights, bowel gas, ...).
        severity: multiplier of the degradation strength of transformation tasks.
    """

    name: str = "custom"
    lesion_radius: tuple[float, float] = (0.04, 0.06)
    lesion_contrast: tuple[float, float] = (0.8, 1.2)
    n_lesions: tuple[int, int] = (2, 3)
    n_distractors: tuple[int, int] = (1, 2)
    noise: float = 1.0
    clutter: float = 0.5
    severity: float = 1.0

    def __post_init__(self) -> None:
        def pair(name: str, lo: float, hi: float | None = None) -> None:
            a, b = getattr(self, name)
            if not (lo <= a <= b and (hi is None or b <= hi)):
                bound = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
                raise ValueError(
                    f"difficulty {self.name!r}: {name} must be (low, high) with low <= high, "
                    f"both {bound}; got {(a, b)}"
                )

        pair("lesion_radius", 0.005, 0.45)
        pair("lesion_contrast", 0.05)
        pair("n_lesions", 1, 8)
        pair("n_distractors", 0, 8)
        if not self.noise >= 0:
            raise ValueError(f"difficulty {self.name!r}: noise must be >= 0, got {self.noise}")
        if not 0 <= self.clutter <= 1:
            raise ValueError(f"difficulty {self.name!r}: clutter must be in [0, 1]")
        if not self.severity > 0:
            raise ValueError(f"difficulty {self.name!r}: severity must be positive")

    def replace(self, **changes: Any) -> Difficulty:
        """A copy with some knobs changed (named ``"custom"`` unless ``name`` is given)."""
        return dataclasses.replace(self, **{"name": "custom", **changes})

    def as_dict(self) -> dict[str, Any]:
        fields = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}


#: The named presets.
PRESETS: dict[str, Difficulty] = {
    "easy": Difficulty(
        "easy", (0.06, 0.08), (1.4, 1.8), (2, 2), (0, 1), noise=0.5, clutter=0.2, severity=0.7
    ),
    "medium": Difficulty(
        "medium", (0.04, 0.06), (0.9, 1.2), (2, 3), (1, 2), noise=1.0, clutter=0.5, severity=1.0
    ),
    "hard": Difficulty(
        "hard", (0.025, 0.04), (0.5, 0.8), (3, 4), (2, 3), noise=1.5, clutter=0.9, severity=1.4
    ),
}


def get_difficulty(preset: str | Difficulty) -> Difficulty:
    """A preset by name (error lists the valid ones), or ``preset`` itself."""
    if isinstance(preset, Difficulty):
        return preset
    try:
        return PRESETS[preset]
    except KeyError:
        raise ValueError(
            f"unknown difficulty preset {preset!r}; valid: {', '.join(PRESETS)}"
        ) from None


@dataclass(frozen=True)
class TaskContext:
    """What a task's ``make`` receives: the item's generator, scene modality, knobs and size."""

    rng: np.random.Generator
    modality: str
    difficulty: Difficulty
    size: int


@dataclass(frozen=True)
class TaskItem:
    """One generated editing item.

    ``input`` and ``target`` are uint8 RGB ``(size, size, 3)``; ``mask`` is bool ``(size, size)``
    (perception: the highlighted structures; modification: the support of every changed lesion,
    which holds every pixel that differs) or ``None`` (transformation: the whole image).
    ``instruction`` is parseable by the classical baseline where a classical method applies;
    ``paraphrases`` are other phrasings of the same request; ``description`` states the expected
    change exactly; ``metadata`` holds the task parameters (JSON-ready).
    """

    input: np.ndarray
    target: np.ndarray
    mask: np.ndarray | None
    instruction: str
    paraphrases: tuple[str, ...]
    description: str
    region: str = ""
    overlay_color: tuple[OverlayColour, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskType:
    """A kind of editing item: ``make(ctx)`` draws one."""

    name: str
    perspective: Perspective
    modalities: tuple[str, ...]
    description: str
    make: Callable[[TaskContext], TaskItem] = field(repr=False, compare=False)


#: Every task type, by name, in registration order.
TASKS: dict[str, TaskType] = {}


def task(
    name: str, perspective: str, modalities: tuple[str, ...], description: str
) -> Callable[[Callable[[TaskContext], TaskItem]], Callable[[TaskContext], TaskItem]]:
    """Decorator registering ``make`` as the task type ``name``."""

    def deco(make: Callable[[TaskContext], TaskItem]) -> Callable[[TaskContext], TaskItem]:
        if name in TASKS:
            raise ValueError(f"task type {name!r} is already registered")
        TASKS[name] = TaskType(name, Perspective(perspective), tuple(modalities), description, make)
        return make

    return deco


#: One row of a task family: ``(name, modalities, description, make)``.
TaskRow = tuple[str, tuple[str, ...], str, Callable[[TaskContext], TaskItem]]


def register_tasks(perspective: str, rows: Iterable[TaskRow]) -> None:
    """Register a family's task types in the order of ``rows`` (the order suites list them)."""
    for name, modalities, description, make in rows:
        task(name, perspective, modalities, description)(make)


def get_task(name: str) -> TaskType:
    """The task type ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    try:
        return TASKS[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, TASKS, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown task {name!r}.{hint} Valid tasks: {', '.join(TASKS)}") from None
