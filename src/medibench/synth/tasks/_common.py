"""What the task modules share: scenes at the item's knobs, lesions, and where things are, in words.

Spatial language follows each modality's viewing convention:

- ``radiological`` (CT, MRI axial slices; chest X-ray): the image is the patient seen from the
  feet (axial) or from the front (frontal radiograph), so the patient's **left is on the image's
  right**. Sides are the patient's; rows read anterior (top) / posterior for axial slices and
  upper / lower for radiographs.
- ``image`` (dermoscopy, endoscopy, fundus photographs): sides and rows are the image's own
  (upper / lower, left / right as displayed).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from medibench.synth.scenes import (
    MODALITIES,
    Lesion,
    Rendered,
    Scene,
    lesion_hosts,
    make_scene,
    render,
)
from medibench.synth.tasks._base import OverlayColour, TaskContext, TaskItem

__all__ = [
    "ALL_MODALITIES",
    "COLOUR_PREFIXES",
    "GENERIC_HOSTS",
    "Place",
    "convention",
    "convention_note",
    "described_lesion",
    "human",
    "lesion_dict",
    "scene_meta",
    "lesion_hosts_here",
    "lesion_noun",
    "lesion_spec",
    "lesion_shade",
    "lesion_words",
    "locate",
    "modality_text",
    "new_scene",
    "plural",
    "region",
    "rgb",
    "task_item",
]

#: Hosts that are the whole imaged surface, not an organ to name.
GENERIC_HOSTS = ("skin", "mucosa", "retina", "field_of_view", "background", "body")

#: Procedural and real-background scene modalities the tasks know how to talk about.
ALL_MODALITIES: tuple[str, ...] = tuple(
    m for m in ("ct", "mri", "xray", "dermoscopy", "endoscopy", "fundus",
                "ct-real", "mri-real", "xray-real", "fundus-real")
    if m in MODALITIES
)  # fmt: skip

# modality -> (Sample.modality, image phrase, convention, axial?)
_MODALITY = {
    "ct": ("CT", "axial CT slice", "radiological", True),
    "ct-real": ("CT", "axial CT slice", "radiological", True),
    "mri": ("MRI", "axial brain MR slice", "radiological", True),
    "mri-real": ("MRI", "MR slice", "neurological", True),  # MNI152 brain; the shoulder: image
    "xray": ("X-ray", "frontal chest radiograph", "radiological", False),
    "xray-real": ("X-ray", "radiograph", "radiological", False),  # chest; the leg: image
    "dermoscopy": ("dermoscopy", "dermoscopic image", "image", False),
    "endoscopy": ("endoscopy", "endoscopic image", "image", False),
    "fundus": ("fundus", "fundus photograph", "image", False),
    "fundus-real": ("fundus", "fundus photograph", "image", False),
}

# (modality prefix, host) -> (kind, parser noun, typical signed contrast in the modality's units);
# MR contrasts depend on the weighting: (variant, host) keys first. The parser noun is one the
# classical baseline's vocabulary knows (models/_instructions.py).
_LESIONS: dict[tuple[str, str], tuple[str, str, float]] = {
    ("ct", "liver"): ("metastasis", "lesion", -45.0),
    ("ct", "spleen"): ("cyst", "cyst", -40.0),
    ("ct", "kidney_left"): ("cyst", "cyst", -30.0),
    ("ct", "kidney_right"): ("cyst", "cyst", -30.0),
    ("ct", "lung_left"): ("nodule", "nodule", 850.0),
    ("ct", "lung_right"): ("nodule", "nodule", 850.0),
    ("ct", "muscle"): ("mass", "mass", -35.0),
    ("t1", "white_matter"): ("lesion", "lesion", -0.3),
    ("t2", "white_matter"): ("plaque", "lesion", 0.35),
    ("t1", "brain"): ("tumour", "tumour", -0.3),
    ("t2", "brain"): ("tumour", "tumour", 0.35),
    ("xray-real", "body"): ("nodule", "nodule", 40.0),  # display units (0-255)
    ("leg", "body"): ("lesion", "lesion", 40.0),
    ("head", "brain"): ("haemorrhage", "lesion", 45.0),
    ("xray", "lung_left"): ("nodule", "nodule", 0.35),
    ("xray", "lung_right"): ("nodule", "nodule", 0.35),
    ("dermoscopy", "skin"): ("mole", "lesion", 0.6),
    ("endoscopy", "mucosa"): ("polyp", "polyp", 0.7),
    ("fundus", "retina"): ("haemorrhage", "lesion", 0.6),
    ("fundus", "macula"): ("drusen", "lesion", 0.6),
}
# modality prefix -> (kind, parser noun, contrast) for hosts not listed above.
_DEFAULT_LESION = {
    "ct": ("lesion", "lesion", -40.0),
    "mri": ("lesion", "lesion", 0.35),
    "xray": ("nodule", "nodule", 0.35),
    "dermoscopy": ("mole", "lesion", 0.6),
    "endoscopy": ("polyp", "polyp", 0.7),
    "fundus": ("haemorrhage", "lesion", 0.6),
}
# How a lesion looks, by kind (colour modalities) or by contrast sign (grey modalities).
_KIND_LOOK = {
    "mole": "pigmented", "melanoma": "irregular pigmented", "polyp": "raised",
    "haemorrhage": "dark red", "drusen": "yellowish", "exudate": "yellow-white",
}  # fmt: skip
_SHADES = {
    "ct": ("hypodense", "hyperdense"),
    "mri": ("hypointense", "hyperintense"),
    "xray": ("lucent", "dense"),
}
#: Colour modalities: lesion contrast is an opacity in [0, 1].
COLOUR_PREFIXES = ("dermoscopy", "endoscopy", "fundus")


def modality_text(modality: str) -> tuple[str, str]:
    """``(Sample.modality, image phrase)``: ``("CT", "axial CT slice")``."""
    name, phrase, _, _ = _MODALITY[modality]
    return name, phrase


def plural(noun: str) -> str:
    """``"nodule" -> "nodules"``, ``"mass" -> "masses"``."""
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")


_REGIONS = {"ct": "abdomen", "mri": "brain", "xray": "chest", "dermoscopy": "skin",
            "endoscopy": "colon", "fundus": "eye"}  # fmt: skip


def region(scene: Scene) -> str:
    """The body region a scene shows (``Sample.region``): a CT's variant, else the modality's."""
    variant = str(scene.param("variant"))
    if scene.modality.endswith("-real"):
        return {"photo": "eye"}.get(variant, variant)
    if _prefix(scene.modality) == "ct":
        return {"thorax": "chest"}.get(variant, variant)
    return _REGIONS[_prefix(scene.modality)]


def rgb(image: np.ndarray) -> np.ndarray:
    """``(H, W)`` grey to ``(H, W, 3)``; RGB passes through."""
    return np.repeat(image[:, :, None], 3, axis=2) if image.ndim == 2 else image


def task_item(
    ctx: TaskContext,
    scene: Scene,
    image: np.ndarray,
    target: np.ndarray,
    mask: np.ndarray | None,
    texts: list[str],
    description: str,
    metadata: dict,
    *,
    overlay_color: tuple[OverlayColour, ...] = (),
) -> TaskItem:
    """The item: ``texts[0]`` is the instruction and the others its paraphrases (``{phrase}`` in
    them becomes the modality's image phrase); the region is the scene's."""
    _, phrase = modality_text(ctx.modality)
    texts = [t.replace("{phrase}", phrase) for t in texts]
    return TaskItem(
        input=image, target=target, mask=mask, instruction=texts[0],
        paraphrases=tuple(texts[1:]), description=description, region=region(scene),
        overlay_color=overlay_color, metadata=metadata,
    )  # fmt: skip


def new_scene(ctx: TaskContext, *, noise: float | None = None) -> tuple[Scene, Rendered]:
    """A lesion-free scene for this item at the difficulty's clutter and noise, and its render."""
    scene = make_scene(
        ctx.modality,
        seed=int(ctx.rng.integers(2**31)),
        size=ctx.size,
        clutter=ctx.difficulty.clutter,
        noise=ctx.difficulty.noise if noise is None else noise,
    )
    return scene, render(scene)


def scene_meta(scene: Scene) -> dict:
    """What rebuilds a scene exactly: ``make_scene(modality, seed=, size=, clutter=, noise=)``
    then ``with_lesions(Lesion(**d) for d in lesions)`` (floats unrounded: JSON keeps them)."""
    return {
        "seed": scene.seed, "variant": scene.param("variant"), "clutter": scene.param("clutter"),
        "noise": scene.noise, "lesions": [lesion_dict(x) for x in scene.lesions],
    }  # fmt: skip


def lesion_dict(lesion: Lesion) -> dict:
    """A lesion as JSON-ready fields (``Lesion(**d)`` rebuilds it; tuples become lists)."""
    d = dataclasses.asdict(lesion)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def human(structure: str) -> str:
    """A label name in words: ``"lung_left" -> "left lung"``, ``"grey_matter" -> "grey matter"``."""
    parts = structure.split("_")
    if parts[-1] in ("left", "right") and len(parts) > 1:
        parts = [parts[-1], *parts[:-1]]
    return " ".join(parts)


def _prefix(modality: str) -> str:
    return modality.split("-")[0]


def lesion_spec(modality: str, host: str, variant: str | None = None) -> tuple[str, str, float]:
    """``(kind, parser noun, typical contrast)`` of a lesion in ``host`` (``variant``: the
    scene's, which sets the sign of MR contrasts)."""
    for key in ((variant, host), (modality, host), (_prefix(modality), host)):
        if key in _LESIONS:
            return _LESIONS[key]
    return _DEFAULT_LESION[_prefix(modality)]


def lesion_noun(lesion: Lesion, modality: str) -> str:
    """The parser-friendly noun for ``lesion`` ("nodule", "lesion", "cyst", "polyp", ...)."""
    for (_, host), (kind, noun, _) in _LESIONS.items():
        if host == lesion.host and kind == lesion.kind:
            return noun
    return _DEFAULT_LESION[_prefix(modality)][1]


def lesion_shade(lesion: Lesion, modality: str) -> str:
    """How ``lesion`` looks in words: "hypodense", "dense", "pigmented", "dark red", ..."""
    p = _prefix(modality)
    if p in _SHADES:
        return _SHADES[p][lesion.contrast > 0]
    return _KIND_LOOK.get(lesion.kind, "visible")


def lesion_words(lesion: Lesion, modality: str) -> str:
    """Shade and kind: "hypodense metastasis", "dense nodule", "dark red haemorrhage"."""
    return f"{lesion_shade(lesion, modality)} {lesion.kind}"


def lesion_hosts_here(modality: str, rendered: Rendered) -> list[str]:
    """The lesion hosts this rendered scene has."""
    return [h for h in lesion_hosts(modality) if h in rendered.labels]


@dataclass(frozen=True)
class Place:
    """Where a point is, in words: ``phrase`` for sentences, ``key`` to tell places apart."""

    phrase: str
    side: str  # the patient's side (radiological / neurological) or the image's: left / right
    vertical: str  # "upper" / "lower" or "anterior" / "posterior"
    image_side: str  # "left" / "right" half of the image as displayed
    convention: str  # "radiological", "neurological" or "image"
    key: tuple[str, str, str]


def convention(scene: Scene) -> tuple[str, bool]:
    """``(convention, axial)`` of a scene: how sides and rows map to the patient."""
    _, _, conv, axial = _MODALITY[scene.modality]
    variant = scene.param("variant")
    if scene.modality == "mri-real" and variant != "brain":  # a coronal shoulder: image sides
        return "image", False
    if scene.modality == "xray-real" and variant == "leg":
        return "image", False
    return conv, axial


def locate(point: tuple[float, float], host: str, rendered: Rendered, scene: Scene) -> Place:
    """Describe ``point`` (row, col) inside ``host`` of ``scene``, in its viewing convention.

    Radiological: a point in the image's right half is on the patient's left; neurological: on
    the patient's right; image: sides are the image's. The vertical word compares the row with
    the host's centroid (upper / lower for radiographs and photographs, anterior / posterior for
    axial slices); the side word compares the column with the image centre for lateral hosts
    (``*_left`` / ``*_right``, whose name already says the side) and with the host's centroid
    otherwise.
    """
    conv, axial = convention(scene)
    row, col = float(point[0]), float(point[1])
    size = rendered.image.shape[1]
    mask = rendered.labels.get(host)
    if mask is not None and mask.any():
        cr, cc = (float(v) for v in ndimage.center_of_mass(mask))
    else:
        cr, cc = (size - 1) / 2, (size - 1) / 2
    image_side = "right" if col > (size - 1) / 2 else "left"
    lateral = host.endswith(("_left", "_right"))
    local_side = "right" if col > (cc if not lateral else (size - 1) / 2) else "left"
    side = {"left": "right", "right": "left"}[local_side] if conv == "radiological" else local_side
    if conv != "image" and axial:
        vertical = ("anterior", "posterior")[row > cr]
    else:
        vertical = ("upper", "lower")[row > cr]
    organ = human(host)
    if lateral:
        zone = "zone" if _prefix(scene.modality) == "xray" else "part"
        phrase = f"the {vertical} {zone} of the {organ}"
    elif conv != "image":
        phrase = f"the {vertical} part of the {organ}, on the patient's {side}"
    elif host in GENERIC_HOSTS or host == "body":
        phrase = f"the {vertical} {side} part of the image"
    else:
        phrase = f"the {vertical} {side} part of the {organ}"
    return Place(phrase, side, vertical, image_side, conv, (host, vertical, side))


def convention_note(place: Place) -> str:
    """``" (shown on the image's right, radiological convention)"`` or ``""`` (image sides)."""
    if place.convention == "image":
        return ""
    return f" (shown on the image's {place.image_side}, {place.convention} convention)"


def described_lesion(lesion: Lesion, rendered: Rendered, scene: Scene) -> tuple[str, str, str]:
    """``(noun, "the <shade> <kind> in <place> (convention)", organ)``."""
    noun = lesion_noun(lesion, scene.modality)
    place = locate(lesion.center, lesion.host, rendered, scene)
    what = f"the {lesion_words(lesion, scene.modality)} in {place.phrase}{convention_note(place)}"
    return noun, what, human(lesion.host)
