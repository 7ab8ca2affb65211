"""parse_instruction: the vocabulary of the classical baseline (medibench.models._instructions)."""

from __future__ import annotations

import pytest

from medibench.models import EditIntent, UnsupportedInstructionError, parse_instruction
from medibench.samples import Perspective

PERCEPTION = [
    ("Highlight the lesion in green", ("lesion",), ("green",)),
    ("highlight the lesion in green.", ("lesion",), ("green",)),
    ("  HIGHLIGHT   THE LESION IN GREEN!  ", ("lesion",), ("green",)),
    ("Please segment the liver in red", ("liver",), ("red",)),
    ("Could you please mark the tumour with a blue contour?", ("tumour",), ("blue",)),
    ("Outline the nodule using a red overlay.", ("nodule",), ("red",)),
    ("Colour the liver red", ("liver",), ("red",)),
    ("Color the kidney in blue", ("kidney",), ("blue",)),
    ("Overlay the brain in green", ("brain",), ("green",)),
    ("Label the polyp in blue", ("polyp",), ("blue",)),
    ("Delineate the left lung in red", ("left lung",), ("red",)),
    ("Segment the liver in this CT image in red", ("liver",), ("red",)),
    ("Highlight in red the optic disc", ("optic disc",), ("red",)),
    ("Segment the brain", ("brain",), ()),
    ('"Highlight the red blood cells in green"', ("red blood cells",), ("green",)),
    (
        "Highlight the white matter in red and the grey matter in green",
        ("white matter", "grey matter"),
        ("red", "green"),
    ),
    (
        "Highlight the white matter in red, the grey matter in green and the CSF in blue.",
        ("white matter", "grey matter", "csf"),
        ("red", "green", "blue"),
    ),
    (
        "Segment the white matter, grey matter and CSF in red, green and blue",
        ("white matter", "grey matter", "csf"),
        ("red", "green", "blue"),
    ),
    ("Highlight the liver and the spleen in red", ("liver and the spleen",), ("red",)),
    ("Highlight the liver in red and in the whole image", ("liver",), ("red",)),
]


@pytest.mark.parametrize(("text", "structures", "colors"), PERCEPTION)
def test_perception_structures_and_colours(text, structures, colors):
    intent = parse_instruction(text)
    assert intent.action == "overlay"
    assert intent.perspective is Perspective.perception
    assert intent.structures == structures
    assert intent.colors == colors
    assert intent.target == " and ".join(structures)
    assert intent.text == text


REMOVAL = [
    ("Remove the lesion", "lesion"),
    ("Erase the tumor.", "tumor"),
    ("delete the nodule", "nodule"),
    ("Get rid of the polyps!", "polyps"),
    ("Please remove the bright mass from the image", "bright mass"),
    ("Eliminate the dark spot", "dark spot"),
    ("Take out the metal artifact", "metal artifact"),
    ("Remove the blurry lesion", "blurry lesion"),
]


@pytest.mark.parametrize(("text", "target"), REMOVAL)
def test_removal_target(text, target):
    intent = parse_instruction(text)
    assert (intent.action, intent.perspective, intent.target) == (
        "remove",
        Perspective.modification,
        target,
    )
    assert intent.colors == ()


TRANSFORMATION = [
    ("Denoise the image", "denoise"),
    ("De-noise this MRI.", "denoise"),
    ("Remove the noise", "denoise"),
    ("Remove noise from the CT scan", "denoise"),
    ("Reduce the noise in this image", "denoise"),
    ("Make the image less noisy", "denoise"),
    ("Apply denoising", "denoise"),
    ("Deblur the image", "deblur"),
    ("Unblur this X-ray", "deblur"),
    ("Sharpen the image.", "deblur"),
    ("Remove the blur", "deblur"),
    ("Make the image sharper", "deblur"),
    ("Enhance the contrast", "enhance_contrast"),
    ("Improve the contrast of the image", "enhance_contrast"),
    ("increase contrast", "enhance_contrast"),
    ("Apply CLAHE", "enhance_contrast"),
    ("Smooth the image", "smooth"),
    ("Apply a bilateral filter", "smooth"),
]


@pytest.mark.parametrize(("text", "action"), TRANSFORMATION)
def test_transformation_action(text, action):
    intent = parse_instruction(text)
    assert intent == EditIntent(text, action, Perspective.transformation)


UNSUPPORTED = [
    ("", "it is empty"),
    ("   ", "it is empty"),
    ("Convert this CT to MRI", ""),
    ("Increase the resolution", ""),
    ("Make it look healthier", ""),
    ("Remove the liver", "cannot remove 'liver'"),
    ("Highlight the white matter, grey matter in red, green and blue", "2 structures but 3"),
    ("Highlight the lesion in red and the liver", "every structure needs its own colour"),
]


@pytest.mark.parametrize(("text", "reason"), UNSUPPORTED)
def test_unsupported_instructions_explain_themselves(text, reason):
    with pytest.raises(UnsupportedInstructionError) as info:
        parse_instruction(text)
    message = str(info.value)
    assert repr(text) in message
    assert reason in message
    for family in ("perception:", "modification:", "transformation:"):
        assert family in message
    assert info.value.instruction == text
    assert isinstance(info.value, ValueError)
