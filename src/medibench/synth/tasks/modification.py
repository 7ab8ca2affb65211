"""Modification tasks: remove, add, enlarge, shrink, move or restyle a lesion.

Input and target are renders of the same scene (same anatomy, texture and noise) with two lesion
lists, so the target is the exact counterfactual. The mask is the union of the supports
(``"lesion:<i>"`` labels) of every lesion that differs between the two lists, in either render:
it holds every pixel that differs, and pixels outside it are identical in input and target.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np

from medibench.synth.scenes import Lesion, Scene, SceneError, place_lesion, render
from medibench.synth.tasks import _draws as draws
from medibench.synth.tasks._base import TaskContext, TaskItem, register_tasks
from medibench.synth.tasks._common import (
    ALL_MODALITIES,
    COLOUR_PREFIXES,
    convention_note,
    described_lesion,
    lesion_dict,
    lesion_hosts_here,
    lesion_noun,
    lesion_shade,
    lesion_spec,
    lesion_words,
    locate,
    new_scene,
    plural,
    scene_meta,
    task_item,
)


def remove_lesion(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    lesion = draws.new_lesion(ctx, scene, plain)
    noun, what, organ = described_lesion(lesion, plain, scene)
    return _pair(
        ctx, scene, [lesion], [],
        [f"Remove the {noun}.", f"Remove the {noun} from the {organ}.",
         f"Erase {what} and fill it with normal {organ} tissue.",
         f"Get rid of the {noun}; leave the rest of the {{phrase}} untouched."],
        f"Remove {what}, {_across(lesion)}, {_centred(lesion)}; fill its area with the "
        f"surrounding normal {organ} so no trace remains.",
    )  # fmt: skip


def remove_described(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    lesions, place = draws.lesions_at_distinct_places(ctx, scene, plain)
    n = len(lesions) - 1
    noun = lesion_noun(lesions[0], ctx.modality)
    where = place.phrase
    return _pair(
        ctx, scene, lesions, lesions[1:],
        [f"Remove the {noun} in {where}.", f"Erase only the {noun} in {where}.",
         f"Delete the {noun} located in {where} and keep the other lesions as they are.",
         f"Take out the {noun} of {where}, nothing else."],
        f"Remove the {noun} in {where}{convention_note(place)}; the "
        f"{n} other lesion(s) must stay exactly as they are.",
    )  # fmt: skip


def remove_all(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    lesions = draws.new_lesions(ctx, scene, plain, draws.count(ctx, ctx.difficulty.n_lesions))
    nouns = {lesion_noun(x, ctx.modality) for x in lesions}
    noun = plural(nouns.pop() if len(nouns) == 1 else "lesion")
    return _pair(
        ctx, scene, lesions, [],
        [f"Remove the {noun}.", f"Remove all {len(lesions)} {noun}.",
         f"Erase every one of the {noun} and restore normal tissue.",
         f"Clean this {{phrase}} of all {noun}."],
        f"Remove all {len(lesions)} {noun}; fill each with the surrounding normal tissue.",
    )  # fmt: skip


def add_lesion(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    n_existing = draws.count(ctx, (0, ctx.difficulty.n_distractors[0]))
    existing = draws.new_lesions(ctx, scene, plain, n_existing)
    lesion = draws.new_lesion(ctx, scene, plain, avoid=tuple(existing))
    noun, what, organ = described_lesion(lesion, plain, scene)
    place = locate(lesion.center, lesion.host, plain, scene)
    article = "an" if noun[0] in "aeiou" else "a"
    shade = lesion_shade(lesion, ctx.modality)
    size = _across(lesion)
    return _pair(
        ctx, scene, existing, [*existing, lesion],
        [f"Add {article} {noun} in {place.phrase}.",
         f"Insert {article} {shade} {noun} into {place.phrase}.",
         f"Draw a new {noun}, {size}, in {place.phrase}.",
         f"Place {article} small {shade} {noun} in the {organ} ({place.phrase})."],
        f"Add {article} {lesion_words(lesion, ctx.modality)}, {size}, in {place.phrase}"
        f"{convention_note(place)}, {_centred(lesion)}; the rest of the image stays unchanged.",
    )  # fmt: skip


def move(ctx: TaskContext) -> TaskItem:
    scene, plain = new_scene(ctx)
    lesion = draws.new_lesion(ctx, scene, plain)
    kind = lesion_spec(ctx.modality, lesion.host)[0]
    hosts = [h for h in lesion_hosts_here(ctx.modality, plain)
             if lesion_spec(ctx.modality, h)[0] == kind]  # fmt: skip
    a = locate(lesion.center, lesion.host, plain, scene)
    for _ in range(6):  # a destination described differently from the origin
        host = hosts[int(ctx.rng.integers(len(hosts)))]
        spot = place_lesion(scene, plain, host=host, radius=max(lesion.radii),
                            contrast=lesion.contrast, kind=lesion.kind, rng=ctx.rng,
                            avoid=(lesion,))  # fmt: skip
        moved = dataclasses.replace(lesion, center=spot.center, host=host)
        b = locate(moved.center, moved.host, plain, scene)
        if a.key != b.key:
            break
    else:
        raise SceneError("no destination described differently from the origin; drawing again")
    noun = lesion_noun(lesion, ctx.modality)
    return _pair(
        ctx, scene, [lesion], [moved],
        [f"Move the {noun} to {b.phrase}.", f"Move the {noun} from {a.phrase} to {b.phrase}.",
         f"Relocate the {noun} into {b.phrase}, keeping its size and shape.",
         f"Shift the {noun} so that it sits in {b.phrase} instead of {a.phrase}."],
        f"Move the {noun} from {a.phrase}{convention_note(a)} to {b.phrase}"
        f"{convention_note(b)}, {_centred(moved)}, same size, shape and contrast; its old place "
        "becomes normal tissue.",
    )  # fmt: skip


# --- helpers ---------------------------------------------------------------------------------


def _resize(ctx: TaskContext, factors: tuple[float, float]) -> TaskItem:
    """Grow or shrink the lesion by a factor drawn from ``factors`` (the item's first draw)."""
    factor = float(ctx.rng.uniform(*factors))
    scene, plain = new_scene(ctx)
    # Place the larger of the two versions, so both fit in the host.
    lesion = draws.new_lesion(ctx, scene, plain, radius_scale=max(factor, 1.0))
    if factor > 1:
        before = dataclasses.replace(
            lesion, radii=(lesion.radii[0] / factor, lesion.radii[1] / factor)
        )
        after = lesion
        verb, words = "Enlarge", ("Make", "larger", "Grow", "bigger")
    else:
        before = lesion
        after = dataclasses.replace(
            lesion, radii=(lesion.radii[0] * factor, lesion.radii[1] * factor)
        )
        verb, words = "Shrink", ("Make", "smaller", "Shrink", "smaller")
    noun, what, organ = described_lesion(before, plain, scene)
    pct = f"{factor:.0%}"
    return _pair(
        ctx, scene, [before], [after],
        [f"{verb} the {noun} to {pct} of its diameter.",
         f"{words[0]} the {noun} {words[1]}: scale its diameter by {factor:.2f}.",
         f"{words[2]} the {noun} in the {organ} about its centre, to {pct} of its diameter.",
         f"Change the size of the {noun} so it is {factor:.2f} times as wide."],
        f"{verb} {what} about its centre (row {before.center[0]:.0f}, column "
        f"{before.center[1]:.0f}) from about {2 * before.radii[0]:.0f} px to "
        f"{2 * after.radii[0]:.0f} px across (factor {factor:.2f}), same shape and contrast.",
        extra={"factor": factor},
    )  # fmt: skip


def _restyle(ctx: TaskContext, factors: tuple[float, float]) -> TaskItem:
    """Scale the lesion's contrast by a factor drawn from ``factors`` (the item's first draw)."""
    factor = float(ctx.rng.uniform(*factors))
    scene, plain = new_scene(ctx)
    # A lung nodule fainter than soft tissue falls below the CT display window: keep it visible.
    hosts = [h for h in lesion_hosts_here(ctx.modality, plain)
             if not (ctx.modality.startswith("ct") and h.startswith("lung"))]  # fmt: skip
    if not hosts:
        raise SceneError("no host whose lesion stays visible when restyled; drawing again")
    drawn = draws.new_lesion(ctx, scene, plain, hosts=hosts)
    # The stronger version has the drawn contrast (colour opacities stay <= 1).
    lesion = dataclasses.replace(drawn, contrast=drawn.contrast / max(factor, 1.0))
    after = dataclasses.replace(lesion, contrast=lesion.contrast * factor)
    noun, what, organ = described_lesion(lesion, plain, scene)
    brighter = (lesion.contrast > 0) == (factor > 1)
    if ctx.modality.split("-")[0] in COLOUR_PREFIXES:
        look = "more pronounced" if factor > 1 else "paler"
    else:
        look = "brighter" if brighter else "darker"
    change = "more conspicuous" if factor > 1 else "fainter"
    return _pair(
        ctx, scene, [lesion], [after],
        [f"Make the {noun} {look}.", f"Make the {noun} {change}.",
         f"Change the appearance of the {noun}: {look}, with {factor:.0%} of its present "
         "contrast.",
         f"Render the {noun} in the {organ} {look} without changing its size or shape."],
        f"Make {what} {look} ({change}): its contrast against the {organ} becomes {factor:.2f} "
        "times the present one; size, shape and position stay.",
        extra={"factor": factor},
    )  # fmt: skip


def _across(lesion: Lesion) -> str:
    return f"about {2 * lesion.radii[0]:.0f} px across"


def _centred(lesion: Lesion) -> str:
    return f"centred near row {lesion.center[0]:.0f}, column {lesion.center[1]:.0f}"


def _pair(ctx, scene: Scene, before, after, texts, description, *, extra=None) -> TaskItem:
    """Render the two lesion lists; the mask is the support of every lesion that differs."""
    a = render(scene.with_lesions(before))
    b = render(scene.with_lesions(after))
    gone = [i for i, x in enumerate(before) if x not in after]
    new = [i for i, x in enumerate(after) if x not in before]
    mask = np.zeros((ctx.size, ctx.size), bool)
    for i in gone:
        mask |= a.labels[f"lesion:{i}"]
    for i in new:
        mask |= b.labels[f"lesion:{i}"]
    meta = {
        "scene": scene_meta(scene.with_lesions(before)),
        "target_lesions": [lesion_dict(x) for x in after],
        **(extra or {}),
    }
    return task_item(ctx, scene, a.image, b.image, mask, texts, description, meta)


# --- the family, in suite order ----------------------------------------------------------------

register_tasks("modification", [
    ("remove-lesion", ALL_MODALITIES,
     "remove the single lesion; the target is the same scene without it", remove_lesion),
    ("remove-described-lesion", ALL_MODALITIES,
     "remove the lesion at a described place and keep the others", remove_described),
    ("remove-all-lesions", ALL_MODALITIES,
     "remove every lesion (two to four) of the image", remove_all),
    ("add-lesion", ALL_MODALITIES,
     "add a lesion at a described place (the input has none there)", add_lesion),
    ("enlarge-lesion", ALL_MODALITIES,
     "grow the lesion about its centre by a stated factor", partial(_resize, factors=(1.5, 2.0))),
    ("shrink-lesion", ALL_MODALITIES,
     "shrink the lesion about its centre by a stated factor", partial(_resize, factors=(0.4, 0.6))),
    ("move-lesion", ALL_MODALITIES,
     "move the lesion to a described place, unchanged in shape", move),
    ("intensify-lesion", ALL_MODALITIES,
     "make the lesion more conspicuous (brighter if bright, darker if dark)",
     partial(_restyle, factors=(1.6, 2.0))),
    ("fade-lesion", ALL_MODALITIES,
     "make the lesion fainter (closer to the surrounding tissue) but still visible",
     partial(_restyle, factors=(0.4, 0.55))),
])  # fmt: skip
