"""Native datasets built to tempt the demonstration leakage rules, and a local editor that takes
examples (the ``edit_with_examples`` contract of docs/models.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from medibench.io import write_image

#: sample id -> (patient, source image, task, modality, split, has target, input like)
TEMPTING = {
    "a0": ("P1", "I1", "denoise", "CT", "test", True, None),
    "a1": ("P1", "I9", "denoise", "CT", "test", True, None),  # a0's patient
    "a2": ("P2", "I1", "denoise", "CT", "test", True, None),  # a0's source image
    "a3": ("P3", "I3", "denoise", "CT", "test", True, "a0"),  # a0's input, byte for byte
    "a4": ("P4", "I4", "denoise", "CT", "test", False, None),  # no edited image to show
    "a5": ("P5", "I5", "denoise", "MR", "test", True, None),
    "a6": ("P6", "I6", "sharpen", "CT", "test", True, None),
    "a7": ("P7", "I7", "sharpen", "MR", "test", True, None),
    "a8": ("", "", "denoise", "CT", "test", True, None),  # records neither
    "a9": ("P9", "", "denoise", "CT", "test", True, None),  # a0's case page (source.url)
}


def pixels(seed: int, size: int = 24) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


def write_dataset(root: Path, spec: dict, *, size: int = 24, offset: int = 0) -> Path:
    """A native dataset with one sample per ``spec`` entry (see :data:`TEMPTING`); input
    pixels are seeded by ``offset`` + the entry's index (its ``like``'s for a copy)."""
    lines = []
    names = list(spec)
    for n, (sid, (patient, image, task, modality, split, target, like)) in enumerate(spec.items()):
        src = pixels(offset + (names.index(like) if like else n), size)
        write_image(root / "img" / f"{sid}.png", src)
        rec = {
            "sample_id": sid,
            "benchmark": "tempt",
            "input": f"img/{sid}.png",
            "instruction": f"Denoise image {sid}.",
            "perspective": "modification",
            "task": task,
            "modality": modality,
            "split": split,
            "source": {k: v for k, v in (("patient", patient), ("image", image)) if v},
            "metadata": {},
        }
        if sid in ("a0", "a9"):
            rec["source"]["url"] = "https://example.org/case/1"
        if target:
            write_image(root / "img" / f"{sid}_t.png", 255 - src)
            rec["target"] = f"img/{sid}_t.png"
        lines.append(json.dumps(rec))
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return root


class MeanOfExamples:
    """A local editor that learns from examples: the mean of the examples' edited images,
    resized to the query's size; without examples, the input itself."""

    name = "mean-of-examples"

    def edit(self, image, instruction, *, seed):
        return image

    def edit_with_examples(self, image, instruction, examples, *, seed):
        if not examples:
            return image
        outs = np.stack([ex.output.astype(np.float64) for ex in examples])
        return np.round(outs.mean(axis=0)).astype(np.uint8)


class PlainEditor:
    """A local editor without ``edit_with_examples``."""

    name = "plain"

    def edit(self, image, instruction, *, seed):
        return image


def make_mean():
    return MeanOfExamples()


def make_plain():
    return PlainEditor()


def mean_colour(images):
    """An embedding for ``--icl-embedding tests.runs.icl_data:mean_colour``: each image's mean
    RGB, centred on mid-gray ((N, 3))."""
    return np.stack([np.asarray(im, np.float64).mean(axis=(0, 1)) - 127.5 for im in images])
