"""PaintBench's diagnostic factors as sample properties (``--by-bins``; docs/protocols.md).

The paper finds performance degrading with object count, background complexity, colour scheme
and edit-region size. Its generator (``generate_benchmark.py``, ``VISUAL_CONDITIONS``) varies
one axis at a time away from the ``baseline`` condition (1024x1024, standard palette, solid
background, the task's default object count); each factor is that axis, read from the
problem's ``visual_condition`` and ``n`` as the generator wrote them:

===========================  ==============================================================
property                     value
===========================  ==============================================================
``mask_fraction``            edit-region size: ``|any(input != answer)| / (H W)``, the edit
                             region ``paintbench@1`` scores (PaintBench has no masks; files
                             read as its evaluator reads them: PIL, ``convert("RGB")``);
                             every problem with an answer image of the input's size
``object_count``             the generator's ``n`` (objects in the scene) for the conditions
                             ``baseline``, ``n_med``, ``n_high``, ``n_xhigh``; a problem
                             without ``n`` gets the generator's table for its task and level
                             (default 3/10/25/60, counting 5/10/25/60, comparison and
                             ordering 3/5/7/9, pattern 1/3/6/10)
``background_complexity``    ``solid`` (``baseline``) or ``striped`` (``striped``)
``color_scheme``             ``standard`` (``baseline``) or ``nonstandard`` (``nonstandard``)
===========================  ==============================================================

A problem of another condition has no value of that factor (``horizontal`` and ``vertical``
vary the aspect ratio, which the visual-condition rows already show): it is counted as such,
not mixed into the comparison. The diagnostic ``preservation`` task enters no breakdown, as it
enters no mean (``paintbench@1``'s ``outside``).
"""

from __future__ import annotations

from medibench.datasets.properties import SampleProperty
from medibench.samples import Sample

__all__ = ["PROPERTIES", "background_complexity", "color_scheme", "edit_fraction", "object_count"]

#: The object-count level of each condition on that axis (generate_benchmark.py's n_level).
_N_LEVEL = {"baseline": 0, "n_med": 1, "n_high": 2, "n_xhigh": 3}
#: n by level, per task (generate_benchmark.py's _N_DEFAULT, _N_COUNTING, _N_CMP_ORD, _N_PATTERN).
_N_BY_TASK = {"counting": (5, 10, 25, 60), "comparison": (3, 5, 7, 9), "ordering": (3, 5, 7, 9),
              "pattern": (1, 3, 6, 10)}  # fmt: skip
_N_DEFAULT = (3, 10, 25, 60)


def edit_fraction(sample: Sample) -> float | None:
    """``|any(input != answer)| / (H W)``; ``None`` without an answer or when the answer's size
    is not the input's (``paintbench@1`` scores no such problem)."""
    if sample.target is None:
        return None
    from medibench.metrics.paint_iou import edit_region
    from medibench.protocols import read_pil_images

    images = read_pil_images(sample)
    if images.target is None or images.target.shape != images.input.shape:
        return None
    region = edit_region(images.input, images.target)
    return float(region.sum()) / region.size


def object_count(sample: Sample) -> float | None:
    """The generator's ``n`` on the object-count axis (module docstring), else ``None``."""
    level = _N_LEVEL.get(str(sample.metadata.get("visual_condition", "")))
    if level is None:
        return None
    n = sample.metadata.get("n")
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        return float(n)
    return float(_N_BY_TASK.get(sample.task, _N_DEFAULT)[level])


def background_complexity(sample: Sample) -> str | None:
    """``"solid"`` for ``baseline``, ``"striped"`` for ``striped``, else ``None``."""
    return {"baseline": "solid", "striped": "striped"}.get(_condition(sample))


def color_scheme(sample: Sample) -> str | None:
    """``"standard"`` for ``baseline``, ``"nonstandard"`` for ``nonstandard``, else ``None``."""
    return {"baseline": "standard", "nonstandard": "nonstandard"}.get(_condition(sample))


def _condition(sample: Sample) -> str:
    return str(sample.metadata.get("visual_condition", ""))


#: PaintBench's properties (its ``Benchmark.properties``).
PROPERTIES: dict[str, SampleProperty] = {
    "mask_fraction": SampleProperty(
        "edit-region size: pixels where input and answer differ / image pixels", edit_fraction
    ),
    "object_count": SampleProperty(
        "objects in the scene (n) on PaintBench's object-count axis: conditions baseline, "
        "n_med, n_high, n_xhigh",
        object_count,
    ),
    "background_complexity": SampleProperty(
        "PaintBench background: solid (baseline) or striped",
        background_complexity,
        levels=("solid", "striped"),
    ),  # fmt: skip
    "color_scheme": SampleProperty(
        "PaintBench palette: standard (baseline) or nonstandard",
        color_scheme,
        levels=("standard", "nonstandard"),
    ),  # fmt: skip
}
