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

from pathlib import Path
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
    "detect_layout",
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
    "suite",
    "medibench.synth.suite:load_suite",
    help="the built-in procedural suite (medibench-suite@1), generated on first use: "
    "suite[:/folder | :<frozen name>]",
)
DATASETS.register(
    "starter",
    "medibench.synth.starter:load_starter",
    help="the built-in starter benchmark (24 samples), built on first use: starter[:/folder]",
)


def load_dataset(spec: str, **options: Any) -> Any:
    """Open the dataset named by ``spec`` = ``"kind"``, ``"kind:arg"`` or a plain folder.

    ``arg`` is passed to the kind's factory as ``path``: ``native:/data/x``, ``starter``,
    ``starter:/tmp/s``, ``medebench:/data/MedEBench``. A plain folder (``/data/MedEBench``) has
    its layout detected (:func:`detect_layout`). An unknown kind raises the registry's
    ``UnknownNameError`` with the closest known kinds. ``options`` go to the factory as keywords
    (``seed=`` for ``starter``).
    """
    kind, sep, arg = spec.partition(":")
    kind = kind.strip()
    if not kind:
        raise ValueError(f"dataset spec {spec!r} has no kind; expected 'kind' or 'kind:arg'")
    if kind not in DATASETS and Path(spec).is_dir():
        kind, sep, arg = detect_layout(spec), ":", spec
    factory = DATASETS.get(kind)
    return factory(path=arg, **options) if sep and arg else factory(**options)


#: Kinds whose layout a plain folder is tested for, in this order.
_DETECTABLE = ("native", "medebench", "miedb", "medgen", "paintbench")


def detect_layout(path: str | Path) -> str:
    """The dataset kind whose official layout the folder ``path`` has.

    Raises ``DatasetError`` listing the layouts looked for when none matches.
    """
    import importlib

    root = Path(path)
    for kind in _DETECTABLE:
        module = "native" if kind == "native" else kind
        detect = getattr(importlib.import_module(f"medibench.datasets.{module}"), "detect", None)
        if detect is not None and detect(root):
            return kind
    raise DatasetError(
        f"{root}: no known dataset layout (looked for native samples.jsonl, MedEBench "
        "editing/editing_metadata.json, MieDB dataBenchmark/metadata.json, MedGEN edit.jsonl, "
        "PaintBench <task>/NNN_input.png); name the kind explicitly, e.g. native:DIR"
    )
