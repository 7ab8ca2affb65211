"""Verifiers: accept or reject an inpainted region, with a reason.

``--verifier statistics`` (the default) tests that the inpainted region looks like the healthy
tissue around it: on the luminance, within a ring of ``ring_px`` pixels outside the region and
outside every lesion of the slice,

- intensity: ``|mean(region) - mean(ring)| <= mean_tolerance * std(ring) + 2`` grey levels;
- texture: the standard deviation of the high-frequency part
  (:func:`~medibench.build._inpaint.high_frequency`) inside the region is between
  ``texture_ratio[0]`` and ``texture_ratio[1]`` times the ring's.

``--verifier module:callable`` plugs in anything else (a segmentation model that must no longer
find the lesion, a VLM on a collage): it is called as ``fn(original, edited, mask, context)``
and returns a :class:`Verdict`, ``(accepted, reason)`` or a bool. ``context`` holds the
lesion's name, the masks of all lesions of the slice (``lesions``), the modality and the item.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medibench.build._errors import BuildError
from medibench.build._inpaint import _import, high_frequency, ring

__all__ = ["StatisticsVerifier", "Verdict", "load_verifier", "verdict_of"]


@dataclass(frozen=True)
class Verdict:
    """A verifier's answer: accepted or not, why, the numbers it looked at, and anything else
    to store with it (the VLM verifier: its model, prompt and full answer)."""

    accepted: bool
    reason: str
    statistics: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


class StatisticsVerifier:
    """The default verifier (module docstring)."""

    name = "statistics"

    def __init__(
        self,
        *,
        ring_px: int = 6,
        mean_tolerance: float = 1.0,
        texture_ratio: tuple[float, float] = (0.5, 2.0),
    ) -> None:
        self.ring_px, self.mean_tolerance = int(ring_px), float(mean_tolerance)
        self.texture_ratio = (float(texture_ratio[0]), float(texture_ratio[1]))

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "ring_px": self.ring_px, "mean_tolerance": self.mean_tolerance,
                "texture_ratio": list(self.texture_ratio)}  # fmt: skip

    def __call__(
        self, original: np.ndarray, edited: np.ndarray, mask: np.ndarray, context: dict[str, Any]
    ) -> Verdict:
        lesions = context.get("lesions")
        around = ring(mask, self.ring_px, exclude=lesions)
        if around.sum() < 16:
            return Verdict(False, "no healthy tissue around the region to compare with")
        lum = edited.astype(np.float64).mean(axis=2)
        inside, outside = lum[mask], lum[around]
        hf = high_frequency(lum)
        stats = {
            "mean_region": float(inside.mean()),
            "mean_ring": float(outside.mean()),
            "std_ring": float(outside.std()),
            "texture_region": float(hf[mask].std()),
            "texture_ring": float(hf[around].std()),
        }
        gap = abs(stats["mean_region"] - stats["mean_ring"])
        allowed = self.mean_tolerance * stats["std_ring"] + 2.0
        if gap > allowed:
            return Verdict(
                False,
                f"intensity: region mean {stats['mean_region']:.1f} differs from the surrounding "
                f"tissue's {stats['mean_ring']:.1f} by {gap:.1f} > {allowed:.1f}",
                stats,
            )
        lo, hi = self.texture_ratio
        if stats["texture_ring"] >= 0.5:
            ratio = stats["texture_region"] / stats["texture_ring"]
            stats["texture_ratio"] = ratio
            if not lo <= ratio <= hi:
                return Verdict(
                    False,
                    f"texture: region high-frequency energy is {ratio:.2f} times the "
                    f"surrounding tissue's (allowed {lo:g} to {hi:g})",
                    stats,
                )
        return Verdict(True, "intensity and texture match the surrounding tissue", stats)


def load_verifier(spec: str | None) -> Any:
    """``statistics`` (default) or ``module:callable`` (a verifier, or a factory of one when
    it is a class)."""
    spec = (spec or "statistics").strip()
    if spec == "statistics":
        return StatisticsVerifier()
    if ":" not in spec:
        raise BuildError(f"unknown verifier {spec!r}; use 'statistics' or module:callable")
    target = _import(spec, "verifier")
    made = target() if isinstance(target, type) else target
    if not callable(made):
        raise BuildError(f"verifier {spec!r} is not callable")
    return _Named(made, spec)


class _Named:
    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.fn, self.name = fn, name

    def spec(self) -> dict[str, Any]:
        return {"name": self.name}

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


def verdict_of(answer: Any, name: str) -> Verdict:
    """A verifier's answer as a :class:`Verdict` (a bool, ``(bool, reason)`` or a Verdict)."""
    if isinstance(answer, Verdict):
        return answer
    if isinstance(answer, (bool, np.bool_)):
        return Verdict(bool(answer), "accepted" if answer else "rejected (no reason given)")
    if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], (bool, np.bool_)):
        return Verdict(bool(answer[0]), str(answer[1]))
    raise BuildError(
        f"verifier {name!r} returned {type(answer).__name__}; expected a Verdict, a bool or "
        "(accepted, reason)"
    )
