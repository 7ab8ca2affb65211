"""Post-processing over all built samples: perceptual-hash near-duplicates and the split.

:func:`phash` is the DCT perceptual hash (the definition of the ``imagehash`` package's
``phash``, which the tests compare against): the image as 8-bit luma (Pillow's ``L``), resized
to 32x32 with Lanczos, a 2-D type-II DCT, the top-left 8x8 coefficients compared with their
median; 64 bits, the first coefficient the most significant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from medibench.build._errors import BuildError
from medibench.build._source import SOURCE_SPLIT, SourceSpec, SplitRule

__all__ = ["assign_splits", "hamming", "near_duplicates", "phash", "split_groups"]


def phash(image: np.ndarray) -> int:
    """64-bit perceptual hash of a uint8 ``(H, W)`` or RGB ``(H, W, 3)`` image."""
    from PIL import Image
    from scipy.fft import dct

    pil = Image.fromarray(np.ascontiguousarray(image))
    small = np.asarray(pil.convert("L").resize((32, 32), Image.Resampling.LANCZOS), np.float64)
    coefficients = dct(dct(small, axis=0), axis=1)[:8, :8]
    bits = (coefficients > np.median(coefficients)).ravel()
    return int("".join("1" if b else "0" for b in bits), 2)


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two hashes."""
    return int(a ^ b).bit_count()


def near_duplicates(records: Sequence[dict[str, Any]], bits: int) -> set[str]:
    """Sample ids to drop: a sample whose input *and* target hashes are within ``bits`` of an
    earlier kept sample of the same task (samples taken in sample-id order)."""
    dropped: set[str] = set()
    kept: dict[str, list[tuple[int, int]]] = {}
    for rec in sorted(records, key=lambda r: r["sample_id"]):
        meta = rec["metadata"]
        pair = (int(meta["phash_input"], 16), int(meta["phash_target"], 16))
        group = kept.setdefault(rec["task"], [])
        if any(hamming(pair[0], a) <= bits and hamming(pair[1], b) <= bits for a, b in group):
            dropped.add(rec["sample_id"])
        else:
            group.append(pair)
    return dropped


def split_groups(source: SourceSpec) -> dict[str, str]:
    """``{item id: group}``: the patient (``by: patient``), the item itself, or the item's own
    split (``split: source``).

    Raises:
        BuildError: ``by: patient`` and an item has no ``patient`` field; ``split: source`` and
            an item has no ``split``.
    """
    out = {}
    for item in source.items:
        if source.split.by == SOURCE_SPLIT:
            if item.split is None:
                raise BuildError(
                    f"{source.path or 'source'}: split is 'source' (keep the items' splits) but "
                    f"item '{item.id}' ({item.image}) has no 'split' field"
                )
            out[item.id] = item.split
        elif source.split.by == "patient":
            if item.patient is None:
                raise BuildError(
                    f"{source.path or 'source'}: split is by patient but item '{item.id}' "
                    f"({item.image}) has no 'patient' field"
                )
            out[item.id] = item.patient
        else:
            out[item.id] = item.id
    return out


def assign_splits(groups: Sequence[str], rule: SplitRule) -> dict[str, str]:
    """``{group: "train" | "val" | "test"}``: groups shuffled with ``rule.seed``; the first
    ``round(test * n)`` go to test (at least one when ``test > 0`` and there are two groups or
    more), the next ``round(val * n)`` to val, the rest to train (never none when ``n > 1``).
    With ``split: source`` each group is a split's name, kept."""
    unique = sorted(set(groups))
    if rule.by == SOURCE_SPLIT:
        return {group: group for group in unique}
    n = len(unique)
    order = [unique[i] for i in np.random.default_rng(rule.seed).permutation(n)]
    n_test = int(round(rule.test * n))
    n_val = int(round(rule.val * n))
    if n >= 2:
        n_test = max(n_test, 1 if rule.test > 0 else 0)
        n_val = max(n_val, 1 if rule.val > 0 and n >= 3 else 0)
        while n_test + n_val > n - 1:
            if n_val > 0:
                n_val -= 1
            else:
                n_test -= 1
    out = {}
    for i, group in enumerate(order):
        out[group] = "test" if i < n_test else ("val" if i < n_test + n_val else "train")
    return out
