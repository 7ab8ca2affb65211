"""Procedural content: lesions inserted into real images, degradations, the starter benchmark.

Every generator is a pure function of its arguments: randomness comes only from a
``numpy.random.Generator`` passed in, seeded by :func:`item_rng` from the item's identity, so the
same seed gives byte-identical images.
"""

from medibench.synth._seed import item_rng, item_seed
from medibench.synth.degrade import add_gaussian_noise, gaussian_blur, reduce_contrast
from medibench.synth.lesion import body_mask, choose_lesion_center, insert_lesion
from medibench.synth.starter import STARTER_VERSION, build_starter, load_starter, starter_cache_dir

__all__ = [
    "STARTER_VERSION",
    "add_gaussian_noise",
    "body_mask",
    "build_starter",
    "choose_lesion_center",
    "gaussian_blur",
    "insert_lesion",
    "item_rng",
    "item_seed",
    "load_starter",
    "reduce_contrast",
    "starter_cache_dir",
]
