"""Perception and transformation triplets from one slice.

Perception (MieDB-100k): per structure, the target is
``blend_overlay(input, mask, colour, alpha=0.6)`` in a seeded choice of red, green or blue, the
mask stored beside it; a slice with two or more kept structures also gives one multi-class
sample (up to three structures, each its own colour). Filters, each counted: ``too_small`` and
``too_large`` (label fraction outside ``[min_fraction, max_fraction]``), ``duplicate`` (the same
input and mask as an earlier sample of the item), ``overlay_ill_conditioned`` (more than
``max_ill_conditioned`` of the mask's pixels already have the overlay colour,
:func:`~medibench.metrics.overlay_ill_conditioned`).

Transformation: every applicable operator of :data:`~medibench.build._operators.OPERATORS`,
its parameters drawn from a generator seeded by the sample's identity; parameters, seed and
the function called are stored in the sample's metadata.
"""

from __future__ import annotations

import hashlib

import numpy as np

from medibench.build._errors import BuildError
from medibench.build._items import Slice
from medibench.build._operators import OPERATORS, applicable
from medibench.build._records import BuildContext, SliceOutput, Triplet
from medibench.build._source import SourceSpec
from medibench.build._templates import PERCEPTION, PERCEPTION_MULTI, pairs_text, render
from medibench.metrics import blend_overlay, overlay_ill_conditioned
from medibench.samples import Perspective
from medibench.synth import item_seed

__all__ = ["ALPHA", "COLOURS", "check_operators", "perception", "transformation", "slug"]

ALPHA = 0.6
COLOURS = ("red", "green", "blue")
#: Largest share of a mask's pixels that may already have the overlay colour.
MAX_ILL_CONDITIONED = 0.01


def slug(name: str) -> str:
    """A structure name as a sample-id part: ``"grey matter"`` -> ``"grey-matter"``."""
    return "-".join("".join(c if c.isalnum() else " " for c in name.lower()).split())


def seeded(*parts: object) -> tuple[int, np.random.Generator]:
    """The seed of an identity (:func:`medibench.synth.item_seed`) and its generator."""
    seed = item_seed(*parts)
    return seed, np.random.Generator(np.random.PCG64(seed))


def kept_structures(
    source: SourceSpec, sl: Slice, out: SliceOutput, names: tuple[str, ...] | None = None
) -> list[tuple[str, np.ndarray, float]]:
    """The slice's structures (of ``names``, default all) whose label fraction is in range;
    the others counted."""
    kept = []
    for name in names if names is not None else source.structure_names():
        mask = sl.structures.get(name)
        if mask is None:
            continue
        fraction = float(mask.mean())
        if fraction < source.min_fraction:
            out.filters["too_small"] += 1
        elif fraction > source.max_fraction:
            out.filters["too_large"] += 1
        else:
            kept.append((name, mask, fraction))
    return kept


def perception(source: SourceSpec, sl: Slice, ctx: BuildContext) -> SliceOutput:
    """Overlay triplets of one slice (see the module docstring)."""
    out = SliceOutput()
    singles: list[tuple[str, np.ndarray, float]] = []
    image_digest = hashlib.sha1(sl.image.tobytes()).hexdigest()
    for name, mask, fraction in kept_structures(source, sl, out):
        if _duplicate(ctx, image_digest, mask, f"perception|{name}"):
            out.filters["duplicate"] += 1
            continue
        seed, rng = seeded(source.name, "perception", sl.key, name, ctx.seed)
        colour = COLOURS[int(rng.integers(3))]
        # only the mask's pixels matter: test them as a (1, N, 3) image
        ill = float(overlay_ill_conditioned(sl.image[mask][None], colour).mean())
        if ill > MAX_ILL_CONDITIONED:
            out.filters["overlay_ill_conditioned"] += 1
            continue
        singles.append((name, mask, fraction))
        target = _blend(sl.image, [mask], [colour])
        fields = {"target": name, "colour": colour, "modality": source.modality}
        instruction, paraphrases, template = render(PERCEPTION, rng, **fields)
        out.triplets.append(Triplet(
            task=f"segment-{slug(name)}", perspective=Perspective.perception, name=slug(name),
            input=sl.image, target=target, mask=mask, instruction=instruction,
            paraphrases=paraphrases, overlay_color=(colour,),
            description=f"Blend pure {colour} at alpha {ALPHA} over the {name} "
            "(0.4 x image + 0.6 x colour inside it); every other pixel stays as it is.",
            metadata={"structure": name, "fraction": fraction, "alpha": ALPHA, "seed": seed,
                      "template": template, "ill_conditioned_fraction": ill},
        ))  # fmt: skip
    if len(singles) >= 2:
        out.triplets.append(_multiclass(source, sl, ctx, singles[:3]))
    return out


def _multiclass(
    source: SourceSpec,
    sl: Slice,
    ctx: BuildContext,
    chosen: list[tuple[str, np.ndarray, float]],
) -> Triplet:
    seed, rng = seeded(source.name, "perception", sl.key, "multiclass", ctx.seed)
    colours = [COLOURS[i] for i in rng.permutation(3)[: len(chosen)]]
    names = [c[0] for c in chosen]
    masks = [c[1] for c in chosen]
    target = _blend(sl.image, masks, colours)
    union = np.logical_or.reduce(masks)
    fields = {"pairs": pairs_text(list(zip(names, colours, strict=True))),
              "modality": source.modality}  # fmt: skip
    instruction, paraphrases, template = render(PERCEPTION_MULTI, rng, **fields)
    return Triplet(
        task="segment-multiclass", perspective=Perspective.perception, name="multiclass",
        input=sl.image, target=target, mask=union, instruction=instruction,
        paraphrases=paraphrases, overlay_color=tuple(colours),
        description=f"Blend each structure's pure colour at alpha {ALPHA} over it: "
        f"{fields['pairs']}; every other pixel stays as it is.",
        metadata={"structures": names, "colours": colours, "alpha": ALPHA, "seed": seed,
                  "template": template, "fraction": float(union.mean())},
    )  # fmt: skip


def check_operators(source: SourceSpec) -> None:
    """Refuse operator names the source lists that do not exist."""
    unknown = [n for n in source.operators or () if n not in OPERATORS]
    if unknown:
        raise BuildError(
            f"{source.path or 'source'}: unknown operator(s) {unknown}; known operators: "
            f"{', '.join(OPERATORS)}"
        )


def transformation(source: SourceSpec, sl: Slice, ctx: BuildContext) -> SliceOutput:
    """Degradation triplets of one slice: one per applicable operator."""
    out = SliceOutput()
    for op in applicable(source.modality, sl, source.window, source.operators):
        seed, rng = seeded(source.name, "transformation", sl.key, op.name, ctx.seed)
        params = op.draw(rng, sl)
        image, target = op.apply(sl, params, rng, source.window)
        if np.array_equal(image, target):
            out.filters["unchanged"] += 1
            continue
        fields = {"modality": source.modality}
        instruction, paraphrases, template = render(op.templates, rng, **fields)
        out.triplets.append(Triplet(
            task=op.name, perspective=Perspective.transformation, name=op.name,
            input=image, target=target, mask=None, instruction=instruction,
            paraphrases=paraphrases,
            description=_describe(op.function, params),
            metadata={"operator": op.function, "params": params, "seed": seed,
                      "window": list(source.window) if op.needs_window and source.window
                      else None, "template": template},
        ))  # fmt: skip
    return out


def _describe(function: str, params: dict) -> str:
    if "input_window" in params:
        return (f"Re-display the CT in the {params['window']} window; the input shows it in the "
                f"{params['input_window']} window.")  # fmt: skip
    call = ", ".join(f"{k}={_short(v)}" for k, v in params.items())
    return f"Undo {function.rsplit('.', 1)[-1]}({call}) applied to the clean image: restore it."


def _short(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _blend(image: np.ndarray, masks: list[np.ndarray], colours: list[str]) -> np.ndarray:
    """``blend_overlay(image, masks, colours, alpha=ALPHA)``, computed on the masks' bounding box
    only (the blend is per pixel and leaves pixels outside every mask unchanged)."""
    union = np.logical_or.reduce(masks)
    rows, cols = np.flatnonzero(union.any(axis=1)), np.flatnonzero(union.any(axis=0))
    box = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
    out = image.copy()
    out[box] = blend_overlay(image[box], [m[box] for m in masks], colours, alpha=ALPHA)
    return out


def _duplicate(ctx: BuildContext, image_digest: str, mask: np.ndarray, what: str) -> bool:
    digest = hashlib.sha1(f"{what}|{image_digest}".encode())
    digest.update(np.packbits(mask).tobytes())
    key = digest.hexdigest()
    if key in ctx.seen:
        return True
    ctx.seen.add(key)
    return False
