"""Fast building blocks of the scenes: smooth noise, shapes, vessel trees, lesion patches, display.

Noise fields are small Gaussian grids enlarged with OpenCV's bicubic resize (a few hundred
microseconds at 512 px), never per-pixel Python loops. Shapes are expressed as an *elliptic
radius* field ``rho`` (1 on the border, <1 inside), so masks, soft edges and thickness profiles
all come from one array. Coordinates of whole-image shapes are normalised: ``(y, x)`` in
``[-1, 1]``, y down, x right (the image's right).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from medibench.synth.scenes._scene import Lesion, Rendered, Scene

__all__ = [
    "LesionPatch",
    "compose_raw",
    "coords",
    "ellipse_rho",
    "fractal_noise",
    "kind_shapes",
    "lesion_label",
    "lesion_patch",
    "mass_effect",
    "paint_lesions",
    "rgb_to_uint8",
    "sensor_noise",
    "smooth_noise",
    "soft_edge",
    "to_display",
    "vessel_tree",
]


def coords(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalised pixel-centre coordinates ``(y (size, 1), x (1, size))`` in ``(-1, 1)``."""
    t = ((np.arange(size, dtype=np.float32) + 0.5) / size * 2.0 - 1.0).astype(np.float32)
    return t[:, None], t[None, :]


def smooth_noise(rng: np.random.Generator, size: int, cells: int) -> np.ndarray:
    """A smooth random field ``(size, size)`` float32, zero mean and unit std, with about
    ``cells`` independent values across the image (feature size ``size / cells``)."""
    cells = int(max(2, min(cells, size)))
    grid = rng.standard_normal((cells + 1, cells + 1)).astype(np.float32)
    field = cv2.resize(grid, (size, size), interpolation=cv2.INTER_CUBIC)
    field -= field.mean()
    std = float(field.std())
    return field / std if std > 0 else field


def fractal_noise(
    rng: np.random.Generator, size: int, cells: int = 4, octaves: int = 4, persistence: float = 0.55
) -> np.ndarray:
    """Sum of ``octaves`` smooth fields, each twice as fine and ``persistence`` times as strong;
    float32 ``(size, size)``, zero mean, unit std."""
    total = np.zeros((size, size), np.float32)
    amp = 1.0
    for k in range(octaves):
        total += np.float32(amp) * smooth_noise(rng, size, cells * 2**k)
        amp *= persistence
    total -= total.mean()
    std = float(total.std())
    return total / std if std > 0 else total


def correlated_noise(rng: np.random.Generator, size: int, sigma: float, std: float) -> np.ndarray:
    """White Gaussian noise blurred by ``sigma`` pixels (the detector's correlation), rescaled to
    standard deviation ``std``: float32 ``(size, size)``."""
    white = rng.standard_normal((size, size)).astype(np.float32)
    corr: np.ndarray = cv2.GaussianBlur(white, (0, 0), sigma)
    corr *= np.float32(std / max(float(corr.std()), 1e-6))
    return corr


def sensor_noise(rng: np.random.Generator, size: int, std: float, gain: np.ndarray) -> np.ndarray:
    """Camera sensor noise: i.i.d. ``N(0, std)`` float32 ``(size, size, 3)``, times ``gain``.

    ``gain`` ``(size, size)`` is the illumination (0 outside the field of view: no noise in
    the black there).
    """
    noise = rng.standard_normal((size, size, 3)).astype(np.float32) * np.float32(std)
    noise *= gain[:, :, None]
    return noise


def ellipse_rho(
    size: int,
    center: tuple[float, float],
    radii: tuple[float, float],
    angle: float = 0.0,
    warp: np.ndarray | None = None,
    wobble: float = 0.0,
) -> np.ndarray:
    """Elliptic radius of every pixel for an ellipse in normalised coordinates.

    ``center = (y, x)``, ``radii = (ry, rx)``, ``angle`` in degrees; a smooth ``warp`` field
    times ``wobble`` perturbs the border (``rho * (1 + wobble * warp)``). float32 ``(size, size)``.
    """
    y, x = coords(size)
    dy, dx = y - np.float32(center[0]), x - np.float32(center[1])
    if angle:
        c, s = np.float32(np.cos(np.radians(angle))), np.float32(np.sin(np.radians(angle)))
        dy, dx = c * dy + s * dx, -s * dy + c * dx
    rho = np.sqrt((dy / np.float32(radii[0])) ** 2 + (dx / np.float32(radii[1])) ** 2)
    if warp is not None and wobble:
        rho = rho * (1.0 + np.float32(wobble) * warp)
    return rho.astype(np.float32, copy=False)


def soft_edge(rho: np.ndarray, softness: float) -> np.ndarray:
    """1 for ``rho <= 1 - softness``, a half cosine down to 0 at ``rho = 1``, 0 beyond (float32)."""
    if softness <= 0:
        return (rho < 1).astype(np.float32)
    t = np.clip((rho - (1.0 - softness)) / softness, 0.0, 1.0)
    return (0.5 * (1.0 + np.cos(np.pi * t))).astype(np.float32)


def vessel_tree(
    rng: np.random.Generator,
    size: int,
    roots: list[tuple[float, float, float]],
    *,
    length: float,
    width: float,
    depth: int,
    spread: float = 30.0,
    tortuosity: float = 12.0,
) -> np.ndarray:
    """Branching tubes drawn from ``roots`` (``(y, x, direction in degrees)``, normalised).

    Each branch walks ``length`` (normalised) in six jittered steps, then splits in two at
    ``+-spread`` degrees with 0.72 x the width and 0.78 x the length, ``depth`` levels deep.
    Returns float32 ``(size, size)`` in ``[0, 1]`` (1 = vessel), anti-aliased.
    """
    canvas = np.zeros((size, size), np.uint8)
    scale = size / 2.0
    stack = [(y, x, a, length, width, depth) for y, x, a in roots]
    while stack:
        y, x, a, ln, wd, lv = stack.pop()
        thick = max(1, int(round(wd * scale)))
        pts = [(x, y)]
        for _ in range(6):
            a += float(rng.normal(0.0, tortuosity))
            y += ln / 6 * np.sin(np.radians(a))
            x += ln / 6 * np.cos(np.radians(a))
            pts.append((x, y))
        poly = np.array([[(px + 1) * scale * 16, (py + 1) * scale * 16] for px, py in pts])
        cv2.polylines(canvas, [poly.astype(np.int32)], False, 255, thick, cv2.LINE_AA, shift=4)
        if lv > 1:
            for sign in (-1.0, 1.0):
                turn = sign * spread * float(rng.uniform(0.6, 1.3))
                stack.append((y, x, a + turn, ln * 0.78, wd * 0.72, lv - 1))
    return canvas.astype(np.float32) / 255.0


@dataclass(frozen=True)
class LesionPatch:
    """A lesion drawn in its bounding box ``image[rows, cols]``.

    ``rho``: elliptic radius normalised by the (irregular) border, <1 inside; ``weight``: the
    soft-edged, textured strength in ``[0, ~1.3]``, exactly 0 outside the support; ``support``:
    ``rho < 1``; ``height``: a dome ``sqrt(1 - rho^2)`` (0 outside), for raised lesions;
    ``dy, dx``: offsets from the centre in pixels.
    """

    rows: slice
    cols: slice
    rho: np.ndarray
    weight: np.ndarray
    support: np.ndarray
    height: np.ndarray
    dy: np.ndarray
    dx: np.ndarray


def lesion_patch(
    lesion: Lesion, size: int, *, irregularity: float = 0.08, softness: float = 0.35,
    texture: float = 0.15,
) -> LesionPatch | None:
    """Draw ``lesion`` inside its ellipse; ``None`` when it lies entirely outside the image.

    The border is ``1 - sum_k a_k (1 + cos(k theta + p_k)) / 2`` for ``k = 2..5`` with
    ``sum a_k = irregularity`` (so the lesion never leaves its ellipse); amplitudes, phases and
    texture come from ``lesion.seed`` only.
    """
    rng = np.random.default_rng(np.random.PCG64(int(lesion.seed) & (2**63 - 1)))
    ry, rx = (max(float(r), 0.5) for r in lesion.radii)
    cy, cx = (float(c) for c in lesion.center)
    reach = max(ry, rx) + 1.0
    top, bottom = max(0, int(np.floor(cy - reach))), min(size, int(np.ceil(cy + reach)) + 1)
    left, right = max(0, int(np.floor(cx - reach))), min(size, int(np.ceil(cx + reach)) + 1)
    if top >= bottom or left >= right:
        return None
    dy = (np.arange(top, bottom, dtype=np.float32) - np.float32(cy))[:, None]
    dx = (np.arange(left, right, dtype=np.float32) - np.float32(cx))[None, :]
    dy, dx = np.broadcast_arrays(dy, dx)
    c, s = np.cos(np.radians(lesion.angle)), np.sin(np.radians(lesion.angle))
    u, v = c * dy + s * dx, -s * dy + c * dx
    rho = np.sqrt((u / ry) ** 2 + (v / rx) ** 2)
    amps = rng.dirichlet(np.ones(4)) * irregularity
    phases = rng.uniform(0.0, 2 * np.pi, 4)
    if irregularity > 0:
        theta = np.arctan2(v, u)
        border = 1.0 - sum(
            a * 0.5 * (1 + np.cos((k + 2) * theta + p))
            for k, (a, p) in enumerate(zip(amps, phases, strict=True))
        )
        rho = rho / border
    rho = rho.astype(np.float32)
    support = rho < 1.0
    n = cv2.resize(
        rng.standard_normal((5, 5)).astype(np.float32),
        (right - left, bottom - top),
        interpolation=cv2.INTER_CUBIC,
    )
    weight = soft_edge(rho, softness) * np.maximum(0.0, 1.0 + np.float32(texture) * n)
    weight[~support] = 0.0
    height = np.sqrt(np.clip(1.0 - rho**2, 0.0, 1.0)).astype(np.float32)
    return LesionPatch(
        slice(top, bottom),
        slice(left, right),
        rho,
        weight.astype(np.float32),
        support,
        height,
        dy.astype(np.float32),
        dx.astype(np.float32),
    )


def paint_lesions(
    lesions: Sequence[Lesion],
    size: int,
    labels: Mapping[str, np.ndarray],
    shape: Callable[[Lesion], Mapping[str, float]],
    paint: Callable[[Lesion, LesionPatch], None],
) -> dict[str, np.ndarray]:
    """Draw every lesion and let ``paint`` apply it; return ``labels`` plus each lesion's label.

    Lesion ``i`` is drawn with :func:`lesion_patch` and ``**shape(lesion)``; ``paint(lesion,
    patch)`` changes the modality's canvas inside the patch (skipped for a lesion off the image),
    in lesion order; ``"lesion:<i>"`` is its support (:func:`lesion_label`).
    """
    out = dict(labels)
    for i, lesion in enumerate(lesions):
        patch = lesion_patch(lesion, size, **shape(lesion))
        if patch is not None:
            paint(lesion, patch)
        out[f"lesion:{i}"] = lesion_label(patch, size)
    return out


def compose_raw(
    scene: Scene,
    anat: dict[str, Any],
    shape: Callable[[Lesion], Mapping[str, float]],
    delta: Callable[[Lesion, LesionPatch], np.ndarray],
    display: tuple[float, float],
) -> Rendered:
    """Render a grey modality whose lesions add to the raw image (HU, attenuation).

    Each lesion adds ``delta(lesion, patch)`` (raw units) inside its patch, before the noise
    (``anat["noise"]``, added when ``scene.noise``); ``display`` maps the raw range to grey.
    """
    raw = anat["raw"].copy()

    def paint(lesion: Lesion, patch: LesionPatch) -> None:
        raw[patch.rows, patch.cols] += delta(lesion, patch)

    labels = paint_lesions(scene.lesions, scene.size, anat["labels"], shape, paint)
    if scene.noise:
        raw += anat["noise"]
    return Rendered(to_display(raw, *display), labels, raw, display)


def kind_shapes(
    table: Mapping[str, tuple[float, float]], default: tuple[float, float]
) -> Callable[[Lesion], dict[str, float]]:
    """A ``shape`` for :func:`paint_lesions` from ``{kind: (irregularity, softness)}``."""

    def shape(lesion: Lesion) -> dict[str, float]:
        irregularity, softness = table.get(lesion.kind, default)
        return {"irregularity": irregularity, "softness": softness}

    return shape


def mass_effect(image: np.ndarray, patch: LesionPatch, strength: float) -> None:
    """Push the tissue inside the lesion's support outwards, in place (``image`` float32).

    A pixel at offset ``d`` from the centre takes the value at ``d * (1 - strength * (1 - rho))``:
    the core is magnified, the rim compressed, and at the border (``rho = 1``) nothing moves, so
    there is no seam and nothing changes outside the support.
    """
    box = np.ascontiguousarray(image[patch.rows, patch.cols])
    pull = np.float32(strength) * (1.0 - np.clip(patch.rho, 0.0, 1.0))
    h, w = box.shape[:2]
    map_y = (np.arange(h, dtype=np.float32)[:, None] - patch.dy * pull).astype(np.float32)
    map_x = (np.arange(w, dtype=np.float32)[None, :] - patch.dx * pull).astype(np.float32)
    warped = cv2.remap(box, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    support = patch.support if box.ndim == 2 else patch.support[:, :, None]
    image[patch.rows, patch.cols] = np.where(support, warped, box)


def lesion_label(patch: LesionPatch | None, size: int) -> np.ndarray:
    """The full-size bool support of a lesion patch (all False when it is off the image)."""
    label = np.zeros((size, size), bool)
    if patch is not None:
        label[patch.rows, patch.cols] = patch.support
    label.setflags(write=False)
    return label


def to_display(raw: np.ndarray, low: float, high: float) -> np.ndarray:
    """``rint(clip((raw - low) / (high - low)) * 255)`` as uint8 RGB with three equal channels."""
    grey = np.clip((raw - np.float32(low)) * np.float32(255.0 / (high - low)), 0, 255)
    grey = np.rint(grey).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


def rgb_to_uint8(rgb: np.ndarray) -> np.ndarray:
    """Float RGB in ``[0, 1]`` to uint8 (clipped, rounded)."""
    return np.rint(np.clip(rgb, 0.0, 1.0) * np.float32(255)).astype(np.uint8)
