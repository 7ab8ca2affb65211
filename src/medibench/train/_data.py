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

__all__ = [
    "TrainingData",
    "bucket_size",
    "dataset_fingerprint",
    "dataset_hash",
    "open_training_data",
]


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
            from medibench.io import ImageReadError

            item = self.items[index]
            try:
                images = load_images(item.sample)
            except ImageReadError as exc:
                s = item.sample
                files = {s.input: "input", s.target: "target", s.mask: "mask"}
                role = files.get(exc.path, "file")
                raise TrainError(f"sample {s.sample_id!r}: {role} {exc}") from None
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


def flipped(
    pixels: list[tuple[np.ndarray, ...]], seed: int, step: int, micro: int
) -> list[tuple[np.ndarray, ...]]:
    """``pixels`` (each sample's input, target and mask) with each sample's arrays flipped
    left to right together with probability 1/2 (diffusers' ``RandomHorizontalFlip`` on the
    stacked input and target), the coins drawn from ``(seed, step, micro)``."""
    coins = np.random.default_rng([seed, int(step), int(micro), 2]).random(len(pixels)) < 0.5
    return [
        tuple(np.ascontiguousarray(a[:, ::-1]) if a is not None else None for a in arrays)
        if flip
        else arrays
        for arrays, flip in zip(pixels, coins, strict=True)
    ]


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
    if not any(s.instruction.strip() for s in samples):
        raise TrainError(
            f"--dataset {spec!r}: every instruction is blank (first sample: "
            f"{samples[0].sample_id!r}); an editor trains on instructions"
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


def dataset_fingerprint(data: TrainingData) -> str:
    """sha256 over :func:`dataset_hash` and the bytes of every sample's input, target and mask
    (in sample order): a dataset rewritten at the same path has another."""
    digest = hashlib.sha256(dataset_hash(data).encode())
    for item in data.items:
        s = item.sample
        for path in (s.input, s.target, s.mask):
            if path is not None:
                with open(path, "rb") as fh:
                    while chunk := fh.read(1 << 20):
                        digest.update(chunk)
    return "sha256:" + digest.hexdigest()


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
    """The input's ``(height, width)``, after the header of each of the sample's files is read:
    an unreadable file, a decompression bomb, a 16-bit input or target, or a target of another
    aspect ratio than the input is a :class:`TrainError` naming the sample and the file."""
    sizes = {
        role: _header_size(sample, role, path)
        for role, path in (("input", sample.input), ("target", sample.target))
        if path is not None
    }
    if sample.mask is not None:
        _header_size(sample, "mask", sample.mask)
    (h, w), target = sizes["input"], sizes.get("target")
    if target is not None and abs(target[0] * w - target[1] * h) > max(h, w, *target):
        raise TrainError(
            f"sample {sample.sample_id!r}: the target {sample.target} is {target[1]}x{target[0]} "
            f"but the input {sample.input} is {w}x{h}, another aspect ratio (training would "
            "stretch it); crop or pad the target to the input's shape"
        )
    return h, w


def _header_size(sample: Sample, role: str, path: str) -> tuple[int, int]:
    """``(height, width)`` from the file's header (decoding it only when Pillow cannot open it:
    DICOM); the read errors as one :class:`TrainError` naming the sample, role and file."""
    from medibench.io import ImageReadError, read_image

    try:
        try:
            with Image.open(path) as im:
                if role != "mask" and im.mode in _DEEP_MODES:
                    raise TrainError(
                        f"sample {sample.sample_id!r}: {role} {path} holds {im.mode} pixels "
                        "(16-bit or float); training reads 8-bit RGB: convert it first"
                    )
                return im.size[1], im.size[0]
        except Image.DecompressionBombError as exc:
            raise ImageReadError(
                path, f"refused as a possible decompression bomb ({exc})"
            ) from None
        except OSError:  # DICOM, NIfTI, an empty or damaged file: the reader says which
            return read_image(path, mode="unchanged").shape[:2]
    except ImageReadError as exc:
        raise TrainError(f"sample {sample.sample_id!r}: {role} {exc}") from None


#: Pillow modes of more than 8 bits per channel.
_DEEP_MODES = frozenset({"I", "I;16", "I;16B", "I;16L", "I;16N", "F"})


def _resize(image: np.ndarray, size: tuple[int, int], method=Image.Resampling.BICUBIC):
    h, w = size
    if image.shape[:2] == (h, w):
        return image
    return np.asarray(Image.fromarray(image).resize((w, h), method))
