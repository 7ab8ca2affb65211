"""MedEBench field normalisation: ``Organ`` to region, ``detailed_prompt`` to modality, ``Task``
to perspective, and the rephrasing truncation heuristic (the rules are in
:mod:`medibench.benchmarks.medebench.dataset`, which reads the records).
"""

from __future__ import annotations

import re

from medibench.samples import Perspective

__all__ = [
    "REGIONS",
    "infer_modality",
    "normalize_region",
    "rephrasing_looks_truncated",
    "task_perspective",
]

#: The 13 regions of the paper, in its order.
REGIONS = (
    "Teeth",
    "Eyes",
    "Spine",
    "Skin",
    "Nose",
    "Face",
    "GI Tract",
    "Ears",
    "Hands",
    "Mouth",
    "Torso",
    "Feet",
    "Hair",
)


def normalize_region(organ: str) -> str | None:
    """The canonical region (one of :data:`REGIONS`) for an ``Organ`` string, or ``None``.

    Case, spacing, ``&``/``and`` and singular/plural do not matter; ``"Gastrointestinal Tract"``
    and ``"GI"`` are ``"GI Tract"``; ``"Bones"`` and ``"Spine and Bones"`` are ``"Spine"``.
    """
    key = re.sub(r"[^a-z]+", " ", organ.lower().replace("&", " and ")).strip()
    return _REGION_ALIASES.get(key)


def infer_modality(description: str | None) -> str:
    """The imaging modality named in a ``detailed_prompt``, or ``""`` when none is named.

    The description was generated to state the modality first ("The image modality is a
    panoramic dental X-ray; ..."), so keywords are matched in this order and the first match
    wins: X-ray (x-ray, radiograph), CT, MRI, ultrasound, endoscopy, dermoscopy, fundus, OCT,
    microscopy, illustration (diagram, illustration, drawing), photo (photograph, photography,
    photo). Nothing is guessed from the region.
    """
    if not description:
        return ""
    for modality, pattern in _MODALITY_PATTERNS:
        if pattern.search(description):
            return modality
    return ""


def task_perspective(task: str) -> tuple[Perspective, str]:
    """The editing perspective of a MedEBench ``Task`` and the rule that chose it.

    * ``perception``: the task asks to show, not change (highlight, segment, outline,
      delineate, annotate, label, locate, detect, identify, indicate; not "mark" or "circle",
      which MedEBench tasks use as nouns: "black marks", "dark circles");
    * ``transformation``: a whole-image appearance change (enhance, denoise, deblur, sharpen,
      super-resolution, contrast, brighten, style, colourise, recolour, convert, translate,
      modality);
    * ``modification``: everything else: adding, removing or changing anatomy or lesions (the
      default, and nearly every MedEBench task).

    Perception words are checked first, then transformation words.
    """
    if _PERCEPTION_WORDS.search(task):
        return Perspective.perception, "perception keyword in Task"
    if _TRANSFORMATION_WORDS.search(task):
        return Perspective.transformation, "transformation keyword in Task"
    return Perspective.modification, "default (no perception or transformation keyword)"


def rephrasing_looks_truncated(rephrased: str, prompt: str) -> bool:
    """The truncation heuristic of :mod:`medibench.benchmarks.medebench.dataset` (a function-word
    ending, or too short)."""
    words = re.findall(r"[A-Za-z']+", rephrased)
    if not words:
        return True
    if words[-1].lower() in _FUNCTION_WORDS:
        return True
    n_prompt = len(re.findall(r"[A-Za-z']+", prompt))
    return len(words) == 1 or len(words) < n_prompt / 2


# --- tables ----------------------------------------------------------------------------------


def _aliases() -> dict[str, str]:
    out: dict[str, str] = {}
    for region in REGIONS:
        key = region.lower()
        out[key] = region
        out[key.rstrip("s")] = region  # eyes -> eye, ears -> ear, hands -> hand
    out.update(
        {
            "tooth": "Teeth",
            "dental": "Teeth",
            "foot": "Feet",
            "bone": "Spine",
            "bones": "Spine",
            "spine and bone": "Spine",
            "spine and bones": "Spine",
            "spine bones": "Spine",
            "gi": "GI Tract",
            "gastrointestinal": "GI Tract",
            "gastrointestinal tract": "GI Tract",
            "ear": "Ears",
            "eye": "Eyes",
            "hand": "Hands",
        }
    )
    return out


_REGION_ALIASES = _aliases()

_MODALITY_PATTERNS = tuple(
    (name, re.compile(pattern, re.IGNORECASE if name != "CT" else 0))
    for name, pattern in (
        ("X-ray", r"\bx[- ]?rays?\b|radiograph"),
        ("CT", r"\bCT\b|[Cc]omputed [Tt]omograph"),
        ("MRI", r"\bMRI\b|magnetic resonance"),
        ("ultrasound", r"ultrasound|sonograph"),
        ("endoscopy", r"endoscop|colonoscop|gastroscop"),
        ("dermoscopy", r"dermoscop|dermatoscop"),
        ("fundus", r"\bfundus\b|fundoscop"),
        ("OCT", r"\bOCT\b|optical coherence"),
        ("microscopy", r"microscop|histolog"),
        ("illustration", r"\bdiagram|illustration|\bdrawing"),
        ("photo", r"photograph|\bphoto\b|\bphotos\b"),
    )
)

_PERCEPTION_WORDS = re.compile(
    r"\b(highlight\w*|segment\w*|outlin\w*|delineat\w*|annotat\w*|label\w*|locat(e|ing)|"
    r"detect\w*|identif\w*|indicat\w*)\b",
    re.IGNORECASE,
)
_TRANSFORMATION_WORDS = re.compile(
    r"\b(enhanc\w*|denois\w*|deblur\w*|sharpen\w*|super[- ]?resolution|resolution|contrast|"
    r"brighten\w*|style\w*|stylis\w*|styliz\w*|colou?ri[sz]\w*|recolou?r\w*|convert\w*|"
    r"translat\w*|modality)\b",
    re.IGNORECASE,
)

_FUNCTION_WORDS = frozenset(
    """a an the this that these those some any each every its their his her your our my
    of on in into onto to for from with without at by as about over under between through
    and or but nor so than if while""".split()
)
