"""Choosing samples by their fields: the grouping fields, ``--where FIELD=VALUE`` and the
``split=`` dataset option every loader takes.

A field is a :class:`~medibench.samples.Sample` attribute (``task``, ``region``, ``split``, ...),
``metadata.KEY``, ``patient`` (the id :func:`~medibench.samples.patient_of` reads) or
``dataset`` (the spec a derived sample came from, ``metadata.derived_from.dataset``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from medibench.datasets._base import DatasetError
from medibench.samples import Sample, patient_of, sample_field

__all__ = [
    "DERIVED_FROM",
    "GROUPING_FIELDS",
    "field_value",
    "known_fields",
    "parse_where",
    "select_split",
    "where_matches",
]

#: The categorical Sample fields datasets are counted and split by.
GROUPING_FIELDS = ("benchmark", "split", "task", "region", "modality", "perspective")
#: The metadata key of a derived sample's provenance: ``{"dataset": spec, "sample_id": id}``.
DERIVED_FROM = "derived_from"
_PSEUDO = ("patient", "dataset")
_NOT_TEXT = ("input", "target", "mask", "source", "metadata", "paraphrases", "overlay_color")


def field_value(sample: Sample, field: str) -> str | None:
    """``sample``'s value of ``field`` as text; ``None`` when it has none (no patient id, no
    such metadata key, a derived field of a sample that is not derived)."""
    if field == "patient":
        return patient_of(sample)
    if field == "dataset":
        origin = sample.metadata.get(DERIVED_FROM)
        return str(origin["dataset"]) if isinstance(origin, dict) and "dataset" in origin else None
    if field.startswith("metadata.") and field.removeprefix("metadata.") not in sample.metadata:
        return None
    value = sample_field(sample, field)
    return None if value is None else str(value)


def known_fields(samples: Iterable[Sample]) -> list[str]:
    """The fields ``samples`` carry: the text Sample fields, ``patient`` and ``dataset`` when
    some sample has one, and ``metadata.KEY`` for every key with a text or number value."""
    items = list(samples)
    names = [f for f in Sample.model_fields if f not in _NOT_TEXT]
    names += [f for f in _PSEUDO if any(field_value(s, f) is not None for s in items)]
    keys = {
        k
        for s in items
        for k, v in s.metadata.items()
        if isinstance(v, str | int | float) and not isinstance(v, bool)
    }
    return names + [f"metadata.{k}" for k in sorted(keys)]


def check_field(field: str, samples: Sequence[Sample], option: str) -> None:
    """``DatasetError`` naming ``option`` and the fields there are, when no sample carries
    ``field``."""
    fields = known_fields(samples)
    if field not in fields:
        raise DatasetError(
            f"{option}: no sample has the field {field!r}; fields present: {', '.join(fields)}"
        )


def parse_where(texts: Sequence[str], samples: Sequence[Sample]) -> dict[str, list[str]]:
    """``--where FIELD=VALUE`` texts as ``{field: [values]}`` (a field repeated: any of its
    values). ``DatasetError`` for a text without ``=`` or a field no sample has."""
    out: dict[str, list[str]] = {}
    for text in texts:
        field, sep, value = text.partition("=")
        field = field.strip()
        if not sep or not field:
            raise DatasetError(f"--where {text!r}: expected FIELD=VALUE, e.g. task=remove-lesion")
        check_field(field, samples, f"--where {text!r}")
        out.setdefault(field, []).append(value)
    return out


def where_matches(sample: Sample, where: dict[str, list[str]]) -> bool:
    """Whether ``sample`` has, for every field of ``where``, one of its values."""
    return all(field_value(sample, field) in values for field, values in where.items())


def select_split(dataset: Any, name: Any, spec: str) -> Any:
    """The samples of ``dataset`` (loaded from ``spec``) whose split is ``name``, as a dataset of
    the same kind (:meth:`~medibench.datasets.Dataset.subset`).

    Raises:
        DatasetError: no sample has that split (naming the splits present and their counts).
    """
    wanted = str(name)
    counts: dict[str, int] = {}
    for s in dataset:
        counts[s.split] = counts.get(s.split, 0) + 1
    if wanted not in counts:
        present = ", ".join(f"{k} ({n})" for k, n in sorted(counts.items()))
        raise DatasetError(
            f"dataset {spec!r} has no split {wanted!r} (--dataset-option split=); "
            f"splits present: {present or 'none'}"
        )
    return dataset.subset(s for s in dataset if s.split == wanted)
