"""Perception tasks: highlight structures or lesions in a pure colour at 60% opacity.

The input is a rendered scene; the target is ``blend_overlay(input, masks, colours, alpha=0.6)``
(MieDB-100k convention: ``B = 0.4 A + 0.6 O`` inside each mask, every other pixel unchanged); the
mask is the union of the highlighted labels, exact by construction.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from medibench.metrics import blend_overlay
from medibench.synth.scenes import Rendered, SceneError, render
from medibench.synth.tasks import _draws as draws
from medibench.synth.tasks._base import OverlayColour, TaskContext, TaskItem, register_tasks
from medibench.synth.tasks._common import (
    ALL_MODALITIES,
    GENERIC_HOSTS,
    convention_note,
    described_lesion,
    human,
    lesion_hosts_here,
    lesion_noun,
    lesion_words,
    modality_text,
    new_scene,
    plural,
    scene_meta,
    task_item,
)

ALPHA = 0.6
_COLOURS: tuple[OverlayColour, ...] = ("red", "green", "blue")
# Labels too generic to ask for by name.
_GENERIC = ("body", "head", "field_of_view", *GENERIC_HOSTS)
_MIN_AREA = 0.004
# Modalities with nameable structures: one, two or three of them; lesions in a nameable organ.
_NAMED = tuple(m for m in ALL_MODALITIES if m not in ("dermoscopy", "xray-real", "fundus-real"))
_TWO = tuple(m for m in _NAMED if m != "ct-real")
_THREE = tuple(m for m in _TWO if m != "endoscopy")
_ORGAN_HOSTS = tuple(m for m in _THREE if m != "xray-real")


def highlight_structure(ctx: TaskContext) -> TaskItem:
    scene, rendered = new_scene(ctx)
    (name,) = _pick_structures(ctx, rendered, 1)
    (colour,) = _colours(ctx, 1)
    s = human(name)
    return _overlay(
        ctx, rendered, [rendered.labels[name]], [colour],
        [f"Highlight the {s} in {colour}.", f"Segment the {s} and show it as a {colour} overlay.",
         f"Colour the {s} {colour}.", f"Mark the {s} in {colour} on this {{phrase}}."],
        f"the {s}{_side_note(name, ctx.modality)}", {"structures": [name]}, scene,
    )  # fmt: skip


def highlight_lesion(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    lesion = draws.new_lesion(ctx, scene, plain)
    rendered = render(scene.with_lesions([lesion]))
    (colour,) = _colours(ctx, 1)
    noun, what, _ = described_lesion(lesion, rendered, scene)
    return _overlay(
        ctx, rendered, [rendered.labels["lesion:0"]], [colour],
        [f"Highlight the {noun} in {colour}.", f"Outline the {noun} with a {colour} overlay.",
         f"Segment the {lesion_words(lesion, ctx.modality)} and colour it {colour}.",
         f"Mark the abnormality on this {{phrase}} in {colour}."],
        what, {}, scene.with_lesions([lesion]),
    )  # fmt: skip


def highlight_all(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    lesions = draws.new_lesions(ctx, scene, plain, draws.count(ctx, ctx.difficulty.n_lesions))
    rendered = render(scene.with_lesions(lesions))
    (colour,) = _colours(ctx, 1)
    nouns = {lesion_noun(lesion, ctx.modality) for lesion in lesions}
    one = nouns.pop() if len(nouns) == 1 else "lesion"
    noun = plural(one)
    mask = np.logical_or.reduce([rendered.labels[f"lesion:{i}"] for i in range(len(lesions))])
    return _overlay(
        ctx, rendered, [mask], [colour],
        [f"Highlight the {noun} in {colour}.", f"Mark all {len(lesions)} {noun} in {colour}.",
         f"Segment every {one} on this {{phrase}} and overlay them in {colour}.",
         f"Colour each of the {noun} {colour}."],
        f"all {len(lesions)} {noun} (none may be missed)",
        {}, scene.with_lesions(lesions),
    )  # fmt: skip


def highlight_described(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    lesions, place = draws.lesions_at_distinct_places(ctx, scene, plain)
    rendered = render(scene.with_lesions(lesions))
    (colour,) = _colours(ctx, 1)
    noun = lesion_noun(lesions[0], ctx.modality)
    return _overlay(
        ctx, rendered, [rendered.labels["lesion:0"]], [colour],
        [f"Highlight the {noun} in {place.phrase} in {colour}.",
         f"Only the {noun} in {place.phrase} should be overlaid in {colour}.",
         f"Segment the {noun} located in {place.phrase}; colour it {colour} and leave the "
         "others alone.",
         f"Mark the {noun} of {place.phrase} in {colour}."],
        f"the {noun} in {place.phrase}{convention_note(place)} only, not the "
        f"{len(lesions) - 1} other lesion(s)",
        {"place": place.phrase}, scene.with_lesions(lesions),
    )  # fmt: skip


def highlight_largest(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    big = draws.new_lesion(ctx, scene, plain)
    n = max(1, draws.count(ctx, ctx.difficulty.n_distractors))
    lesions = [big]
    for _ in range(n):  # at most 60% of the big one's shorter semi-axis: clearly smaller
        small = max(1.5, min(big.radii) * float(ctx.rng.uniform(0.45, 0.6)))
        lesions.append(draws.new_lesion(ctx, scene, plain, avoid=tuple(lesions), radius=small))
    rendered = render(scene.with_lesions(lesions))
    (colour,) = _colours(ctx, 1)
    noun = lesion_noun(big, ctx.modality)
    return _overlay(
        ctx, rendered, [rendered.labels["lesion:0"]], [colour],
        [f"Highlight the largest {noun} in {colour}.",
         f"Overlay the biggest {noun} in {colour}, not the smaller ones.",
         f"Segment the {noun} with the greatest diameter and colour it {colour}.",
         f"Mark the dominant {noun} in {colour}."],
        f"the largest {noun} (about {2 * big.radii[0]:.0f} px across; the {n} others are at "
        f"most {2 * max(max(x.radii) for x in lesions[1:]):.0f} px)",
        {}, scene.with_lesions(lesions),
    )  # fmt: skip


def highlight_lesion_and_host(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    organs = [h for h in lesion_hosts_here(ctx.modality, plain) if h not in GENERIC_HOSTS]
    if not organs:
        raise SceneError("this scene has no lesion host with an organ name; drawing again")
    lesion = draws.new_lesion(ctx, scene, plain, hosts=organs)
    rendered = render(scene.with_lesions([lesion]))
    c_host, c_lesion = _colours(ctx, 2)
    organ = human(lesion.host)
    noun = lesion_noun(lesion, ctx.modality)
    masks = [rendered.labels[lesion.host], rendered.labels["lesion:0"]]
    return _overlay(
        ctx, rendered, masks, [c_host, c_lesion],
        [f"Highlight the {organ} in {c_host} and the {noun} in {c_lesion}.",
         f"Colour the {organ} {c_host} and the {noun} inside it {c_lesion}.",
         f"Segment the {organ} ({c_host}) and its {noun} ({c_lesion}).",
         f"Overlay the {noun} in {c_lesion} on top of the {organ} in {c_host}."],
        f"the {organ} in {c_host} and the {noun} in {c_lesion} (the {noun} colour wins where "
        "they overlap)", {"structures": [lesion.host]}, scene.with_lesions([lesion]),
    )  # fmt: skip


# --- helpers ---------------------------------------------------------------------------------


def _multi(ctx: TaskContext, n: int) -> TaskItem:
    scene, rendered = new_scene(ctx)
    names = _pick_structures(ctx, rendered, n)
    colours = _colours(ctx, n)
    words = [human(s) for s in names]
    pairs = " and ".join(f"the {w} in {c}" for w, c in zip(words, colours, strict=True))
    listed = ", ".join(words[:-1]) + f" and {words[-1]}"
    cols = ", ".join(colours[:-1]) + f" and {colours[-1]}"
    return _overlay(
        ctx, rendered, [rendered.labels[s] for s in names], list(colours),
        [f"Highlight {pairs}.", f"Segment the {listed} in {cols} respectively.",
         f"Colour {pairs.replace(' in ', ' ')}.",
         f"Make a multi-class overlay of this {{phrase}}: {pairs}."],
        pairs, {"structures": list(names)}, scene,
    )  # fmt: skip


def _overlay(ctx, rendered: Rendered, masks, colours, texts, what, meta, scene) -> TaskItem:
    _, phrase = modality_text(ctx.modality)
    image = rendered.image
    masks = [np.asarray(m, bool) for m in masks]
    target = blend_overlay(image, masks, list(colours), alpha=ALPHA)
    shades = " and ".join(f"pure {c}" for c in dict.fromkeys(colours))
    description = (
        f"Overlay {what} on this {phrase} in {shades} at {ALPHA:.0%} opacity "
        f"(B = {1 - ALPHA:.1f} A + {ALPHA:.1f} colour); every other pixel stays unchanged."
    )
    metadata = {"alpha": ALPHA, "colours": list(colours), "scene": scene_meta(scene), **meta}
    return task_item(
        ctx, scene, image, target, np.logical_or.reduce(masks), texts, description, metadata,
        overlay_color=tuple(colours),
    )


def _pick_structures(ctx: TaskContext, rendered: Rendered, n: int) -> list[str]:
    size2 = ctx.size * ctx.size
    names = [
        k for k, v in rendered.labels.items()
        if not k.startswith("lesion:") and k not in _GENERIC and v.sum() >= _MIN_AREA * size2
    ]  # fmt: skip
    if len(names) < n:
        raise SceneError(f"this {ctx.modality} scene has {len(names)} nameable structures, "
                         f"{n} needed")  # fmt: skip
    order = ctx.rng.permutation(len(names))[:n]
    return [names[i] for i in order]


def _colours(ctx: TaskContext, n: int) -> list[OverlayColour]:
    return [_COLOURS[i] for i in ctx.rng.permutation(3)[:n]]


def _side_note(structure: str, modality: str) -> str:
    if structure.endswith(("_left", "_right")) and modality_text(modality)[0] in (
        "CT",
        "MRI",
        "X-ray",
    ):
        other = "right" if structure.endswith("_left") else "left"
        return f" (the patient's {human(structure).split()[0]}, shown on the image's {other})"
    return ""


# --- the family, in suite order ----------------------------------------------------------------

register_tasks("perception", [
    ("highlight-structure", _NAMED,
     "overlay one named organ or structure in a pure colour", highlight_structure),
    ("highlight-two-structures", _TWO,
     "overlay two named structures, each in its own colour (multi-class)", partial(_multi, n=2)),
    ("highlight-three-structures", _THREE,
     "overlay three named structures, in red, green and blue (multi-class)",
     partial(_multi, n=3)),
    ("highlight-lesion", ALL_MODALITIES,
     "overlay the single lesion of the image in a pure colour", highlight_lesion),
    ("highlight-all-lesions", ALL_MODALITIES,
     "overlay every lesion of the image (two to four) in one colour", highlight_all),
    ("highlight-described-lesion", ALL_MODALITIES,
     "overlay the one lesion at a described place among several", highlight_described),
    ("highlight-largest-lesion", ALL_MODALITIES,
     "overlay the largest of several lesions", highlight_largest),
    ("highlight-lesion-and-host", _ORGAN_HOSTS,
     "overlay a lesion and the organ that holds it in two colours (multi-class)",
     highlight_lesion_and_host),
])  # fmt: skip
