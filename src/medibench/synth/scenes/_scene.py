"""Scenes: frozen descriptions of a medical image (anatomy + lesions), rendered deterministically.

A :class:`Scene` holds everything that decides its pixels: modality, size, anatomy seed, frozen
anatomy parameters, lesions and noise level. :func:`render` draws it. The anatomy, its texture and
its noise come from ``scene.seed`` only, never from the lesions, and every lesion changes pixels
only inside its own support (its ``"lesion:<i>"`` label). Hence the counterfactual contract:
``render(scene)`` and ``render(scene.with_lesions(other))`` are pixel-identical wherever neither
scene's lesions reach.

Each modality lives in its own module with the same small interface (``STRUCTURES``, ``HOSTS``,
``VARIANTS``, ``make_params(rng, clutter, variant)``, ``anatomy(size, seed, params, noise)``,
``compose(scene, anatomy)``, where ``anatomy`` returns a dict with its ``"labels"``, of which the
renderer keeps the non-empty ones); the lesion-free anatomy of the last few scenes is cached, so the
second render of a counterfactual pair costs only the lesions and the display mapping.

Example:
    >>> scene = make_scene("ct", seed=1, size=128)
    >>> plain = render(scene)
    >>> lesion = place_lesion(scene, plain, host="liver", radius=8, contrast=-40.0,
    ...                       kind="mass", rng=np.random.default_rng(0))
    >>> ill = render(scene.with_lesions([lesion]))
    >>> outside = ~ill.labels["lesion:0"]
    >>> bool((ill.image[outside] == plain.image[outside]).all())
    True
"""

from __future__ import annotations

import dataclasses
import importlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from scipy import ndimage

from medibench.synth._seed import item_rng, item_seed

#: Smallest and largest scene sizes, in pixels (square images).
MIN_SIZE = 64
MAX_SIZE = 2048

_MODULES: dict[str, str] = {
    "ct": "ct",
    "mri": "mri",
    "xray": "xray",
    "dermoscopy": "dermoscopy",
    "endoscopy": "endoscopy",
    "fundus": "fundus",
    "xray-real": "real",
    "ct-real": "real",
    "mri-real": "real",
    "fundus-real": "real",
}

#: Every modality :func:`make_scene` knows: six procedural ones, then real-image backgrounds.
MODALITIES: tuple[str, ...] = tuple(_MODULES)

#: Modalities rendered in grey (three equal channels) with a ``raw`` image in physical units.
GREY_MODALITIES: frozenset[str] = frozenset(
    {"ct", "mri", "xray", "xray-real", "ct-real", "mri-real"}
)


class SceneError(ValueError):
    """A scene or a lesion that cannot be made: unknown modality, size out of range, no room."""


@dataclass(frozen=True)
class Lesion:
    """One lesion, in pixel coordinates of its scene.

    ``contrast`` is in the modality's own units (HU for CT, attenuation for X-ray, normalised
    intensity for MR, colour strength in ``[0, 1]`` for the colour modalities); positive is
    brighter or denser. The lesion lies inside the ellipse of semi-axes ``radii`` rotated by
    ``angle`` degrees (its border may be irregular, never outside that ellipse); ``seed`` draws its
    shape and texture.
    """

    kind: str
    center: tuple[float, float]
    radii: tuple[float, float]
    angle: float = 0.0
    contrast: float = 1.0
    seed: int = 0
    host: str = ""


@dataclass(frozen=True)
class Scene:
    """A frozen, hashable description of one image; :func:`render` draws it."""

    modality: str
    size: int
    seed: int
    params: tuple[tuple[str, Any], ...]
    lesions: tuple[Lesion, ...] = ()
    noise: float = 1.0

    def with_lesions(self, lesions: Iterable[Lesion]) -> Scene:
        """The same anatomy, texture and noise with ``lesions`` instead of this scene's."""
        return dataclasses.replace(self, lesions=tuple(lesions))

    def with_noise(self, noise: float) -> Scene:
        """The same scene at another noise level (``0`` is noise-free)."""
        if not noise >= 0:
            raise SceneError(f"noise must be >= 0, got {noise}")
        return dataclasses.replace(self, noise=float(noise))

    def param(self, name: str, default: Any = None) -> Any:
        """One anatomy parameter by name."""
        return dict(self.params).get(name, default)


@dataclass(frozen=True)
class Rendered:
    """A drawn scene.

    ``image`` is uint8 RGB ``(size, size, 3)`` (grey modalities: three equal channels);
    ``labels`` maps each structure name to a bool ``(size, size)`` mask (read-only), with lesion
    ``i`` as ``"lesion:<i>"`` (its support: every pixel it can change); ``raw`` is the float32
    image in modality units before display mapping, or ``None`` for colour modalities;
    ``display`` is the ``(low, high)`` raw range mapped linearly onto 0..255.
    """

    image: np.ndarray
    labels: dict[str, np.ndarray]
    raw: np.ndarray | None = None
    display: tuple[float, float] | None = None


def make_scene(
    modality: str, *, seed: int, size: int = 256, clutter: float = 0.5, noise: float = 1.0,
    variant: str | None = None,
) -> Scene:
    """A random anatomy for ``seed`` (no lesions).

    Args:
        modality: one of :data:`MODALITIES`.
        seed: draws the anatomy parameters, texture and noise.
        size: output side in pixels, ``MIN_SIZE <= size <= MAX_SIZE``.
        clutter: ``[0, 1]``, amount of distracting content (hairs, highlights, bowel gas, ...).
        noise: noise level multiplier; 1 is the modality's typical noise, 0 none.
        variant: one of :func:`variants` (e.g. ``"thorax"`` for CT, ``"t2"`` for MR); drawn from
            ``seed`` when ``None``.

    Raises:
        SceneError: unknown modality or variant, size out of range, bad clutter or noise.
    """
    module = _module(modality)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise SceneError(f"size must be an integer, got {size!r}")
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise SceneError(f"size must be between {MIN_SIZE} and {MAX_SIZE} pixels, got {size}")
    if not 0.0 <= clutter <= 1.0:
        raise SceneError(f"clutter must be in [0, 1], got {clutter}")
    if not noise >= 0:
        raise SceneError(f"noise must be >= 0, got {noise}")
    valid = variants(modality)
    if variant is not None and variant not in valid:
        raise SceneError(f"unknown variant {variant!r} for {modality}; valid: {', '.join(valid)}")
    rng = item_rng("scene", modality, int(seed))
    if variant is None:
        variant = valid[int(rng.integers(len(valid)))]
    params = module.make_params(rng, float(clutter), variant)
    frozen = tuple(sorted({"variant": variant, "clutter": float(clutter), **params}.items()))
    return Scene(modality, int(size), int(seed), frozen, (), float(noise))


def render(scene: Scene) -> Rendered:
    """Draw ``scene``; deterministic: the same scene gives the same bytes."""
    module = _module(scene.modality)
    if not MIN_SIZE <= scene.size <= MAX_SIZE:
        raise SceneError(f"size must be between {MIN_SIZE} and {MAX_SIZE} pixels, got {scene.size}")
    anatomy = _anatomy(module, scene)
    return module.compose(scene, anatomy)


def structures(modality: str) -> tuple[str, ...]:
    """The labelled structures of this modality (a scene's labels hold those its variant has)."""
    return _attr(modality, "STRUCTURES")


def lesion_hosts(modality: str) -> tuple[str, ...]:
    """The structures a lesion of this modality may sit in."""
    return _attr(modality, "HOSTS")


def variants(modality: str) -> tuple[str, ...]:
    """The anatomy variants of this modality (the first is the default of its docs)."""
    return _attr(modality, "VARIANTS")


def place_lesion(
    scene: Scene,
    rendered: Rendered,
    *,
    host: str,
    radius: float,
    contrast: float,
    kind: str,
    rng: np.random.Generator,
    avoid: Sequence[Lesion] = (),
    margin: float = 1.5,
) -> Lesion:
    """A lesion of semi-axes ``(radius, radius * U(0.7, 1))`` fully inside ``host``.

    The centre is drawn uniformly among the pixels of ``host`` at least ``radius + margin`` from
    its border, and at least ``radius + r + margin`` from the centre of each lesion in ``avoid``
    (``r`` its larger semi-axis), so the lesions do not overlap.

    Raises:
        SceneError: ``host`` is not a lesion host of this scene, ``radius`` is not positive, or
            there is no room: the message says how deep the host is and what the lesion needs.
    """
    hosts = lesion_hosts(scene.modality)
    if host not in hosts:
        raise SceneError(
            f"{host!r} is not a lesion host for {scene.modality}; valid: {', '.join(hosts)}"
        )
    if host not in rendered.labels:
        present = [h for h in hosts if h in rendered.labels]
        raise SceneError(
            f"this {scene.modality} scene ({scene.param('variant')}) has no {host!r}; "
            f"its hosts: {', '.join(present)}"
        )
    if not radius > 0:
        raise SceneError(f"lesion radius must be positive, got {radius}")
    region = rendered.labels[host]
    depth = ndimage.distance_transform_edt(np.pad(region, 1))[1:-1, 1:-1]
    need = float(radius) + margin
    ok = depth >= need
    if not ok.any():
        raise SceneError(
            f"a lesion of radius {radius:g} px does not fit in {host!r}: the host is at most "
            f"{depth.max():.1f} px from its border and the lesion needs {need:g} px "
            f"(lesion larger than the organ; use a smaller radius or a larger image)"
        )
    if avoid:
        rows, cols = np.ogrid[: scene.size, : scene.size]
        for other in avoid:
            keep = float(radius) + max(other.radii) + margin
            ok &= (rows - other.center[0]) ** 2 + (cols - other.center[1]) ** 2 >= keep**2
        if not ok.any():
            raise SceneError(
                f"no room for a lesion of radius {radius:g} px in {host!r} away from the "
                f"{len(avoid)} lesion(s) to avoid"
            )
    rows, cols = np.nonzero(ok)
    i = int(rng.integers(rows.size))
    minor = float(radius) * float(rng.uniform(0.7, 1.0))
    angle = float(rng.uniform(0.0, 180.0))
    seed = int(rng.integers(2**31))
    return Lesion(
        kind=kind,
        center=(float(rows[i]), float(cols[i])),
        radii=(float(radius), minor),
        angle=angle,
        contrast=float(contrast),
        seed=seed,
        host=host,
    )


# --- helpers ---------------------------------------------------------------------------------


def _module(modality: str) -> ModuleType:
    if modality not in _MODULES:
        raise SceneError(f"unknown modality {modality!r}; valid: {', '.join(MODALITIES)}")
    return importlib.import_module(f"medibench.synth.scenes.{_MODULES[modality]}")


def _attr(modality: str, name: str) -> tuple[str, ...]:
    """A module constant; modules serving several modalities (``real``) key it by modality."""
    value = getattr(_module(modality), name)
    return tuple(value[modality] if isinstance(value, dict) else value)


_CACHE: OrderedDict[tuple, Any] = OrderedDict()
_CACHE_SIZE = 8


def _anatomy(module: ModuleType, scene: Scene) -> Any:
    """The lesion-free anatomy of ``scene`` (read-only arrays), from a small LRU cache."""
    key = (scene.modality, scene.size, scene.seed, scene.params, scene.noise)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    value = module.anatomy(
        scene.size,
        noise_seed(scene),
        {**dict(scene.params), "modality": scene.modality},
        scene.noise,
    )
    # A structure this scene does not show (too small, outside the field) has no label.
    value = {**value, "labels": {k: v for k, v in value["labels"].items() if v.any()}}
    for arr in _arrays(value):
        arr.setflags(write=False)
    _CACHE[key] = value
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


def noise_seed(scene: Scene) -> int:
    """The seed of a scene's texture and noise: its modality, seed and size, never its lesions."""
    return item_seed("scene-texture", scene.modality, scene.seed, scene.size)


def _arrays(value: Any) -> Iterable[np.ndarray]:
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _arrays(v)
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _arrays(v)
