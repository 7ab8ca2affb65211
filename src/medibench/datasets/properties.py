"""Properties of samples that scores are broken down by (``score`` / ``report --by-bins``).

A property gives each sample a number (binned by the edges the user gives) or a category (one
group per level, in the property's declared order), or no value (the sample is counted as
such and left out of the breakdown, never dropped silently):

* ``mask_fraction`` (every benchmark whose samples have masks): the edit region's share of the
  image, ``pixels inside the ROI mask / pixels of the mask`` (the mask has the image's size),
  the mask read as :func:`medibench.io.read_mask` reads it (non-zero is inside; a mask with
  other levels binarised at half its maximum). A sample without a mask has no value. A
  benchmark may define its own ``mask_fraction`` (PaintBench: where input and answer differ).
* ``metadata.KEY``: any numeric metadata field (a sample without the key has no value; a
  value that is not a number is an error naming the sample).
* a benchmark's own properties (``Benchmark.properties``): PaintBench's ``object_count``,
  ``background_complexity`` and ``color_scheme`` (:mod:`medibench.benchmarks.paintbench.factors`).

Example:
    >>> from medibench.samples import Sample
    >>> s = Sample(sample_id="a", benchmark="native", input="in.png", instruction="x",
    ...            perspective="modification", metadata={"lesion_mm": 12})
    >>> values, prop = property_values([s], "metadata.lesion_mm")
    >>> values, prop.categorical
    ({'a': 12.0}, False)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from medibench.samples import Sample

__all__ = [
    "GENERIC_PROPERTIES",
    "PropertyError",
    "SampleProperty",
    "available_properties",
    "find_property",
    "mask_fraction",
    "property_values",
]

#: A property's value for one sample: a number, a category, or ``None`` (no value).
Value = float | str | None


class PropertyError(ValueError):
    """A property that cannot be computed: an unknown name (the message lists the known ones),
    a non-numeric metadata value, an unreadable mask; names the sample and the file."""


@dataclass(frozen=True)
class SampleProperty:
    """One property: ``compute(sample)`` gives its value (``None``: not defined for that sample).

    Attributes:
        help: what it is, in a line (listed in the error for an unknown name).
        compute: ``(Sample) -> float | str | None``.
        levels: a categorical property's values in their order (the trend test's order:
            level ``i`` counts as ``i``); empty for a numeric property.
    """

    help: str
    compute: Callable[[Sample], Value]
    levels: tuple[str, ...] = ()

    @property
    def categorical(self) -> bool:
        """Whether the property's values are categories (grouped, not binned)."""
        return bool(self.levels)


def mask_fraction(sample: Sample) -> float | None:
    """``pixels inside the ROI mask / pixels of the mask``; ``None`` without a mask."""
    if sample.mask is None:
        return None
    from medibench.io import ImageReadError, read_mask

    try:
        mask = read_mask(sample.mask)
    except ImageReadError as exc:
        raise PropertyError(f"mask_fraction of sample '{sample.sample_id}': {exc}") from None
    return float(mask.sum()) / mask.size


#: The properties every benchmark's samples have (a benchmark may replace one for its samples).
GENERIC_PROPERTIES: dict[str, SampleProperty] = {
    "mask_fraction": SampleProperty(
        "edit-region size: ROI mask pixels / image pixels (samples with a mask)", mask_fraction
    ),
}


def available_properties(benchmarks: Iterable[str]) -> dict[str, SampleProperty]:
    """The properties samples of ``benchmarks`` can have: the generic ones and each benchmark's
    own (a benchmark's replaces the generic one of its name), by name."""
    out = dict(GENERIC_PROPERTIES)
    for name in sorted(set(benchmarks)):
        out.update(_own(name))
    return dict(sorted(out.items()))


def find_property(name: str, benchmarks: Iterable[str]) -> SampleProperty:
    """The property ``name`` for samples of ``benchmarks``: one of
    :func:`available_properties`, or ``metadata.KEY`` (a numeric metadata field).

    Raises:
        PropertyError: an unknown name, listing the available ones and ``metadata.KEY``.
    """
    if name.startswith("metadata.") and len(name) > len("metadata."):
        return SampleProperty(f"the numeric metadata field {name[9:]!r}", _metadata(name[9:]))
    known = available_properties(benchmarks)
    if name not in known:
        listed = ", ".join(f"{n} ({p.help})" for n, p in known.items())
        raise PropertyError(
            f"unknown sample property {name!r}; available for these samples: {listed}; or "
            "metadata.KEY for a numeric metadata field"
        )
    return known[name]


def property_values(
    samples: Sequence[Sample], name: str
) -> tuple[dict[str, float | str], SampleProperty]:
    """``({sample_id: value}, the property)`` for the samples that have a value of ``name``
    (:func:`find_property`; each sample's benchmark's own property of that name when it has
    one); the others are left out (count them as ``len(samples) - len(values)``).

    Raises:
        PropertyError: an unknown name (listing the available ones and ``metadata.KEY``), a
            non-numeric ``metadata.KEY`` value or a categorical value not among the levels
            (naming the sample), a file that cannot be read.
    """
    prop = find_property(name, (s.benchmark for s in samples))
    if name.startswith("metadata."):
        return _values(samples, lambda s: prop, name), prop
    own = {b: _own(b) for b in {s.benchmark for s in samples}}
    pick = {b: props.get(name, GENERIC_PROPERTIES.get(name)) for b, props in own.items()}
    return _values(samples, lambda s: pick[s.benchmark], name), prop


def _values(
    samples: Sequence[Sample], which: Callable[[Sample], SampleProperty | None], name: str
) -> dict[str, float | str]:
    out: dict[str, float | str] = {}
    for s in samples:
        prop = which(s)
        value = None if prop is None else prop.compute(s)
        if value is None:
            continue
        if prop is not None and prop.levels and value not in prop.levels:
            raise PropertyError(
                f"{name} of sample '{s.sample_id}' is {value!r}, not one of its levels "
                f"({', '.join(prop.levels)})"
            )
        out[s.sample_id] = value
    return out


def _metadata(key: str) -> Callable[[Sample], float | None]:
    def compute(sample: Sample) -> float | None:
        value = sample.metadata.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise PropertyError(
                f"metadata.{key} of sample '{sample.sample_id}' is {value!r}, not a number: "
                f"bin numeric fields only (group by a text field with --by metadata.{key})"
            )
        return float(value)

    return compute


def _own(benchmark: str) -> dict[str, SampleProperty]:
    """The properties benchmark ``benchmark`` defines (``{}`` for a name not registered: a
    native dataset's samples may name any benchmark)."""
    from medibench._benchmark import BENCHMARKS
    from medibench.registry import UnknownNameError

    try:
        bench = BENCHMARKS.get(benchmark)
    except UnknownNameError:
        return {}
    return bench.sample_properties()
