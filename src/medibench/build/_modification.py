"""Modification triplets: lesion removal by inpainting, and addition by swapping the roles.

For each lesion of a slice (a label named in the source's ``lesions``, its fraction in range):

1. dilate the lesion mask by ``dilation_px`` (2 px more on each retry);
2. inpaint that region with the inpainter (:mod:`medibench.build._inpaint`);
3. restore the background: outside the dilated region the original pixels come back, blended
   over a seam of ``seam_px`` pixels (weight ``1 - d / (seam_px + 1)`` at distance ``d``), so
   nothing beyond the seam changes;
4. ask the verifier (:mod:`medibench.build._verify`), then, when it accepts and the source has
   ``verify:``, the VLM (:mod:`medibench.build._vlm`); a rejection retries with a new seed, up
   to ``max_attempts``. A fill the inpainter refuses (``ContentRefusedError``: a safety
   checker's flag) is an attempt rejected as ``refused: <why>``, not shown to the verifier.

Every attempt is logged (accepted or rejected, the reason, the seed, the retry number). An
accepted fill gives two samples: ``remove-<lesion>`` (input the original, target the fill) and
``add-<lesion>`` (the reverse); the mask is the changed region (region and seam).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
from scipy import ndimage

from medibench.build._errors import BuildError
from medibench.build._items import Slice
from medibench.build._perception import kept_structures, seeded, slug
from medibench.build._records import BuildContext, SliceOutput, Triplet
from medibench.build._source import SourceSpec
from medibench.build._templates import ADDITION, REMOVAL, render
from medibench.build._verify import Verdict, verdict_of
from medibench.models._errors import ContentRefusedError
from medibench.samples import Perspective

__all__ = ["MODIFICATION_DEFAULTS", "modification", "restore_background"]

MODIFICATION_DEFAULTS: dict[str, Any] = {"max_attempts": 3, "dilation_px": 2, "seam_px": 3}


def modification(source: SourceSpec, sl: Slice, ctx: BuildContext) -> SliceOutput:
    """Removal and addition triplets of one slice (see the module docstring)."""
    out = SliceOutput()
    options = {**MODIFICATION_DEFAULTS, **ctx.options}
    lesion_names = set(source.lesions)
    all_lesions = np.zeros(sl.image.shape[:2], bool)
    for name in lesion_names:
        if name in sl.structures:
            all_lesions |= sl.structures[name]
    for name, mask, fraction in kept_structures(source, sl, out, source.lesions):
        accepted = _attempts(source, sl, ctx, options, name, mask, all_lesions, out)
        if accepted is None:
            out.filters["rejected"] += 1
            continue
        target, changed, record = accepted
        meta = {"lesion": name, "fraction": fraction, **record}
        fields = {"target": name, "modality": source.modality}
        _, rng = seeded(source.name, "modification-text", sl.key, name, ctx.seed)
        removal = (f"Remove the {name}: the region is filled with tissue like the healthy "
                   "tissue around it; nothing outside the marked region changes.")  # fmt: skip
        addition = (f"Add the {name} in the marked region, where the tissue is healthy now; "
                    "nothing outside that region changes.")  # fmt: skip
        for templates, task, image, goal, description in (
            (REMOVAL, f"remove-{slug(name)}", sl.image, target, removal),
            (ADDITION, f"add-{slug(name)}", target, sl.image, addition),
        ):
            instruction, paraphrases, template = render(templates, rng, **fields)
            out.triplets.append(Triplet(
                task=task, perspective=Perspective.modification, name=task, input=image,
                target=goal, mask=changed, instruction=instruction, paraphrases=paraphrases,
                description=description,
                metadata={**meta, "template": template},
            ))  # fmt: skip
    return out


def _attempts(
    source: SourceSpec,
    sl: Slice,
    ctx: BuildContext,
    options: dict[str, Any],
    name: str,
    mask: np.ndarray,
    all_lesions: np.ndarray,
    out: SliceOutput,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]] | None:
    inpainter, verifier = ctx.inpainter, ctx.verifier
    region_name = sl.item.region or source.region or "surrounding"
    prompt = f"healthy {region_name} tissue, {source.modality}"
    context = {"lesion": name, "lesions": all_lesions, "modality": source.modality,
               "item": sl.item.id, "slice": sl.key,
               "region": sl.item.region or source.region}  # fmt: skip
    for attempt in range(int(options["max_attempts"])):
        seed, _ = seeded(source.name, "modification", sl.key, name, ctx.seed, attempt)
        dilation = int(options["dilation_px"]) + 2 * attempt
        region = ndimage.binary_dilation(mask, iterations=dilation) if dilation else mask.copy()
        t0 = time.perf_counter()
        try:
            filled = inpainter.inpaint(sl.image, region, prompt=prompt, seed=seed)
        except ContentRefusedError as exc:  # a safety checker's flag: a refusal, not a fill
            filled, verdict = None, Verdict(False, f"refused: {exc}", {})
        if filled is not None:
            _check_output(filled, sl, inpainter)
            composite, changed = restore_background(
                sl.image, filled, region, int(options["seam_px"])
            )
            verdict = verdict_of(verifier(sl.image, composite, region, context), verifier.name)
            if verdict.accepted and ctx.vlm is not None:  # the paid check last
                where = (f"item '{sl.item.id}' slice {sl.key} lesion '{name}' attempt {attempt} "
                         f"(samples {source.name}-modification-{sl.key}-remove-{slug(name)} and "
                         f"-add-{slug(name)})")  # fmt: skip
                asked = ctx.vlm.check(sl.image, composite, region, context, where)
                verdict = replace(asked, statistics=verdict.statistics)
        log = {
            "slice": sl.key, "item": sl.item.id, "lesion": name, "attempt": attempt,
            "retry": attempt > 0, "seed": seed, "dilation_px": dilation,
            "seam_px": int(options["seam_px"]), "inpainter": inpainter.name,
            "verifier": verifier.name, "accepted": verdict.accepted, "reason": verdict.reason,
            "statistics": verdict.statistics, "modality": source.modality,
            "elapsed_s": round(time.perf_counter() - t0, 4),
        }  # fmt: skip
        if verdict.details:
            log["vlm"] = verdict.details
        out.attempts.append(log)
        if verdict.accepted:
            record = {"seed": seed, "attempt": attempt, "attempts": attempt + 1,
                      "dilation_px": dilation, "seam_px": int(options["seam_px"]),
                      "inpainter": _spec(inpainter), "verifier": _spec(verifier),
                      "verdict": verdict.reason, "statistics": verdict.statistics,
                      "prompt": prompt}  # fmt: skip
            if verdict.details:
                record["vlm"] = verdict.details
            return composite, changed, record
    return None


def restore_background(
    original: np.ndarray, filled: np.ndarray, region: np.ndarray, seam_px: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(composite, changed)``: ``filled`` inside ``region``, the original beyond a seam of
    ``seam_px`` pixels, a linear blend across the seam; ``changed`` is region plus seam."""
    if seam_px > 0:
        distance = ndimage.distance_transform_edt(~region)
        weight = np.clip(1.0 - distance / (seam_px + 1), 0.0, 1.0)
    else:
        weight = region.astype(np.float64)
    w = weight[:, :, None]
    blended = w * filled.astype(np.float64) + (1.0 - w) * original.astype(np.float64)
    composite = np.clip(np.rint(blended), 0, 255).astype(np.uint8)
    changed = weight > 0
    composite[~changed] = original[~changed]
    return composite, changed


def _check_output(filled: Any, sl: Slice, inpainter: Any) -> None:
    arr = np.asarray(filled)
    if arr.shape != sl.image.shape or arr.dtype != np.uint8:
        raise BuildError(
            f"item '{sl.item.id}' slice {sl.key}: inpainter {inpainter.name!r} returned "
            f"{arr.dtype} {arr.shape} for a {sl.image.dtype} {sl.image.shape} image; an "
            "inpainter must return an image of the input's size (uint8 RGB)"
        )


def _spec(plugin: Any) -> dict[str, Any]:
    spec = getattr(plugin, "spec", None)
    return spec() if callable(spec) else {"name": getattr(plugin, "name", repr(plugin))}
