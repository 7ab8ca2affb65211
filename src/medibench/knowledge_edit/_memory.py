"""What a memory-based editor tells the latent-space analysis (``medibench edit analyze``).

A memory-based editor (GRACE's codebook, WISE's side memory, BalancEdit's router) leaves the
model's weights alone and decides, per looked-up token, whether its memory answers. It shows
that decision through two methods, so the analysis needs nothing else of it:

* ``memory_site(model)``: the module whose *input* (at the looked-up token, the prompt's last on
  generation's first pass) is what the memory compares with its keys. The analysis hooks this
  module's forward pass; it must be a module of the model with and without the edit (the module
  the memory wraps, not the wrapper), so its inputs read the same before and after.
* ``fires(model, queries)``: for ``queries`` (a ``(n, d)`` tensor of such inputs, on the
  model's device), a :class:`MemoryLookup`: whether the memory would answer each (``fired``)
  and the number it compares with its threshold (``distance``: lower is nearer, as a distance
  to the nearest key; NaN where the memory holds nothing).

An editor with both methods is a :class:`MemoryEditor` (structural: no base class to inherit).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

__all__ = ["MemoryEditor", "MemoryLookup"]


class MemoryLookup(NamedTuple):
    """Per query: ``fired`` (bool, shape ``(n,)``) and ``distance`` (float, shape ``(n,)``)."""

    fired: np.ndarray
    distance: np.ndarray


@runtime_checkable
class MemoryEditor(Protocol):
    """An editor whose memory decides per token whether it answers (module doc)."""

    name: str

    def memory_site(self, model: Any) -> Any: ...

    def fires(self, model: Any, queries: Any) -> MemoryLookup: ...
