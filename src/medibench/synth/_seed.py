"""Seeds derived from an item's identity, so each generated item is reproducible on its own.

Every random choice of a generated item goes through a ``numpy.random.Generator`` seeded with
the first 8 bytes (big-endian) of ``sha256("part0|part1|...")``: adding, removing or reordering
other items never changes it (the PaintBench discipline).
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["item_seed", "item_rng"]


def item_seed(*parts: object) -> int:
    """``int.from_bytes(sha256("|".join(map(str, parts)))[:8], "big")``, in ``[0, 2**64)``.

    Example:
        >>> item_seed("starter", "denoise", 3, 0) == item_seed("starter", "denoise", 3, 0)
        True
    """
    if not parts:
        raise ValueError("item_seed needs at least one identity part")
    key = "|".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def item_rng(*parts: object) -> np.random.Generator:
    """A ``numpy.random.Generator`` (PCG64) seeded with :func:`item_seed` of ``parts``."""
    return np.random.Generator(np.random.PCG64(item_seed(*parts)))
