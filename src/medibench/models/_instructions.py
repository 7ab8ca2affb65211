"""Read an editing instruction into an :class:`EditIntent`: what to do, to what, in which colours.

This is a small rule-based parser for rule-based models (the ``classical`` baseline). Matching is
case-insensitive; surrounding quotes, trailing punctuation and polite openers ("please", "can you",
"could you", "kindly") are ignored. The first verb decides the action:

Perception (``action="overlay"``)
    ``<verb> the <structure> [in <colour>]`` with verb one of highlight, segment, mark, outline,
    colour / color, overlay, label, delineate; colour one of red, green, blue, written
    "in red", "with red", "using a red overlay" or, after the structure, just "red"
    ("Colour the liver red"). Several classes: "the white matter in red and the grey matter in
    green", or a list "the white matter, grey matter and CSF in red, green and blue". Without a
    colour, ``colors`` is empty (the model picks its default).
Modification (``action="remove"``)
    ``<remove | erase | delete | eliminate | get rid of | take out> the <anomaly>`` where the
    object names one of :data:`ANOMALY_WORDS` (lesion, tumor / tumour, nodule, polyp, mass, spot,
    artifact / artefact, cyst, abnormality, with plurals).
Transformation
    ``denoise``: "denoise ...", "remove / reduce / suppress / eliminate the noise", "make ... less
    noisy"; ``deblur``: "deblur", "unblur", "sharpen", "remove / reduce / correct the blur",
    "make ... sharper"; ``enhance_contrast``: "enhance / improve / increase / boost the contrast",
    "apply CLAHE", "apply histogram equalization"; ``smooth``: "smooth ...", "apply a bilateral
    filter", "make ... smoother". "apply / use / perform <denoising | sharpening | deblurring |
    smoothing | bilateral filtering | contrast enhancement>" also work.

Anything else raises :class:`UnsupportedInstructionError`, whose message lists the above.

Example:
    >>> intent = parse_instruction("Highlight the white matter in red and the grey matter in green")
    >>> intent.action, intent.structures, intent.colors
    ('overlay', ('white matter', 'grey matter'), ('red', 'green'))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from medibench.models._base import UnsupportedInstructionError
from medibench.samples import OVERLAY_COLORS, Perspective

__all__ = [
    "ANOMALY_WORDS",
    "SUPPORTED_INSTRUCTIONS",
    "Action",
    "EditIntent",
    "parse_instruction",
]

Action = Literal["overlay", "remove", "denoise", "deblur", "enhance_contrast", "smooth"]

#: Words naming something abnormal that a removal (or a lesion overlay) can target.
ANOMALY_WORDS: tuple[str, ...] = (
    "lesion", "tumor", "tumour", "nodule", "polyp", "mass", "spot",
    "artifact", "artefact", "cyst", "abnormality",
)  # fmt: skip

#: What the parser understands, one line per family; quoted in every unsupported-instruction error.
SUPPORTED_INSTRUCTIONS: tuple[str, ...] = (
    "perception: '<highlight|segment|mark|outline|colour|overlay|label|delineate> the <structure>"
    " in <red|green|blue>', several classes as 'the A in red and the B in green' or"
    " 'the A, B and C in red, green and blue'",
    "modification: '<remove|erase|delete|eliminate|get rid of|take out> the <"
    + "|".join(ANOMALY_WORDS)
    + ">'",
    "transformation: 'denoise' / 'remove|reduce the noise'; 'deblur' / 'unblur' / 'sharpen';"
    " 'enhance|improve|increase the contrast' / 'apply CLAHE'; 'smooth' / 'apply a bilateral"
    " filter'",
)

_PERSPECTIVE: dict[str, Perspective] = {
    "overlay": Perspective.perception,
    "remove": Perspective.modification,
    "denoise": Perspective.transformation,
    "deblur": Perspective.transformation,
    "enhance_contrast": Perspective.transformation,
    "smooth": Perspective.transformation,
}


@dataclass(frozen=True)
class EditIntent:
    """What an instruction asks for.

    Attributes:
        text: the instruction as given.
        action: one of ``overlay``, ``remove``, ``denoise``, ``deblur``, ``enhance_contrast``,
            ``smooth``.
        perspective: perception (overlay), modification (remove) or transformation (the rest).
        target: the object phrase, normalised (lower case, articles dropped), ``""`` when the
            action has none; for several classes, the structures joined with " and ".
        structures: perception only: one structure phrase per class, paired with ``colors``.
        colors: perception only: overlay colour names ("red", "green", "blue"), one per
            structure, or empty when the instruction names none.
    """

    text: str
    action: Action
    perspective: Perspective
    target: str = ""
    structures: tuple[str, ...] = ()
    colors: tuple[str, ...] = ()


def parse_instruction(text: str) -> EditIntent:
    """Parse ``text`` into an :class:`EditIntent` (vocabulary in the module docstring).

    Raises:
        UnsupportedInstructionError: the instruction is not in the vocabulary; the message quotes
            it and lists the supported phrasings.
    """
    t = _normalise(text)
    if not t:
        raise UnsupportedInstructionError(text, SUPPORTED_INSTRUCTIONS, reason="it is empty")
    transformation = _transformation(t)
    if transformation is not None:
        return _intent(text, transformation)
    m = _PERCEPTION_VERB.match(t)
    if m:
        structures, colors = _structures_and_colors(m.group(2), text)
        return _intent(
            text, "overlay", target=" and ".join(structures), structures=structures, colors=colors
        )
    m = _REMOVAL_VERB.match(t)
    if m:
        obj = _clean_phrase(m.group(2))
        if not _ANOMALY.search(obj):
            raise UnsupportedInstructionError(
                text,
                SUPPORTED_INSTRUCTIONS,
                reason=f"cannot remove {obj!r}: removal targets are {', '.join(ANOMALY_WORDS)}",
            )
        return _intent(text, "remove", target=obj)
    raise UnsupportedInstructionError(text, SUPPORTED_INSTRUCTIONS)


# ---------------------------------------------------------------------------------------------
# helpers

_POLITE = re.compile(r"^(?:please|kindly|can you|could you|would you|now|then)\b[\s,]*")
_PERCEPTION_VERB = re.compile(
    r"^(highlight|segment|mark|outline|colou?r|overlay|label|delineate)\b\s*(.*)$"
)
_REMOVAL_VERB = re.compile(r"^(remove|erase|delete|eliminate|get rid of|take out)\b\s*(.*)$")
_ANOMALY = re.compile(r"\b(?:" + "|".join(ANOMALY_WORDS) + r")(?:s|es)?\b")

# (pattern on the whole normalised instruction, action); the first match wins.
_TRANSFORMATIONS: tuple[tuple[re.Pattern[str], Action], ...] = (
    (re.compile(r"^de-?nois"), "denoise"),
    (re.compile(r"^(?:remove|reduce|suppress|eliminate|get rid of|lower|clean up)\b.*"
                r"\bnois(?:e|iness)\b"),
     "denoise"),
    (re.compile(r"^(?:de-?blur|un-?blur|sharpen)"), "deblur"),
    (re.compile(r"^(?:remove|reduce|correct|eliminate|get rid of|fix|undo)\b.*"
                r"\bblur(?:ring|riness)?\b"), "deblur"),
    (re.compile(r"^(?:enhance|improve|increase|boost|raise|stretch)\b.*\bcontrast\b"),
     "enhance_contrast"),
    (re.compile(r"^smooth"), "smooth"),
    (re.compile(r"^make\b.*\b(?:less noisy|noise-? ?free|cleaner)\b"), "denoise"),
    (re.compile(r"^make\b.*\b(?:sharper|crisper|less blurr?y)\b"), "deblur"),
    (re.compile(r"^make\b.*\bsmoother\b"), "smooth"),
    (re.compile(r"^make\b.*\b(?:more|higher|better) contrast"), "enhance_contrast"),
    (re.compile(r"^(?:apply|use|perform|run)\b.*\b(?:denois|noise (?:reduction|removal))"),
     "denoise"),
    (re.compile(r"^(?:apply|use|perform|run)\b.*\b(?:sharpen|deblur|unsharp)"), "deblur"),
    (re.compile(r"^(?:apply|use|perform|run)\b.*\b(?:clahe|contrast enhancement|"
                r"histogram equali[sz]ation)"), "enhance_contrast"),
    (re.compile(r"^(?:apply|use|perform|run)\b.*\b(?:bilateral|smoothing)"), "smooth"),
)  # fmt: skip

_COLOR_WORD = re.compile(r"\b(" + "|".join(OVERLAY_COLORS) + r")\b")
_COLOR_PREFIX = re.compile(r"\b(?:in|with|using)\s+(?:(?:a|an|the)\s+)?$")
_COLOR_SUFFIX = re.compile(r"^\s+(?:colou?r|overlay|mask|highlight|contour|outline|label)\b")
# A bare colour word ("Colour the liver red") counts only when followed by one of these; this keeps
# "red blood cells" a structure.
_COLOR_FOLLOW = re.compile(r"^\s*(?:$|[,;&]|and\b|in\b|on\b|for\b|to\b|with\b|colou?r\b|overlay\b)")
_CONNECTOR = re.compile(r"^(?:[\s,;&]|and\b|then\b|while\b|plus\b)+")
_ARTICLE = re.compile(r"^(?:the|a|an|this|these|those)\s+")
_CONTEXT = re.compile(
    r"\s+(?:in|on|of|from|within)\s+(?:the|this|that|an?)\s+"
    r"(?:[\w-]+\s+){0,2}(?:image|scan|slice|picture|photo|photograph|view|frame|radiograph)$"
)
_ANOTHER_STRUCTURE = re.compile(r"^\s*,?\s*and\s+\w")
_LIST_SEP = re.compile(r"\s*(?:,\s*(?:and\s+)?|\band\b|&)\s*")


def _intent(
    text: str,
    action: Action,
    *,
    target: str = "",
    structures: tuple[str, ...] = (),
    colors: tuple[str, ...] = (),
) -> EditIntent:
    return EditIntent(text, action, _PERSPECTIVE[action], target, structures, colors)


def _normalise(text: str) -> str:
    t = re.sub(r"[\"“”‘’`]", "", str(text)).lower()
    t = re.sub(r"\s+", " ", t).strip(" .!?;:")
    while (stripped := _POLITE.sub("", t)) != t:
        t = stripped
    return re.sub(r",?\s*please$", "", t).strip(" .!?;:,")


def _transformation(t: str) -> Action | None:
    for pattern, action in _TRANSFORMATIONS:
        if pattern.search(t):
            return action
    return None


def _clean_phrase(phrase: str) -> str:
    p = _CONNECTOR.sub("", phrase.strip())
    p = _CONTEXT.sub("", p).strip(" ,;")
    while (stripped := _ARTICLE.sub("", p)) != p:
        p = stripped
    return p.strip()


def _structures_and_colors(rest: str, text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split the object of a perception verb into paired structures and colours."""
    mentions = _color_mentions(rest)
    if not mentions:
        target = _clean_phrase(rest)
        if not target:
            raise UnsupportedInstructionError(text, SUPPORTED_INSTRUCTIONS, reason="no structure")
        return (target,), ()
    colors = tuple(color for color, _, _ in mentions)
    bounds = [0] + [end for _, _, end in mentions]
    segments = [_clean_phrase(rest[bounds[i] : start]) for i, (_, start, _) in enumerate(mentions)]
    tail = rest[bounds[-1] :]
    trailing = _clean_phrase(tail)
    if _ANOTHER_STRUCTURE.match(tail) and trailing and not _CONTEXT.match(" " + trailing):
        # "the A in red and the B": B has no colour (trailing context like "in the image" is fine)
        raise UnsupportedInstructionError(
            text,
            SUPPORTED_INSTRUCTIONS,
            reason=f"every structure needs its own colour: {trailing!r}",
        )
    if all(segments):  # "the A in red and the B in green"
        return tuple(segments), colors
    if not any(segments) and len(colors) == 1 and trailing:  # "highlight in red the liver"
        return (trailing,), colors
    if segments[0] and not any(segments[1:]):  # "the A, B and C in red, green and blue"
        if len(colors) == 1:
            return (segments[0],), colors
        parts = tuple(p for p in (_clean_phrase(s) for s in _LIST_SEP.split(segments[0])) if p)
        if len(parts) == len(colors):
            return parts, colors
        reason = f"{len(parts)} structures but {len(colors)} colours"
    else:
        reason = "every structure needs its own colour"
    raise UnsupportedInstructionError(text, SUPPORTED_INSTRUCTIONS, reason=reason)


def _color_mentions(rest: str) -> list[tuple[str, int, int]]:
    """Overlay colours in ``rest`` as ``(colour, start, end)``; spans include "in a", "overlay"."""
    mentions = []
    for m in _COLOR_WORD.finditer(rest):
        before, after = rest[: m.start()], rest[m.end() :]
        prefix = _COLOR_PREFIX.search(before)
        if not prefix and not _COLOR_FOLLOW.match(after):
            continue
        suffix = _COLOR_SUFFIX.match(after)
        start = prefix.start() if prefix else m.start()
        end = m.end() + (suffix.end() if suffix else 0)
        mentions.append((m.group(1), start, end))
    return mentions
