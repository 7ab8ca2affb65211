"""New datasets from datasets: ``medibench dataset split | filter | concat`` (docs/datasets.md).

Each writes a native dataset folder (through the native export, images copied) with
``provenance.json``: the operation, the dataset specs it read, its settings (seed, grouping,
fractions, conditions), the medibench version and the counts it wrote. Every sample records
where it came from in ``metadata.derived_from = {"dataset": SPEC, "sample_id": ID}``, the id it
had there; a sample that already had one keeps it under ``derived_from.derived_from``.

- :func:`split_dataset`: groups (patients, by default) shuffled by a seed and dealt into named
  parts by their fractions; every sample gets its part as ``split``.
- :func:`filter_dataset`: the samples matching ``--where`` conditions (a field repeated: any of
  its values; different fields: all of them).
- :func:`concat_datasets`: several datasets in one; an id found in more than one of them is
  prefixed by its dataset's name (``NAME-ID``).
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medibench.datasets._base import DatasetError
from medibench.datasets._select import (
    DERIVED_FROM,
    check_field,
    field_value,
    parse_where,
    where_matches,
)
from medibench.samples import Sample, patient_of

__all__ = [
    "PROVENANCE",
    "DerivedDataset",
    "assign_parts",
    "concat_datasets",
    "filter_dataset",
    "parse_fractions",
    "split_dataset",
]

#: The file of a derived dataset folder that says how it was made.
PROVENANCE = "provenance.json"
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_TOLERANCE = 1e-9


@dataclass
class DerivedDataset:
    """What a derivation wrote: the folder, its samples and its provenance record."""

    out: Path
    samples: list[Sample]
    provenance: dict[str, Any] = field(default_factory=dict)


def parse_fractions(text: str) -> dict[str, float]:
    """``"train=0.8,test=0.2"`` as ``{"train": 0.8, "test": 0.2}``, in the order given.

    Raises:
        DatasetError: a part without ``=``, a name that is not letters, digits and ``_``, a name
            given twice, a fraction not in (0, 1], or fractions whose sum is not 1.
    """
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise DatasetError(f"--fractions {text!r}: expected NAME=FRACTION,..., got {part!r}")
        if not _NAME.match(name):
            raise DatasetError(
                f"--fractions {text!r}: split name {name!r} must be letters, digits and '_'"
            )
        if name in out:
            raise DatasetError(f"--fractions {text!r}: split {name!r} is given twice")
        try:
            fraction = float(value)
        except ValueError:
            raise DatasetError(f"--fractions {text!r}: {value!r} is not a number") from None
        if not 0 < fraction <= 1:
            raise DatasetError(f"--fractions {text!r}: {name}={value} is not in (0, 1]")
        out[name] = fraction
    total = math.fsum(out.values())
    if abs(total - 1) > _TOLERANCE:
        raise DatasetError(f"--fractions {text!r}: the fractions sum to {total:g}, not 1")
    return out


def assign_parts(groups: Sequence[str], fractions: dict[str, float], seed: int) -> dict[str, str]:
    """``{group: part}``: the distinct ``groups``, sorted, shuffled by
    ``numpy.random.default_rng(seed).permutation`` and dealt in that order, the first part
    first; part ``i`` takes ``n_i`` groups, the largest-remainder rounding of
    ``fraction_i * n`` (ties to the earlier part), so the counts sum to ``n``; with at least as
    many groups as parts, every part gets one group at least (taken from the largest).

    Raises:
        DatasetError: fewer groups than parts.
    """
    unique = sorted(set(groups))
    n = len(unique)
    if n < len(fractions):
        raise DatasetError(
            f"--fractions names {len(fractions)} parts ({', '.join(fractions)}) but there are "
            f"only {n} groups to deal"
        )
    exact = [f * n for f in fractions.values()]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: n - sum(counts)]:
        counts[i] += 1
    for i in range(len(counts)):
        if counts[i] == 0:
            largest = max(range(len(counts)), key=lambda j: (counts[j], -j))
            counts[largest] -= 1
            counts[i] = 1
    order = [unique[i] for i in np.random.default_rng(seed).permutation(n)]
    out: dict[str, str] = {}
    start = 0
    for name, count in zip(fractions, counts, strict=True):
        for group in order[start : start + count]:
            out[group] = name
        start += count
    return out


def split_dataset(
    samples: Sequence[Sample],
    spec: str,
    out: str | os.PathLike,
    *,
    fractions: dict[str, float],
    seed: int,
    by: str | None = None,
    overwrite: bool = False,
) -> DerivedDataset:
    """Split ``samples`` (of the dataset ``spec``) into ``fractions`` of their ``by`` groups and
    write them to ``out``, each sample's ``split`` its part.

    ``by``: a field (:mod:`._select`), ``sample`` (each sample its own group) or ``None``:
    ``patient`` when the samples record patients, ``sample`` when none does. Samples keep
    their order.

    Raises:
        DatasetError: ``by`` names a field no sample has (listing those there are); ``by`` is
            ``None`` or a field and some samples lack it (naming the first); ``out`` not empty
            and ``overwrite`` false.
    """
    by = by or _default_by(samples)
    if by != "sample":
        check_field(by, samples, f"--by {by}")
    keys = {s.sample_id: s.sample_id if by == "sample" else field_value(s, by) for s in samples}
    lacking = [sid for sid, key in keys.items() if key is None]
    if lacking:
        raise DatasetError(
            f"--by {by}: {len(lacking)} of {len(samples)} samples have no {by} (first: sample "
            f"'{lacking[0]}'); split by another field, or --by sample"
        )
    try:
        parts = assign_parts([str(k) for k in keys.values()], fractions, seed)
    except DatasetError as exc:
        raise DatasetError(f"--by {by}: {exc}") from None
    made = [_derived(s, spec, split=parts[str(keys[s.sample_id])]) for s in samples]
    settings = {"by": by, "fractions": fractions, "seed": seed}
    return _write("split", [spec], made, out, settings, overwrite)


def filter_dataset(
    samples: Sequence[Sample],
    spec: str,
    out: str | os.PathLike,
    *,
    where: Sequence[str],
    overwrite: bool = False,
) -> DerivedDataset:
    """Write the samples of ``spec`` matching every ``--where FIELD=VALUE`` field (a field given
    several times: any of its values) to ``out``.

    Raises:
        DatasetError: no condition, a malformed one or a field no sample has; no sample left
            (naming the conditions and how many samples were read).
    """
    if not where:
        raise DatasetError("dataset filter needs at least one --where FIELD=VALUE")
    conditions = parse_where(where, samples)
    kept = [_derived(s, spec) for s in samples if where_matches(s, conditions)]
    if not kept:
        said = " and ".join(f"{f} in {{{', '.join(v)}}}" for f, v in conditions.items())
        raise DatasetError(
            f"dataset filter: no sample of {spec!r} ({len(samples)} read) has {said}; "
            "nothing to write"
        )
    return _write("filter", [spec], kept, out, {"where": conditions}, overwrite)


def concat_datasets(
    datasets: Sequence[tuple[str, str, Sequence[Sample]]],
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
) -> DerivedDataset:
    """Write the samples of ``datasets`` (``(spec, name, samples)`` each, in order) to ``out``.

    An id found in more than one of them becomes ``NAME-ID`` in each (``NAME``: the dataset's
    name, characters other than letters, digits, ``_``, ``.``, ``-`` replaced by ``-``; a name
    shared by several datasets gets ``-2``, ``-3``... after its second use).

    Raises:
        DatasetError: fewer than two datasets, a spec given twice, or a prefixed id that is
            still taken.
    """
    specs = [spec for spec, _, _ in datasets]
    if len(datasets) < 2:
        raise DatasetError("dataset concat needs two datasets or more")
    twice = sorted({s for s in specs if specs.count(s) > 1})
    if twice:
        raise DatasetError(f"dataset concat: {', '.join(twice)} given twice")
    names = _unique_names([name for _, name, _ in datasets])
    seen = Counter(s.sample_id for _, _, members in datasets for s in members)
    made: list[Sample] = []
    taken: set[str] = set()
    renamed = 0
    for (spec, _, members), name in zip(datasets, names, strict=True):
        for s in members:
            sid = s.sample_id if seen[s.sample_id] == 1 else f"{name}-{s.sample_id}"
            if sid in taken:
                raise DatasetError(
                    f"dataset concat: sample '{s.sample_id}' of {spec!r} would be '{sid}', an id "
                    "already taken"
                )
            taken.add(sid)
            renamed += sid != s.sample_id
            made.append(_derived(s, spec, sample_id=sid))
    settings = {"prefixes": dict(zip(specs, names, strict=True)), "renamed": renamed}
    return _write("concat", specs, made, out, settings, overwrite)


# --- helpers ---------------------------------------------------------------------------------


def _default_by(samples: Sequence[Sample]) -> str:
    """``patient`` when some sample records one (those without are then an error), else
    ``sample``."""
    return "patient" if any(patient_of(s) is not None for s in samples) else "sample"


def _derived(sample: Sample, spec: str, **update: Any) -> Sample:
    """``sample`` with ``update`` and its provenance in ``metadata.derived_from``."""
    origin: dict[str, Any] = {"dataset": spec, "sample_id": sample.sample_id}
    previous = sample.metadata.get(DERIVED_FROM)
    if previous is not None:
        origin[DERIVED_FROM] = previous
    metadata = {**sample.metadata, DERIVED_FROM: origin}
    return sample.model_copy(update={**update, "metadata": metadata})


def _unique_names(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for raw in names:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-.") or "dataset"
        name, n = base, 1
        while name in out:
            n += 1
            name = f"{base}-{n}"
        out.append(name)
    return out


def _write(
    operation: str,
    specs: list[str],
    samples: list[Sample],
    out: str | os.PathLike,
    settings: dict[str, Any],
    overwrite: bool,
) -> DerivedDataset:
    """The native export of ``samples`` to ``out``, and its ``provenance.json``."""
    import json
    from importlib.metadata import version

    from medibench.datasets._export import export_dataset
    from medibench.io import atomic_write_text

    export_dataset(samples, out, format="native", overwrite=overwrite)
    record = {
        "operation": f"medibench dataset {operation}",
        "datasets": specs,
        **settings,
        "medibench_version": version("medibench"),
        "samples": len(samples),
        "splits": dict(sorted(Counter(s.split for s in samples).items())),
        "per_sample": f"metadata.{DERIVED_FROM}: the dataset and sample id each sample came from",
    }
    atomic_write_text(
        Path(out) / PROVENANCE, json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    )
    return DerivedDataset(Path(out), samples, record)
