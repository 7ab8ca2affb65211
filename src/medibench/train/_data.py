"""Training data: a medibench dataset's triplets, bucketed by resolution bin and aspect, and the
batches of each step drawn from generators seeded by ``(seed, step, micro-batch)``.

Every micro-batch is drawn on its own: a group (perspective or task) by its ``--mix`` weight
(or every sample alike without one), a bucket of that group by its number of samples, then
``batch_size`` samples of the bucket (without replacement when it has enough). Nothing depends
on what was drawn before, so a resumed training draws the same batches as an uninterrupted one,
and ``P`` processes with ``A`` micro-batches each draw what one process with ``P * A`` draws.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from medibench.samples import Sample
from medibench.train._config import TrainError

__all__ = ["TrainingData", "bucket_size", "dataset_hash", "open_training_data"]


@dataclass(frozen=True)
class Item:
    """One training triplet: the sample and its working size ``(height, width)``."""

    sample: Sample
    size: tuple[int, int]


class TrainingData:
    """The triplets of a dataset, their buckets and the seeded batch plan.

    Args:
        items: the triplets with their working sizes.
        mix: sampling weight per perspective or task name (``{}``: every sample alike).
        seed: the training seed.
    """

    def __init__(self, items: Sequence[Item], mix: dict[str, float], seed: int) -> None:
        self.items = list(items)
        self.seed = int(seed)
        self.groups = _groups(self.items, mix)
        self._cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}

    def __len__(self) -> int:
        return len(self.items)

    def batch(self, step: int, micro: int, batch_size: int) -> list[int]:
        """Indices of the items in micro-batch ``micro`` of optimizer step ``step`` (both from
        0; with data parallelism ``micro`` counts over every process)."""
        rng = np.random.default_rng([self.seed, int(step), int(micro)])
        weights = np.array([w for w, _ in self.groups], float)
        group = self.groups[int(rng.choice(len(weights), p=weights / weights.sum()))][1]
        sizes = sorted(group)
        counts = np.array([len(group[s]) for s in sizes], float)
        pool = group[sizes[int(rng.choice(len(sizes), p=counts / counts.sum()))]]
        picks = rng.choice(len(pool), size=batch_size, replace=len(pool) < batch_size)
        return [pool[int(i)] for i in picks]

    def pixels(self, index: int, *, mask: bool = False) -> tuple[np.ndarray, ...]:
        """``(input, target)`` (or with ``mask=True`` ``(input, target, mask)``) of item
        ``index`` at its working size: uint8 RGB ``(H, W, 3)``, mask bool ``(H, W)``."""
        if index not in self._cache:
            from medibench.datasets import load_images

            item = self.items[index]
            images = load_images(item.sample)
            h, w = item.size
            m = None
            if images.mask is not None:
                m = _resize(images.mask.astype(np.uint8) * 255, (h, w), Image.Resampling.NEAREST)
                m = m > 127
            self._cache[index] = (_resize(images.input, (h, w)), _resize(images.target, (h, w)), m)
        x, y, m = self._cache[index]
        if mask and m is None:
            raise TrainError(
                f"sample {self.items[index].sample.sample_id!r} has no mask: "
                "inpainting trains on masked images"
            )
        return (x, y, m) if mask else (x, y)


def open_training_data(
    spec: str,
    *,
    bins: Sequence[int],
    multiple: int,
    mix: dict[str, float],
    seed: int,
    need_mask: bool = False,
    options: dict[str, Any] | None = None,
) -> tuple[TrainingData, Any]:
    """Load ``spec`` (with the loader keywords ``options``) and bucket its samples; returns the
    data and the dataset.

    Raises :class:`TrainError` for a dataset with no samples, a sample without a target (named),
    a ``--mix`` naming no sample's perspective or task, a bin the model cannot take.
    """
    from medibench.datasets import load_dataset

    for b in bins:
        if b % multiple:
            raise TrainError(
                f"resolution {b} is not a multiple of {multiple}, which this "
                f"model's latents need; use multiples of {multiple}"
            )
    try:
        ds = load_dataset(spec, **(options or {}))
    except (KeyError, ValueError, FileNotFoundError) as exc:
        raise TrainError(f"--dataset {spec!r}: {exc}") from None
    samples = list(ds)
    if not samples:
        raise TrainError(f"--dataset {spec!r} has no samples")
    lacking = [s.sample_id for s in samples if s.target is None]
    if lacking:
        raise TrainError(
            f"--dataset {spec!r}: {len(lacking)} of {len(samples)} samples have no "
            f"target image (first: {lacking[0]!r}); training needs input, target "
            "and instruction"
        )
    if need_mask and (no_mask := [s.sample_id for s in samples if s.mask is None]):
        raise TrainError(
            f"--dataset {spec!r}: {len(no_mask)} samples have no mask (first: "
            f"{no_mask[0]!r}); inpainting trains on image + mask"
        )
    items = [Item(s, bucket_size(_size_of(s), bins, multiple)) for s in samples]
    return TrainingData(items, mix, seed), ds


def bucket_size(size: tuple[int, int], bins: Sequence[int], multiple: int) -> tuple[int, int]:
    """The working ``(height, width)`` of an image of ``size`` ``(height, width)``: its longer
    side becomes the largest bin not above it (the smallest bin when all are), the other side
    keeps the aspect ratio, both rounded to ``multiple`` (at least ``multiple``)."""
    h, w = size
    longest = max(h, w)
    fitting = [b for b in sorted(bins) if b <= longest]
    b = fitting[-1] if fitting else min(bins)
    scale = b / longest

    def side(x: int) -> int:
        return max(multiple, int(round(x * scale / multiple)) * multiple)

    return (b, side(w)) if h >= w else (side(h), b)


def dataset_hash(data: TrainingData) -> str:
    """sha256 of the training samples' records (ids, files, instructions, groups, sizes)."""
    digest = hashlib.sha256()
    for item in data.items:
        record = item.sample.model_dump(
            mode="json",
            include={"sample_id", "input", "target", "mask", "instruction", "perspective", "task"},
        )
        digest.update(json.dumps([record, item.size], sort_keys=True).encode())
    return digest.hexdigest()


# -- helpers ----------------------------------------------------------------------------------
def _groups(items: list[Item], mix: dict[str, float]) -> list[tuple[float, dict]]:
    """``[(weight, {size: [item indices]})]``, one entry per group with weight > 0."""

    def bucketed(indices: list[int]) -> dict[tuple[int, int], list[int]]:
        out: dict[tuple[int, int], list[int]] = {}
        for i in indices:
            out.setdefault(items[i].size, []).append(i)
        return out

    if not mix:
        return [(1.0, bucketed(list(range(len(items)))))]
    groups = []
    for name, weight in mix.items():
        members = [
            i for i, it in enumerate(items) if name in (it.sample.perspective.value, it.sample.task)
        ]
        if not members:
            known = sorted(
                {it.sample.perspective.value for it in items}
                | {it.sample.task for it in items if it.sample.task}
            )
            raise TrainError(
                f"--mix {name}={weight:g}: no sample has perspective or task "
                f"{name!r}; the dataset has {', '.join(known)}"
            )
        if weight > 0:
            groups.append((weight, bucketed(members)))
    return groups


def _size_of(sample: Sample) -> tuple[int, int]:
    try:
        with Image.open(sample.input) as im:
            return im.size[1], im.size[0]
    except OSError:  # DICOM, NIfTI, ...: decode it
        from medibench.datasets import load_images

        return load_images(sample).input.shape[:2]


def _resize(image: np.ndarray, size: tuple[int, int], method=Image.Resampling.BICUBIC):
    h, w = size
    if image.shape[:2] == (h, w):
        return image
    return np.asarray(Image.fromarray(image).resize((w, h), method))
