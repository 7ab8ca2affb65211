"""Instruction templates: one is drawn (seeded) as the instruction, the others are paraphrases.

Placeholders: ``{target}`` a structure name, ``{colour}`` an overlay colour, ``{modality}`` the
source's modality, ``{pairs}`` a multi-class listing ("the grey matter in red and the white
matter in green").
"""

from __future__ import annotations

import numpy as np

__all__ = ["PERCEPTION", "PERCEPTION_MULTI", "ADDITION", "REMOVAL", "render"]

PERCEPTION = (
    "Highlight the {target} in {colour}.",
    "Segment the {target} in this {modality} image and overlay it in {colour}.",
    "Mark the {target} with a {colour} overlay.",
    "Colour the region of the {target} {colour}.",
    "Show where the {target} is by tinting it {colour}.",
)
PERCEPTION_MULTI = (
    "Highlight {pairs}.",
    "Segment {pairs} in this {modality} image.",
    "Overlay {pairs}.",
    "Mark each structure with its colour: {pairs}.",
)
REMOVAL = (
    "Remove the {target}.",
    "Remove the {target} from this {modality} image and fill the area with healthy tissue.",
    "Erase the {target}, leaving normal-looking surrounding tissue.",
    "Make this {modality} image look as if there were no {target}.",
)
ADDITION = (
    "Add a {target}.",
    "Add a {target} to this {modality} image in the marked region.",
    "Insert a {target} into the healthy tissue.",
    "Make this {modality} image show a {target}.",
)


def render(
    templates: tuple[str, ...], rng: np.random.Generator, **fields: str
) -> tuple[str, tuple[str, ...], int]:
    """``(instruction, paraphrases, template index)``: one template drawn with ``rng``, the
    others rendered with the same fields as its paraphrases."""
    texts = [t.format(**fields) for t in templates]
    chosen = int(rng.integers(len(texts)))
    return texts[chosen], tuple(t for i, t in enumerate(texts) if i != chosen), chosen


def pairs_text(pairs: list[tuple[str, str]]) -> str:
    """``"the grey matter in red and the white matter in green"``."""
    parts = [f"the {name} in {colour}" for name, colour in pairs]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
