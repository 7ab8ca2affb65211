"""Dataset adapters: one per on-disk layout, each giving :class:`~medibench.samples.Sample`s.

``load_dataset("kind:arg")`` opens a dataset through the :data:`DATASETS` registry:

- ``native:/path/to/folder``: a folder with ``samples.jsonl`` (:func:`read_native`).
- ``starter`` or ``starter:/path``: the small built-in starter benchmark, built from data that
  installed packages ship (pydicom-data, nilearn, scikit-image) on first use, then read as native.

``load_dataset(spec, split=NAME)`` keeps one split's samples on every kind. The dataset commands
(docs/datasets.md) make native folders from datasets: :func:`describe_dataset`,
:func:`split_dataset`, :func:`filter_dataset`, :func:`concat_datasets`, each folder with its
``provenance.json`` (:data:`PROVENANCE`).

Example:
    >>> ds = load_dataset("starter")                     # doctest: +SKIP
    >>> images = load_images(ds.get("perception-000"))   # doctest: +SKIP
    >>> images.input.shape, images.mask.dtype            # doctest: +SKIP
    ((256, 256, 3), dtype('bool'))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench._benchmark import registry_from_benchmarks
from medibench.datasets._base import (
    DatasetError,
    SampleImages,
    inside_problem,
    load_images,
    require_samples,
    resolve_inside,
    size_mismatch,
)
from medibench.datasets._dataset import Dataset, PredictionIndex, index_predictions
from medibench.datasets._derive import (
    PROVENANCE,
    concat_datasets,
    filter_dataset,
    parse_fractions,
    split_dataset,
)
from medibench.datasets._describe import describe_dataset
from medibench.datasets.native import MANIFEST, NativeDataset, read_native, write_native
from medibench.registry import Registry

__all__ = [
    "DATASETS",
    "PROVENANCE",
    "concat_datasets",
    "describe_dataset",
    "filter_dataset",
    "parse_fractions",
    "split_dataset",
    "Dataset",
    "DatasetError",
    "PredictionIndex",
    "index_predictions",
    "inside_problem",
    "require_samples",
    "resolve_inside",
    "size_mismatch",
    "MANIFEST",
    "NativeDataset",
    "SampleImages",
    "detect_layout",
    "load_dataset",
    "load_images",
    "read_native",
    "write_native",
]


def _loader(kind: str) -> Any:
    def load(**options: Any) -> Any:
        return _open(kind, options)

    return load


#: Dataset factories by kind, one per registered benchmark. Each takes ``path`` (the part
#: after ``kind:``) when one is given.
DATASETS: Registry[Any] = registry_from_benchmarks(
    "dataset", lambda bench: [(bench.name, _loader(bench.name), bench.help)]
)


def load_dataset(spec: str, **options: Any) -> Any:
    """Open the dataset named by ``spec`` = ``"kind"``, ``"kind:arg"`` or a plain folder.

    ``arg`` is passed to the kind's factory as ``path``: ``native:/data/x``, ``starter``,
    ``starter:/tmp/s``, ``medebench:/data/MedEBench``. A plain folder (``/data/MedEBench``) has
    its layout detected (:func:`detect_layout`). ``arg`` may also be a Hugging Face dataset
    repository, ``medgen:hf:OWNER/NAME[@REVISION]``, read from the local Hugging Face cache
    (``download=True`` fetches it when it is not cached; :mod:`medibench.sources`); a bare
    ``hf:OWNER/NAME[@REVISION]`` is the benchmark whose Hub repository that is, else the layout
    detected in the snapshot. An unknown kind raises the registry's ``UnknownNameError`` with
    the closest known kinds. ``options`` go to the factory as keywords (``seed=`` for
    ``starter``); ``split=NAME`` keeps the samples whose ``split`` is ``NAME`` (a
    ``DatasetError`` listing the splits present when none is), unless the kind's loader reads
    ``split`` itself (``paintbench``: the Hub split's shards).
    """
    kind, sep, arg = spec.partition(":")
    kind = kind.strip()
    if not kind:
        raise ValueError(f"dataset spec {spec!r} has no kind; expected 'kind' or 'kind:arg'")
    if kind == "hf" and kind not in DATASETS:  # hf:OWNER/NAME: the kind from the repository
        notes: list[str] = []
        kind = _hub_kind(spec, download=bool(options.get("download")), notes=notes)
        sep, arg, options = ":", spec, {**options, "source_notes": notes}
    if kind not in DATASETS and Path(spec).is_dir():
        kind, sep, arg = detect_layout(spec), ":", spec
    factory = DATASETS.get(kind)
    return factory(path=arg, **options) if sep and arg else factory(**options)


def _open(kind: str, options: dict[str, Any]) -> Any:
    """Load with the benchmark's ``load``; its declared default protocols go on the dataset."""
    from medibench._benchmark import BENCHMARKS
    from medibench.sources._hf import is_hf_path, resolve_hf_path

    bench = BENCHMARKS.get(kind)
    download = bool(options.pop("download", False))
    notes: list[str] = options.pop("source_notes", [])
    if is_hf_path(options.get("path")):
        options["path"] = str(
            resolve_hf_path(options["path"], source=bench.hub, download=download, notes=notes)
        )
    elif download:
        raise ValueError(
            f"download applies to Hugging Face dataset paths (hf:OWNER/NAME), not "
            f"{options.get('path') or kind!r}; for a benchmark's official files use "
            f"`medibench download {kind} --out DIR`"
        )
    if options.get("path"):  # a hub download re-checks its recorded hashes before it is read
        from medibench.sources._hub import verify_source

        verify_source(options["path"])
    loader = bench.loader()
    # split= selects samples by their split field, for every loader that does not read it itself
    split = options.pop("split", None) if not _takes_split(loader) else None
    dataset = loader(**options)
    if split is not None:
        from medibench.datasets._select import select_split

        dataset = select_split(
            dataset, split, f"{kind}:{options['path']}" if options.get("path") else kind
        )
    defaults = bench.default_specs()
    if defaults and isinstance(dataset, Dataset):
        dataset.default_protocols = defaults
    if notes and isinstance(dataset, Dataset):
        dataset.notes = list(dict.fromkeys([*notes, *getattr(dataset, "notes", [])]))
    return dataset


def _takes_split(loader: Any) -> bool:
    """Whether ``loader`` reads a ``split`` keyword itself (PaintBench's Hub configs)."""
    import inspect

    try:
        return "split" in inspect.signature(loader).parameters
    except (TypeError, ValueError):  # no signature to read: the generic selection applies
        return False


def _hub_kind(spec: str, *, download: bool, notes: list[str]) -> str:
    """The kind of a bare ``hf:OWNER/NAME``: the benchmark whose Hub repository it is, else
    the layout detected in its snapshot (fetched first with ``download``; ``notes`` says so)."""
    from medibench._benchmark import BENCHMARKS
    from medibench.sources._hf import parse_hf_path, resolve_hf_path

    repo = parse_hf_path(spec).repo_id.lower()
    for bench in BENCHMARKS:
        if bench.hub is not None and bench.hub.repo_id.lower() == repo:
            return bench.name
    return detect_layout(resolve_hf_path(spec, download=download, notes=notes))


def detect_layout(path: str | Path) -> str:
    """The dataset kind whose official layout the folder ``path`` has.

    Benchmarks are tried in registration order (built-ins first). Raises ``DatasetError``
    listing the layouts looked for when none matches.
    """
    from medibench._benchmark import BENCHMARKS

    root = Path(path)
    looked = []
    for bench in BENCHMARKS:
        detect = bench.detector()
        if detect is None:
            continue
        if detect(root):
            return bench.name
        looked.append(bench.layout or bench.name)
    raise DatasetError(
        f"{root}: no known dataset layout (looked for {', '.join(looked)}); "
        "name the kind explicitly, e.g. native:DIR"
    )
