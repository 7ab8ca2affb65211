"""The images behind in-context demonstrations (:mod:`medibench.runs._icl`): the decoded-pixel
hash that finds a query's re-encoded copy in the pool, and the ``nearest`` selection's image
embeddings (``--icl-embedding``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["THUMBNAIL", "load_embedding", "pixel_hash", "thumbnail_embedding"]

#: The default ``--icl-embedding``: needs no weights.
THUMBNAIL = "thumbnail"
_THUMB_SIDE = 16


def pixel_hash(path: str) -> str:
    """SHA-256 of an image's decoded RGB pixels and their shape: two files of one picture
    (re-encoded, other metadata) share it."""
    import hashlib

    from medibench.io import read_image

    pixels = np.ascontiguousarray(read_image(path, mode="rgb"))
    return hashlib.sha256(str(pixels.shape).encode() + pixels.tobytes()).hexdigest()


def thumbnail_embedding(images: Sequence[np.ndarray]) -> np.ndarray:
    """The default ``nearest`` embedding, needing no weights: each image as gray, area-averaged
    to 16 x 16, minus its mean; ``(N, 256)`` float64 (cosine similarity compares structure,
    not brightness)."""
    from PIL import Image

    rows = []
    for im in images:
        gray = Image.fromarray(np.asarray(im, np.uint8)).convert("L")
        small = gray.resize((_THUMB_SIDE, _THUMB_SIDE), Image.Resampling.BOX)
        v = np.asarray(small, np.float64).reshape(-1)
        rows.append(v - v.mean())
    return np.stack(rows) if rows else np.zeros((0, _THUMB_SIDE * _THUMB_SIDE))


def load_embedding(spec: str) -> Any:
    """The extractor of ``--icl-embedding`` ``spec``: :func:`thumbnail_embedding` or one
    :func:`medibench.analysis.features.load_extractor` loads."""
    if spec == THUMBNAIL:
        return thumbnail_embedding
    from medibench.analysis.features import load_extractor

    return load_extractor(spec)
