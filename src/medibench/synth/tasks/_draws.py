"""The item's draws: lesions at its knobs (one, several, or one at a described place among
others) and counts.

Every draw comes from the item's generator (``ctx.rng``) in a fixed order, so an item's lesions
are a pure function of its identity.
"""

from __future__ import annotations

import cv2
import numpy as np

from medibench.synth.scenes import Lesion, Rendered, Scene, SceneError, place_lesion
from medibench.synth.tasks._base import TaskContext
from medibench.synth.tasks._common import (
    COLOUR_PREFIXES,
    Place,
    lesion_hosts_here,
    lesion_spec,
    locate,
)

__all__ = [
    "count",
    "lesion_elsewhere",
    "lesions_at_distinct_places",
    "new_lesion",
    "new_lesions",
]


def new_lesion(
    ctx: TaskContext,
    scene: Scene,
    rendered: Rendered,
    *,
    avoid: tuple[Lesion, ...] = (),
    radius_scale: float = 1.0,
    radius: float | None = None,
    hosts: list[str] | None = None,
) -> Lesion:
    """A lesion at the item's knobs (radius, contrast) in a host that can hold it.

    Hosts (``hosts``, default every lesion host of the scene) are tried in a random order among
    those whose depth (largest distance to their border) fits the radius; when none does the
    error says so (a lesion larger than every organ is an impossible knob). ``radius`` (px)
    overrides the drawn radius (the draw still happens, so the generator stream is the same).
    """
    d = ctx.difficulty
    drawn = float(ctx.rng.uniform(*d.lesion_radius)) * ctx.size * radius_scale
    radius = drawn if radius is None else float(radius)
    strength = float(ctx.rng.uniform(*d.lesion_contrast))
    hosts = list(hosts) if hosts else lesion_hosts_here(ctx.modality, rendered)
    depth = {h: _depth(rendered.labels[h]) for h in hosts}
    fits = [h for h in hosts if depth[h] >= radius + 2.0]
    if not fits:
        deepest = max(depth.values(), default=0.0)
        raise SceneError(
            f"a lesion of radius {radius:.1f} px ({radius / ctx.size:.3f} of the image) does not "
            f"fit in any {ctx.modality} host ({', '.join(hosts)}; the deepest holds "
            f"{deepest - 2:.1f} px): the lesion is larger than the organ; lower lesion_radius "
            "or raise the image size"
        )
    error: SceneError | None = None
    for i in ctx.rng.permutation(len(fits)):
        host = fits[int(i)]
        kind, _, contrast = lesion_spec(ctx.modality, host, scene.param("variant"))
        contrast *= strength
        if ctx.modality.split("-")[0] in COLOUR_PREFIXES:  # an opacity
            contrast = float(np.clip(contrast, 0.05, 1.0))
        try:
            return place_lesion(
                scene, rendered, host=host, radius=radius, contrast=contrast, kind=kind,
                rng=ctx.rng, avoid=avoid,
            )  # fmt: skip
        except SceneError as exc:  # no room away from the other lesions: try another host
            error = exc
    assert error is not None
    raise error


def lesion_elsewhere(
    ctx: TaskContext,
    scene: Scene,
    rendered: Rendered,
    *,
    avoid: tuple[Lesion, ...],
    not_at: tuple[str, str, str],
    tries: int = 6,
    **kwargs,
) -> Lesion:
    """:func:`new_lesion` whose :func:`locate` key differs from ``not_at`` (a few tries)."""
    for _ in range(tries):
        lesion = new_lesion(ctx, scene, rendered, avoid=avoid, **kwargs)
        if locate(lesion.center, lesion.host, rendered, scene).key != not_at:
            return lesion
    raise SceneError("no lesion place that can be told apart from the described one")


def _depth(mask: np.ndarray) -> float:
    """Largest distance (px) from a pixel of ``mask`` to its outside (the image edge counts)."""
    padded = np.pad(mask, 1).astype(np.uint8)
    # OpenCV's precise Euclidean transform: ~10x faster than scipy's at 256 px, same values
    return float(cv2.distanceTransform(padded, cv2.DIST_L2, cv2.DIST_MASK_PRECISE).max())


def new_lesions(ctx: TaskContext, scene: Scene, rendered: Rendered, n: int) -> list[Lesion]:
    """``n`` lesions drawn one after the other, each away from the ones before."""
    lesions: list[Lesion] = []
    for _ in range(n):
        lesions.append(new_lesion(ctx, scene, rendered, avoid=tuple(lesions)))
    return lesions


def lesions_at_distinct_places(
    ctx: TaskContext, scene: Scene, rendered: Rendered
) -> tuple[list[Lesion], Place]:
    """One lesion plus at least one distractor, each at a place described differently; the
    first lesion's place."""
    n = max(1, count(ctx, ctx.difficulty.n_distractors))
    first = new_lesion(ctx, scene, rendered)
    place = locate(first.center, first.host, rendered, scene)
    lesions = [first]
    for _ in range(n):
        lesions.append(
            lesion_elsewhere(ctx, scene, rendered, avoid=tuple(lesions), not_at=place.key)
        )
    return lesions, place


def count(ctx: TaskContext, bounds: tuple[int, int]) -> int:
    """A count drawn uniformly from ``bounds`` (both ends included)."""
    return int(ctx.rng.integers(bounds[0], bounds[1] + 1))
