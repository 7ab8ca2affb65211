"""What every dataset adapter shares: the error type, the loaded images of a sample, safe paths.

An adapter turns one on-disk layout into :class:`~medibench.samples.Sample` records whose image
paths are absolute. :func:`load_images` then reads those paths into arrays.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from medibench.samples import Sample

__all__ = [
    "DatasetError",
    "SampleImages",
    "collect_samples",
    "load_images",
    "read_jsonl",
    "require_samples",
    "inside_problem",
    "resolve_inside",
    "size_mismatch",
]


class DatasetError(ValueError):
    """A dataset cannot be read or written: the message names the file, line, sample and problem."""


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
    shown = "; ".join(problems[:3])
    more = f"; ... ({len(problems)} problems in all)" if len(problems) > 3 else ""
    raise DatasetError(
        f"{source}: the dataset has no samples: every record was skipped ({shown}{more})"
    )


def resolve_inside(
    root: Path,
    relative: str,
    *,
    what: str,
    error: type[Exception] = DatasetError,
    follow_links: bool = False,
) -> Path:
    """Resolve ``relative`` against the resolved ``root``, refusing anything that leaves it.

    Refused (an ``error`` whose message starts with ``what``, for example ``"samples.jsonl
    line 3, sample 'a', field 'input'"``, and names the path): an absolute path, a path whose
    ``..`` parts climb out of ``root``, and (unless ``follow_links``, for folders the user
    links their own data into) a path that a symbolic link inside ``root`` sends outside it
    (except, in a Hugging Face cache snapshot, the links into that repository's ``blobs/``).
    The file need not exist. Every reader of a path written in data (archive members, dataset
    rows, Parquet cells, SOURCE.yaml, task sets, answer files) decides through
    :func:`inside_problem`, which this raises on.
    """
    problem = inside_problem(root, relative, follow_links=follow_links)
    if problem is not None:
        raise error(f"{what}: path '{relative}' {problem}")
    return Path(os.path.normpath(root / relative)) if follow_links else (root / relative).resolve()


def inside_problem(root: Path, relative: str, *, follow_links: bool = False) -> str | None:
    """Why ``relative`` (a path read from data) is not inside the folder ``root``, in words
    that follow the path in a message (``"is absolute; ..."``); ``None`` when it is inside.

    The check is made against the file system as it is now: a symbolic link already in
    ``root`` (even one that points through other links) is followed to where it really
    leads, so a chain of links made earlier cannot carry a later path out.
    """
    text = str(relative)
    if "\x00" in text:
        return "contains a NUL character"
    if Path(text).is_absolute() or text.startswith(("/", "\\")) or text[1:2] == ":":
        return f"is absolute; image paths must be relative to the dataset folder {root}"
    lexical = Path(os.path.normpath(root / text))
    if not _is_within(lexical, root):
        return f"escapes the dataset folder {root} (via '..')"
    if follow_links:
        return None
    resolved = (root / text).resolve()
    if not _is_within(resolved, _link_bound(root.resolve())):
        return (
            f"escapes the dataset folder {root} through a symbolic link (it resolves to "
            f"{resolved})"
        )
    return None


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _link_bound(root: Path) -> Path:
    """Where symbolic links under ``root`` may point: ``root`` itself, or, for a folder in a
    Hugging Face cache snapshot (``datasets--OWNER--NAME/snapshots/<sha>/...``), that
    repository's cache folder, whose ``blobs/`` hold the files the snapshot links to."""
    for folder in (root, *root.parents):
        repo = folder.parent.parent
        if folder.parent.name == "snapshots" and repo.name.startswith(_HUB_CACHE_KINDS):
            return repo
    return root


_HUB_CACHE_KINDS = ("datasets--", "models--", "spaces--")


def read_jsonl(
    path: Path, *, error: type[Exception] = DatasetError
) -> Iterator[tuple[int, dict]]:
    """``(line number, record)`` of each non-blank line; ``error`` (a :class:`DatasetError`
    unless the caller's format has its own) for a line that is not a JSON object."""
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{path} line {number}: not valid JSON ({exc})") from None
            if not isinstance(record, dict):
                raise error(
                    f"{path} line {number}: expected a JSON object, got {type(record).__name__}"
                )
            yield number, record
