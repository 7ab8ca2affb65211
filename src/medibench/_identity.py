"""Names and seeds derived from an item's identity, shared by the stages that must agree on
them without importing each other (``runs`` writes outputs, ``analysis`` re-generates them).

* :func:`seed_for`: the seed a model gets for (run seed, sample, k);
* :func:`output_folder`: the folder (under ``outputs/``) of a model name, injective in the name.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["output_folder", "seed_for"]

_SLUG_MAX = 48


def seed_for(run_seed: int, sample_id: str, k: int) -> int:
    """The seed a model gets for (sample, k): a 31-bit hash of the run seed and the item."""
    digest = hashlib.sha256(f"{run_seed}|{sample_id}|{k}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def output_folder(name: str) -> str:
    """The folder (under ``outputs/``) of model ``name``: ``<slug>-<8 hex of sha256(name)>``."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", name).lstrip(".")[:_SLUG_MAX] or "model"
    return f"{slug}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"
