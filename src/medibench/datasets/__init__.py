"""Dataset adapters: one per on-disk layout, each giving :class:`~medibench.samples.Sample`s.

``load_dataset("kind:arg")`` opens a dataset through the :data:`DATASETS` registry:

- ``native:/path/to/folder``: a folder with ``samples.jsonl`` (:func:`read_native`).
- ``starter`` or ``starter:/path``: the small built-in starter benchmark, built from data that
  installed packages ship (pydicom-data, nilearn, scikit-image) on first use, then read as native.

Example:
    >>> ds = load_dataset("starter")                     # doctest: +SKIP
    >>> images = load_images(ds.get("perception-000"))   # doctest: +SKIP
    >>> images.input.shape, images.mask.dtype            # doctest: +SKIP
    ((256, 256, 3), dtype('bool'))
"""

from __future__ import annotations

from typing import Any

from medibench.datasets._base import DatasetError, SampleImages, load_images, resolve_inside
from medibench.datasets._dataset import Dataset, PredictionIndex, index_predictions
from medibench.datasets.native import MANIFEST, NativeDataset, read_native, write_native
from medibench.registry import Registry

__all__ = [
    "DATASETS",
    "Dataset",
    "DatasetError",
    "PredictionIndex",
    "index_predictions",
    "resolve_inside",
    "MANIFEST",
    "NativeDataset",
    "SampleImages",
    "load_dataset",
    "load_images",
    "read_native",
    "write_native",
]

#: Dataset factories by kind. Each takes ``path`` (the part after ``kind:``) when one is given.
DATASETS: Registry[Any] = Registry("dataset")
DATASETS.register(
    "native",
    "medibench.datasets.native:read_native_path",
    help="a folder with samples.jsonl: native:/path/to/folder",
)
DATASETS.register(
    "medebench",
    "medibench.datasets.medebench:read_medebench",
    help="MedEBench (repo root or its editing/ folder): medebench:/path",
)
DATASETS.register(
    "miedb",
    "medibench.datasets.miedb:read_miedb",
    help="MieDB-100k benchmark split (dataBenchmark/ with metadata.json): miedb:/path",
)
DATASETS.register(
    "medgen",
    "medibench.datasets.medgen:read_medgen",
    help="MedGEN-Bench (edit.jsonl, vqa.jsonl, gen.jsonl and images): medgen:/path",
)
DATASETS.register(
    "paintbench",
    "medibench.datasets.paintbench:read_paintbench",
    help="PaintBench layout (<task>/NNN_input.png, NNN_answer.png, NNN.json): paintbench:/path",
)
DATASETS.register(
    "starter",
    "medibench.synth.starter:load_starter",
    help="the built-in starter benchmark (24 samples), built on first use: starter[:/folder]",
)


def load_dataset(spec: str, **options: Any) -> Any:
    """Open the dataset named by ``spec`` = ``"kind"`` or ``"kind:arg"``.

    ``arg`` is passed to the kind's factory as ``path``: ``native:/data/x``, ``starter``,
    ``starter:/tmp/s``. An unknown kind raises the registry's ``UnknownNameError`` with the
    closest known kinds. ``options`` go to the factory as keywords (``seed=`` for ``starter``).
    """
    kind, sep, arg = spec.partition(":")
    kind = kind.strip()
    if not kind:
        raise ValueError(f"dataset spec {spec!r} has no kind; expected 'kind' or 'kind:arg'")
    factory = DATASETS.get(kind)
    return factory(path=arg, **options) if sep and arg else factory(**options)
