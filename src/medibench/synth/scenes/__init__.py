"""Procedural and real-background medical scenes with exact counterfactuals.

A :class:`Scene` is a frozen description (modality, size, anatomy seed and parameters, lesions,
noise level); :func:`render` draws it into a :class:`Rendered` image with a label map of its
structures. Noise and texture come from the scene's seed, never from its lesions, and a lesion
changes pixels only inside its ``"lesion:<i>"`` label, so the same scene with other lesions is
pixel-identical elsewhere: removing a lesion has an exact target.

Conventions: axial CT and chest X-ray follow the radiological convention (the patient's left on
the image's right); the MNI152 brain slices of ``mri-real`` follow the neurological one (the
patient's left on the image's left); see each module's docstring.

Example:
    >>> scene = make_scene("xray", seed=3, size=128)
    >>> plain = render(scene)
    >>> plain.image.shape, plain.image.dtype.name
    ((128, 128, 3), 'uint8')
"""

from medibench.synth.scenes._scene import (
    GREY_MODALITIES,
    MAX_SIZE,
    MIN_SIZE,
    MODALITIES,
    Lesion,
    Rendered,
    Scene,
    SceneError,
    lesion_hosts,
    make_scene,
    place_lesion,
    render,
    structures,
    variants,
)

__all__ = [
    "GREY_MODALITIES",
    "MAX_SIZE",
    "MIN_SIZE",
    "MODALITIES",
    "Lesion",
    "Rendered",
    "Scene",
    "SceneError",
    "lesion_hosts",
    "make_scene",
    "place_lesion",
    "render",
    "structures",
    "variants",
]
