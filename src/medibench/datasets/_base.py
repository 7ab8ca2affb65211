"""What every dataset adapter shares: the error type, the loaded images of a sample, safe paths.

An adapter turns one on-disk layout into :class:`~medibench.samples.Sample` records whose image
paths are absolute. :func:`load_images` then reads those paths into arrays.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from medibench.io import json_lines
from medibench.samples import Sample
from medibench.sources._errors import DatasetError
from medibench.sources._paths import inside_problem, resolve_inside

__all__ = [
    "DatasetError",
    "SampleImages",
    "collect_samples",
    "load_images",
    "no_samples",
    "read_jsonl",
    "require_samples",
    "inside_problem",
    "resolve_inside",
    "size_mismatch",
]


@dataclass(frozen=True)
class SampleImages:
    """The pixels of one sample.

    Attributes:
        input: uint8 RGB ``(H, W, 3)``.
        target: uint8 RGB ``(H', W', 3)``, or ``None`` when the sample has no target.
        mask: bool ``(H'', W'')``, True inside the ROI, or ``None`` when the sample has no mask.
            Sizes are returned as stored: resizing is a protocol's decision, not the loader's.
        notes: what decoding did to the files (alpha composited, a mask binarised at half its
            maximum); protocols copy them into every score's notes.
    """

    input: np.ndarray
    target: np.ndarray | None
    mask: np.ndarray | None
    notes: tuple[str, ...] = ()


def load_images(
    sample: Sample,
    *,
    root: str | os.PathLike | None = None,
    alpha: Literal["black", "white", "drop"] = "black",
) -> SampleImages:
    """Read the input, target and mask of ``sample`` (``read_image(mode="rgb")``, ``read_mask``).

    Paths are used as they are when absolute (as every dataset adapter returns them); a relative
    path is taken relative to ``root`` and is an error without one. This is the one place where
    a sample's files are decoded for scoring: an RGBA input or target is composited as ``alpha``
    says (on black by default), a mask with values other than 0 and its maximum (a JPEG mask) is
    binarised at half its maximum, and each is recorded in ``notes`` (``"input <path>: 40 of
    4096 pixels are not opaque ..."``, ``"mask <path>: 27 pixels have values other than 0 ..."``).
    """
    from medibench.io import read_image, read_mask  # the readers pull in pydicom and nibabel

    def where(path: str) -> Path:
        p = Path(path)
        if p.is_absolute():
            return p
        if root is None:
            raise DatasetError(
                f"sample '{sample.sample_id}': path '{path}' is relative; pass root= or load the "
                "sample through a dataset adapter (which makes paths absolute)"
            )
        return Path(root) / p

    notes: list[str] = []

    def rgb(role: str, path: str) -> np.ndarray:
        found: list[str] = []
        image = read_image(where(path), mode="rgb", alpha=alpha, notes=found)
        notes.extend(f"{role} {note}" for note in found)
        return image

    return SampleImages(
        input=rgb("input", sample.input),
        target=None if sample.target is None else rgb("target", sample.target),
        mask=None if sample.mask is None else read_mask(where(sample.mask), notes=notes),
        notes=tuple(notes),
    )


def size_mismatch(
    sample: Sample, role: str, image: np.ndarray, other_role: str, other: np.ndarray
) -> str | None:
    """``None`` when ``image`` and ``other`` have the same height and width, else a message
    naming the sample, both roles, their sizes and their files: ``"sample modification-003: the
    target is 128x96 but the input is 128x128 (target /data/images/x_target.png, input
    /data/images/x_input.png)"``.

    ``role`` and ``other_role`` are ``"input"``, ``"target"``, ``"mask"`` (the sample's files,
    named) or another word such as ``"prediction"`` (named by its role only).
    """
    if image.shape[:2] == other.shape[:2]:
        return None
    files = [
        f"{what} {getattr(sample, what)}"
        for what in (role, other_role)
        if what in ("input", "target", "mask") and getattr(sample, what, None)
    ]
    where = f" ({', '.join(files)})" if files else ""
    return (
        f"sample {sample.sample_id}: the {role} is {image.shape[1]}x{image.shape[0]} but the "
        f"{other_role} is {other.shape[1]}x{other.shape[0]}{where}"
    )


def collect_samples(
    entries: Iterable[tuple[str, str, Any]],
    to_sample: Callable[[Any, str], Sample | None],
    problems: list[str],
    *,
    source: str | os.PathLike,
    duplicate: Callable[[Sample, str], str],
) -> list[Sample]:
    """The samples of a manifest's records, each id once, in order.

    ``entries`` are ``(where, label, record)``: where the record is (for messages), how a later
    duplicate names it, and the record; ``to_sample(record, where)`` gives its sample or ``None``
    (having added the problem). A later record with an id already taken is skipped, with the
    problem ``"{where}: {duplicate(sample, label of the first)}; skipped"``. Raises as
    :func:`require_samples` (naming ``source``) when no sample is left.
    """
    samples: list[Sample] = []
    first: dict[str, str] = {}
    for where, label, record in entries:
        sample = to_sample(record, where)
        if sample is None:
            continue
        if sample.sample_id in first:
            problems.append(f"{where}: {duplicate(sample, first[sample.sample_id])}; skipped")
            continue
        first[sample.sample_id] = label
        samples.append(sample)
    require_samples(samples, source, problems)
    return samples


def require_samples(
    samples: Sequence[Sample], source: str | os.PathLike, problems: Sequence[str] = ()
) -> None:
    """Raise ``DatasetError`` naming ``source`` (the manifest or metadata file) when a layout
    gave no sample at all; the first problems met, if any, say why."""
    if samples:
        return
    if not problems:
        raise DatasetError(f"{source}: the dataset has no samples (the file lists none)")
    raise DatasetError(
        f"{source}: the dataset has no samples: every record was skipped ({_first(problems)})"
    )


def no_samples(dataset: Any, spec: str) -> str:
    """The message for ``dataset`` (loaded from ``spec``) having no samples: its folder, and
    how many problems its adapter skipped, the first of them with their reasons."""
    root = getattr(dataset, "root", None)
    where = f" in {root}" if root is not None else ""
    problems = list(getattr(dataset, "problems", ()))
    why = f" ({len(problems)} skipped: {_first(problems)})" if problems else ""
    return f"dataset {spec!r} has no samples{where}{why}: nothing to run or score"


def _first(problems: Sequence[str], shown: int = 3) -> str:
    more = f"; ... ({len(problems)} problems in all)" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


def read_jsonl(path: Path, *, error: type[Exception] = DatasetError) -> Iterator[tuple[int, dict]]:
    """``(line number, record)`` of each non-blank line; ``error`` (a :class:`DatasetError`
    unless the caller's format has its own) for a line that is not a JSON object."""
    with open(path, encoding="utf-8") as fh:
        for number, _, record, exc in json_lines(fh):
            if exc is not None:
                raise error(f"{path} line {number}: not valid JSON ({exc})") from None
            if not isinstance(record, dict):
                raise error(
                    f"{path} line {number}: expected a JSON object, got {type(record).__name__}"
                )
            yield number, record
