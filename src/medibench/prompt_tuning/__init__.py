"""Few-shot prompt tuning of CLIP-family backbones with calibration losses (MVC-Bench's
training side). Needs the ``torch`` extra.

* Data (:func:`read_labelled`, :func:`few_shot_indices`): MVC-Bench's class folders with
  ``classnames.txt`` and split files, medibench's native layout, Parquet.
* Backbones (:func:`load_backbone`): ``clip:PATH``, ``siglip:PATH``, ``hf:PATH``,
  ``open_clip:PATH``, ``open_clip:hf-hub:NAME``, ``module:callable``.
* Methods (:data:`METHODS`, :data:`DEFAULTS`): zero-shot, linear-probe, coop, cocoop, kgcoop,
  prograd, maple, promptsrc, hicropl; losses (:data:`LOSSES`).
* :func:`train` (``medibench calibration train``) and :func:`run_grid` (``medibench
  calibration grid``).
"""

from medibench.prompt_tuning._data import LabelledImages, few_shot_indices, read_labelled
from medibench.prompt_tuning._defaults import DEFAULTS, LOSSES, METHODS
from medibench.registry import lazy_attributes

__all__ = [
    "DEFAULTS",
    "LOSSES",
    "METHODS",
    "LabelledImages",
    "TrainSettings",
    "few_shot_indices",
    "load_backbone",
    "parse_losses",
    "read_labelled",
    "train",
]


#: The exports that import torch, loaded on first use.
_LAZY = {
    "TrainSettings": "._train", "train": "._train", "parse_losses": "._losses",
    "load_backbone": "._backbone", "run_grid": "._grid",
}  # fmt: skip
__getattr__ = lazy_attributes(__name__, _LAZY)
