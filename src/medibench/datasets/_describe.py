"""``medibench dataset describe``: what a dataset holds, counted (docs/datasets.md).

:func:`describe_dataset` counts the samples by every grouping field they carry (benchmark,
split, task, region, modality, perspective, and the dataset a derived sample came from),
their patients, their input image sizes and their masks: how many samples have one, and the
masked fraction of the mask's pixels (min, median, mean, max). Images are read as scoring
reads them (:func:`~medibench.datasets.load_images`'s readers: an unreadable file is an error
naming it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from medibench.datasets._select import GROUPING_FIELDS, field_value
from medibench.samples import Sample

__all__ = ["describe_dataset"]

_FIELDS = (*GROUPING_FIELDS, "dataset")


def describe_dataset(samples: Iterable[Sample], spec: str) -> dict[str, Any]:
    """The description of ``samples`` (of the dataset ``spec``), as JSON-ready data::

        {"dataset": spec, "samples": n,
         "counts": {field: {value: samples}},        # fields some sample has; most first
         "patients": {"distinct": k, "samples_without": m},
         "image_sizes": {"WxH": samples},            # input images, most first
         "targets": {"with": a, "without": b},
         "masks": {"with": c, "without": d,
                   "fraction": {"min": .., "median": .., "mean": .., "max": ..} or None}}

    A mask's fraction is its pixels inside the ROI over all its pixels; ``None`` when no sample
    has a mask. A field is counted when some sample has a value for it (``""`` counts as a
    value of the Sample fields, shown as ``(empty)``).
    """
    from medibench.io import read_image, read_mask

    items = list(samples)
    counts: dict[str, dict[str, int]] = {}
    for name in _FIELDS:
        values = [field_value(s, name) for s in items]
        if all(v is None for v in values):
            continue
        tally = Counter("(none)" if v is None else v or "(empty)" for v in values)
        counts[name] = dict(sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))
    patients = [field_value(s, "patient") for s in items]
    sizes: Counter[str] = Counter()
    fractions: list[float] = []
    for s in items:
        image = read_image(s.input, mode="rgb")
        sizes[f"{image.shape[1]}x{image.shape[0]}"] += 1
        if s.mask is not None:
            mask = read_mask(s.mask)
            fractions.append(float(mask.sum()) / mask.size)
    with_target = sum(s.target is not None for s in items)
    return {
        "dataset": spec,
        "samples": len(items),
        "counts": counts,
        "patients": {
            "distinct": len({p for p in patients if p is not None}),
            "samples_without": sum(p is None for p in patients),
        },
        "image_sizes": dict(sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))),
        "targets": {"with": with_target, "without": len(items) - with_target},
        "masks": {
            "with": len(fractions),
            "without": len(items) - len(fractions),
            "fraction": _stats(fractions),
        },
    }


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    a = np.asarray(values, dtype=np.float64)
    return {
        "min": float(a.min()),
        "median": float(np.median(a)),
        "mean": float(a.mean()),
        "max": float(a.max()),
    }
