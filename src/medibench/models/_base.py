"""The model contract: :class:`EditModel`, and the error for instructions a model cannot do.

Every model, local or remote, is an object with a ``name`` and one method::

    edit(image, instruction, *, seed) -> image

``image`` is an ``(H, W, 3)`` uint8 RGB array; the returned image is uint8 RGB ``(H, W, 3)`` of
any size (outputs are stored at their native size; resizing is the protocol's job). Given the same
image, instruction and seed, a model must return the same bytes.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "EditModel",
    "SharedOptions",
    "UnsupportedInstructionError",
    "as_rgb_uint8",
    "is_answering_model",
]


@runtime_checkable
class EditModel(Protocol):
    """A text-guided image editor.

    Attributes:
        name: the model's name as recorded in runs (for registered models, its registry name).
    """

    name: str

    def edit(self, image: np.ndarray, instruction: str, *, seed: int) -> np.ndarray:
        """Edit ``image`` (``(H, W, 3)`` uint8 RGB) as ``instruction`` asks.

        Returns a uint8 RGB ``(H, W, 3)`` image of any size. Deterministic given ``seed``.
        Raises :class:`UnsupportedInstructionError` when the model cannot carry the instruction
        out (rather than returning the input unchanged).
        """
        ...


class UnsupportedInstructionError(ValueError):
    """An instruction the model cannot carry out; the message quotes it and says what works."""

    def __init__(self, instruction: str, supported: Iterable[str], *, reason: str = "") -> None:
        self.instruction = instruction
        self.supported = tuple(supported)
        why = f" ({reason})" if reason else ""
        listed = "\n".join(f"  - {s}" for s in self.supported)
        super().__init__(f"unsupported instruction {instruction!r}{why}. Supported:\n{listed}")


def as_rgb_uint8(image: np.ndarray) -> np.ndarray:
    """Check a model input: uint8 ``(H, W, 3)`` RGB, or ``(H, W)`` / ``(H, W, 1)`` gray -> RGB."""
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise ValueError(f"image must be uint8, got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"image must have shape (H, W, 3), got {arr.shape}")
    if arr.shape[0] < 2 or arr.shape[1] < 2:
        raise ValueError(f"image is too small to edit: shape {arr.shape}")
    return arr


class SharedOptions:
    """A base class whose subclasses take their own options plus ``**common`` ones.

    The base sets :attr:`common_options` (a ``TypedDict`` of keywords its ``__init__`` declares
    with their defaults); a subclass's ``__init__`` takes its own options and
    ``**common: Unpack[...]``, passed on to the base. ``__init_subclass__`` writes both into the
    subclass's signature, so ``medibench models`` and model-spec option checks see every option
    with its default.
    """

    #: the subclass's own options followed by :attr:`common_options`' (``__init_subclass__``)
    __signature__: ClassVar[inspect.Signature]
    common_options: ClassVar[type]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "common_options" in vars(cls):
            return  # the base itself keeps its own signature
        base = next(vars(b) for b in cls.__mro__ if "common_options" in vars(b))
        cls.__signature__ = _with_common(cls.__init__, base["__init__"], base["common_options"])


def _with_common(init: Any, base_init: Any, common: type) -> inspect.Signature:
    """``init``'s signature without ``self``, its ``**common`` replaced by the keywords of
    ``common`` with ``base_init``'s defaults."""
    own = list(inspect.signature(init).parameters.values())[1:]
    if not any(p.kind is p.VAR_KEYWORD for p in own):
        return inspect.Signature(own)
    base = inspect.signature(base_init).parameters
    shared = [base[key] for key in common.__annotations__]
    return inspect.Signature([p for p in own if p.kind is not p.VAR_KEYWORD] + shared)


def is_answering_model(model: Any) -> bool:
    """Whether ``model`` answers (a :class:`VLM` or a :class:`Generator`) rather than edits."""
    return callable(getattr(model, "answer", None)) or callable(getattr(model, "generate", None))
