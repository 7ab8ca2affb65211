"""Transformation operators: the built-in suite's degradations (:mod:`medibench.synth.degrade`)
applied to real slices, each with its parameter draw and instruction templates.

The clean slice is the target and the degraded one the input (windowing: the slice in the asked
window is the target, the slice in another window the input). Raw-unit operators (low-dose
noise, ring and streak artefacts, windowing) need CT values in HU (DICOM CT) and, except
windowing, the source's display ``window``: both input and target are displayed through
:func:`~medibench.synth.degrade.apply_window` so they differ only by the degradation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from medibench.build._items import Slice
from medibench.synth import degrade

__all__ = ["OPERATORS", "Operator", "applicable", "modality_kind"]

Params = dict[str, Any]
Images = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Operator:
    """A degradation: ``draw(rng, slice)`` its parameters, ``apply(slice, params, rng, window)``
    the ``(input, target)`` uint8 RGB pair; ``kinds`` the modality kinds it suits (``ct``,
    ``mri``, ``other``); ``raw`` whether it needs HU values; ``function`` what it calls."""

    name: str
    kinds: tuple[str, ...]
    function: str
    draw: Callable[[np.random.Generator, Slice], Params]
    apply: Callable[[Slice, Params, np.random.Generator, Any], Images]
    templates: tuple[str, ...]
    raw: bool = False
    needs_window: bool = False


def modality_kind(modality: str) -> str:
    """``"ct"``, ``"mri"`` or ``"other"`` from a modality name."""
    m = modality.strip().lower()
    if m.startswith("ct"):
        return "ct"
    if m.startswith("mr"):
        return "mri"
    return "other"


def applicable(
    modality: str, sl: Slice, window: tuple[float, float] | None, names: tuple[str, ...] | None
) -> list[Operator]:
    """The operators that apply to ``sl`` (in table order), restricted to ``names`` if given."""
    kind = modality_kind(modality)
    out = []
    for op in OPERATORS.values():
        if names is not None and op.name not in names:
            continue
        if kind not in op.kinds or (op.raw and sl.raw is None):
            continue
        if op.needs_window and window is None:
            continue
        if op.name.startswith("super-resolution") and any(
            s % int(op.name.split("-")[-1].rstrip("x")) for s in sl.image.shape[:2]
        ):
            continue
        out.append(op)
    return out


# --- helpers ---------------------------------------------------------------------------------


def _display(sl: Slice, fn: Callable[[np.ndarray], np.ndarray]) -> Images:
    """Degrade the display image: one grey plane when the slice is grey (it stays grey)."""
    if sl.grayscale:
        plane = np.ascontiguousarray(sl.image[:, :, 0])
        return _rgb(fn(plane)), sl.image
    return fn(sl.image), sl.image


def _raw(sl: Slice, window: tuple[float, float], fn: Callable[[np.ndarray], np.ndarray]) -> Images:
    assert sl.raw is not None
    return _rgb(degrade.apply_window(fn(sl.raw), window)), _rgb(
        degrade.apply_window(sl.raw, window)
    )


def _rgb(plane: np.ndarray) -> np.ndarray:
    return np.repeat(plane[:, :, None], 3, axis=2) if plane.ndim == 2 else plane


def _u(lo: float, hi: float) -> Callable[[np.random.Generator, Slice], float]:
    return lambda rng, sl: float(rng.uniform(lo, hi))


def _scale(sl: Slice) -> float:
    return max(sl.image.shape[:2]) / 256


def _window_pair(sl: Slice, p: Params, rng: np.random.Generator, window: Any) -> Images:
    assert sl.raw is not None
    return (
        _rgb(degrade.apply_window(sl.raw, p["input_window"])),
        _rgb(degrade.apply_window(sl.raw, p["window"])),
    )


def _window_operator(name: str) -> Operator:
    def draw(rng: np.random.Generator, sl: Slice) -> Params:
        others = [w for w in degrade.CT_WINDOWS if w != name]
        return {"window": name, "input_window": others[int(rng.integers(len(others)))]}

    level, width = degrade.CT_WINDOWS[name]
    return Operator(
        f"window-{name.replace(' ', '-')}", ("ct",), "medibench.synth.degrade.apply_window",
        draw, _window_pair,
        (f"Apply the {name} window.",
         f"Display this CT in a {name} window (level {level:g}, width {width:g}).",
         f"Re-window the slice to {name} settings: W {width:g} / L {level:g} HU."),
        raw=True,
    )  # fmt: skip


def _super_resolution(factor: int) -> Operator:
    def draw(rng: np.random.Generator, sl: Slice) -> Params:
        return {"factor": factor}

    return Operator(
        f"super-resolution-{factor}x", _ALL, "medibench.synth.degrade.downsample", draw,
        lambda sl, p, rng, w: _display(sl, lambda x: degrade.downsample(x, p["factor"])),
        (f"Super-resolve this image by a factor of {factor}.",
         f"Restore the detail lost to {factor}x downsampling.",
         f"Increase the resolution of this {{modality}} image {factor}x."),
    )  # fmt: skip


def _denoise(
    noise: str,
    kinds: tuple[str, ...],
    key: str,
    spread: tuple[float, float],
    templates: tuple[str, ...],
) -> Operator:
    """``denoise-{noise}``: ``degrade.add_{noise}_noise(image, params[key], rng)`` on the
    display image, its strength ``key`` drawn uniformly from ``spread``."""
    function = f"add_{noise}_noise"
    add_noise = getattr(degrade, function)

    def draw(rng: np.random.Generator, sl: Slice) -> Params:
        return {key: float(rng.uniform(*spread))}

    def apply(sl: Slice, p: Params, rng: np.random.Generator, window: Any) -> Images:
        return _display(sl, lambda x: add_noise(x, p[key], rng))

    return Operator(
        f"denoise-{noise}", kinds, f"medibench.synth.degrade.{function}", draw, apply, templates
    )


def _ct_artefact(
    kind: str, counts: tuple[int, int], amplitudes: tuple[float, float], templates: tuple[str, ...]
) -> Operator:
    """``{kind}-artefact-removal``: ``degrade.{kind}_artefact`` on the HU values, with
    ``n_{kind}s`` drawn from ``counts`` (high end excluded) and an ``amplitude`` in HU from
    ``amplitudes``."""
    function = f"{kind}_artefact"
    add_artefact = getattr(degrade, function)
    count = f"n_{kind}s"

    def draw(rng: np.random.Generator, sl: Slice) -> Params:
        return {count: int(rng.integers(*counts)), "amplitude": float(rng.uniform(*amplitudes))}

    def apply(sl: Slice, p: Params, rng: np.random.Generator, window: Any) -> Images:
        return _raw(sl, window, lambda raw: add_artefact(raw, rng, **p))

    return Operator(
        f"{kind}-artefact-removal", ("ct",), f"medibench.synth.degrade.{function}", draw, apply,
        templates, raw=True, needs_window=True,
    )  # fmt: skip


_ALL = ("ct", "mri", "other")
_OPERATORS: list[Operator] = [
    _denoise("gaussian", _ALL, "sigma", (8.0, 20.0),
             ("Denoise this image.", "Remove the noise from this {modality} image.",
              "Suppress the Gaussian noise while keeping edges intact.")),
    _denoise("poisson", ("ct", "other"), "peak", (30.0, 80.0),
             ("Denoise this image.", "Remove the photon (shot) noise from this {modality} image.",
              "Reduce the quantum noise of this low-count acquisition.")),
    _denoise("rician", ("mri",), "sigma", (6.0, 15.0),
             ("Denoise this MR image.", "Remove the Rician noise from this MR magnitude image.",
              "Reduce the MR noise, including the noise floor in the background.")),
    Operator(
        "low-dose-ct", ("ct",), "medibench.synth.degrade.low_dose_noise",
        lambda rng, sl: {"dose": float(rng.uniform(0.1, 0.3)), "full_dose_sigma": 10.0},
        lambda sl, p, rng, w: _raw(sl, w, lambda raw: degrade.low_dose_noise(
            raw, p["dose"], rng, full_dose_sigma=p["full_dose_sigma"])),
        ("Denoise this low-dose CT.", "Turn this low-dose CT into a full-dose image.",
         "Remove the extra quantum noise of the reduced-dose acquisition."),
        raw=True, needs_window=True,
    ),
    Operator(
        "deblur", _ALL, "medibench.synth.degrade.gaussian_blur",
        lambda rng, sl: {"sigma_px": float(rng.uniform(1.0, 2.5)) * _scale(sl)},
        lambda sl, p, rng, w: _display(sl, lambda x: degrade.gaussian_blur(x, p["sigma_px"])),
        ("Deblur this image.", "Remove the blur and restore sharp edges.",
         "Sharpen this blurred {modality} image back to full detail."),
    ),
    *(_super_resolution(f) for f in (2, 4)),
    Operator(
        "mr-motion-correction", ("mri",), "medibench.synth.degrade.mr_motion_artefact",
        lambda rng, sl: {"fraction": float(rng.uniform(0.15, 0.35)),
                         "max_shift_px": float(rng.uniform(2.0, 4.0)) * _scale(sl)},
        lambda sl, p, rng, w: _display(sl, lambda x: degrade.mr_motion_artefact(
            x, rng, fraction=p["fraction"], max_shift_px=p["max_shift_px"])),
        ("Remove the motion artefact.", "Correct the motion ghosting in this MR image.",
         "Undo the ghosting caused by patient movement."),
    ),
    _ct_artefact("ring", (3, 7), (40.0, 80.0),
                 ("Remove the ring artefact.",
                  "Remove the concentric ring artefacts from this CT.")),
    _ct_artefact("streak", (4, 9), (60.0, 110.0),
                 ("Remove the streak artefacts.",
                  "Remove the bright and dark streaks from this CT.")),
    Operator(
        "bias-field-correction", ("mri",), "medibench.synth.degrade.add_bias_field",
        lambda rng, sl: {"strength": float(rng.uniform(0.2, 0.4))},
        lambda sl, p, rng, w: _display(sl, lambda x: degrade.add_bias_field(
            x, rng, strength=p["strength"])),
        ("Correct the bias field.", "Remove the intensity inhomogeneity from this MR image."),
    ),
    Operator(
        "enhance-contrast", _ALL, "medibench.synth.degrade.reduce_contrast",
        lambda rng, sl: {"factor": float(rng.uniform(0.35, 0.6))},
        lambda sl, p, rng, w: _display(sl, lambda x: degrade.reduce_contrast(x, p["factor"])),
        ("Enhance the contrast of this image.", "Increase the contrast of this {modality} image.",
         "Restore the full tissue contrast of this washed-out image."),
    ),
    *(_window_operator(name) for name in degrade.CT_WINDOWS),
]  # fmt: skip

#: Every transformation operator by name, in build order.
OPERATORS: dict[str, Operator] = {op.name: op for op in _OPERATORS}
