"""Inpainters for modification: fill a masked region with healthy-looking tissue.

Specs (``--inpainter``):

- ``classical`` (default) = ``classical:telea``: OpenCV's Telea fast-marching inpainting;
  ``classical:ns`` Navier-Stokes; ``classical:biharmonic`` scikit-image's biharmonic
  inpainting. A smooth fill has no texture, so the classical inpainters then add seeded
  Gaussian texture whose high-frequency energy matches the ring of tissue around the region
  (``hf(x) = x - gaussian_filter(x, 1)``, the measure the default verifier checks).
- ``diffusers-inpaint:PATH``: a diffusers inpainting pipeline (SD-inpainting, FLUX.1-Fill) from
  a ``save_pretrained`` folder, with an optional LoRA (``lora=PATH``);
  :mod:`medibench.build._diffusers`.
- ``module:callable``: an object with ``inpaint(image, mask, *, prompt, seed)``, a class
  making one, or such a function.

Contract: ``inpaint(image (H, W, 3) uint8, mask (H, W) bool, *, prompt, seed) -> (H, W, 3)
uint8``; the build refuses another size, naming the inpainter and the item.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

import cv2
import numpy as np
from scipy import ndimage

from medibench.build._errors import BuildError

__all__ = ["ClassicalInpainter", "Inpainter", "high_frequency", "load_inpainter", "ring"]

CLASSICAL = ("telea", "ns", "biharmonic")


class Inpainter(Protocol):
    """What modification calls."""

    name: str

    def inpaint(
        self, image: np.ndarray, mask: np.ndarray, *, prompt: str, seed: int
    ) -> np.ndarray: ...


def high_frequency(plane: np.ndarray) -> np.ndarray:
    """``x - gaussian_filter(x, 1)`` in float64: the texture the default verifier compares."""
    x = np.asarray(plane, np.float64)
    return x - ndimage.gaussian_filter(x, 1.0, mode="reflect")


def ring(mask: np.ndarray, width: int, exclude: np.ndarray | None = None) -> np.ndarray:
    """The band of ``width`` pixels around ``mask`` (outside it, minus ``exclude``)."""
    band = ndimage.binary_dilation(mask, iterations=max(1, int(width))) & ~mask
    return band & ~exclude if exclude is not None else band


class ClassicalInpainter:
    """OpenCV (Telea, Navier-Stokes) or biharmonic inpainting plus matched texture."""

    def __init__(self, method: str = "telea", *, radius: int = 5, texture: bool = True) -> None:
        if method not in CLASSICAL:
            raise BuildError(
                f"unknown classical inpainter {method!r}; choose classical:{'|'.join(CLASSICAL)}"
            )
        self.method, self.radius, self.texture = method, int(radius), bool(texture)
        self.name = f"classical:{method}"

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "radius": self.radius, "texture": self.texture}

    def inpaint(self, image: np.ndarray, mask: np.ndarray, *, prompt: str, seed: int) -> np.ndarray:
        m8 = mask.astype(np.uint8)
        if self.method == "biharmonic":
            from skimage.restoration import inpaint_biharmonic

            filled = inpaint_biharmonic(image.astype(np.float64) / 255.0, mask, channel_axis=-1)
            out = np.clip(filled * 255.0, 0, 255)
        else:
            flag = cv2.INPAINT_TELEA if self.method == "telea" else cv2.INPAINT_NS
            out = cv2.inpaint(np.ascontiguousarray(image), m8, self.radius, flag).astype(np.float64)
        if self.texture:
            out = self._add_texture(image, out, mask, seed)
        result = image.copy()
        result[mask] = np.clip(np.rint(out[mask]), 0, 255).astype(np.uint8)
        return result

    def _add_texture(
        self, image: np.ndarray, filled: np.ndarray, mask: np.ndarray, seed: int
    ) -> np.ndarray:
        around = ring(mask, max(3, self.radius))
        if around.sum() < 8:
            return filled
        target = float(high_frequency(image.mean(axis=2))[around].std())
        rng = np.random.Generator(np.random.PCG64(seed))
        noise = rng.standard_normal(mask.shape)
        measured = float(high_frequency(noise).std())
        if measured <= 0:
            return filled
        noise *= target / measured
        return filled + noise[:, :, None]


class _FunctionInpainter:
    """A plain function ``fn(image, mask, *, prompt, seed)`` as an inpainter."""

    def __init__(self, fn: Callable[..., np.ndarray], name: str) -> None:
        self.fn, self.name = fn, name

    def spec(self) -> dict[str, Any]:
        return {"name": self.name}

    def inpaint(self, image: np.ndarray, mask: np.ndarray, *, prompt: str, seed: int) -> np.ndarray:
        return self.fn(image, mask, prompt=prompt, seed=seed)


def load_inpainter(spec: str | None, *, options: dict[str, Any] | None = None) -> Any:
    """The inpainter named by ``spec`` (see the module docstring); ``options`` go to a
    diffusers inpainter (``lora``, ``lora_scale``, ``steps``, ``device``, ...)."""
    spec = (spec or "classical").strip()
    options = dict(options or {})
    kind, _, arg = spec.partition(":")
    if kind == "classical":
        if options:
            raise BuildError(f"inpainter {spec!r} takes no options, got {sorted(options)}")
        return ClassicalInpainter(arg or "telea")
    if kind == "diffusers-inpaint":
        if not arg:
            raise BuildError("diffusers-inpaint needs a weights folder: diffusers-inpaint:PATH")
        from medibench.build._diffusers import DiffusersInpainter

        return DiffusersInpainter(arg, **options)
    if not arg:
        raise BuildError(
            f"unknown inpainter {spec!r}; use classical[:telea|ns|biharmonic], "
            "diffusers-inpaint:PATH or module:callable"
        )
    target = _import(spec, "inpainter")
    if hasattr(target, "inpaint"):
        return target
    if isinstance(target, type):
        made = target(**options)
        if hasattr(made, "inpaint"):
            return made
        raise BuildError(f"inpainter {spec!r}: {target.__name__}() has no inpaint() method")
    if callable(target):
        return _FunctionInpainter(target, spec)
    raise BuildError(f"inpainter {spec!r} is neither callable nor has inpaint()")


def _import(spec: str, what: str) -> Any:
    module, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise BuildError(f"{what} {spec!r}: cannot import module {module!r} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise BuildError(f"{what} {spec!r}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
