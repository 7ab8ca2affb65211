"""Few-shot prompt tuning of CLIP-family backbones with calibration losses (MVC-Bench's
training side). Needs the ``torch`` extra.

* Data (:func:`read_labelled`, :func:`few_shot_indices`): MVC-Bench's class folders with
  ``classnames.txt`` and split files, medibench's native layout, Parquet.
* Backbones (:func:`load_backbone`): ``clip:PATH``, ``siglip:PATH``, ``hf:PATH``,
  ``module:callable``.
* Methods (:data:`METHODS`, :data:`DEFAULTS`): zero-shot, linear-probe, coop, cocoop, kgcoop,
  prograd, maple, promptsrc.
* :func:`train` (``medibench calibration train``) and :func:`run_grid` (``medibench
  calibration grid``).
"""

from medibench.prompt_tuning._data import LabelledImages, few_shot_indices, read_labelled
from medibench.prompt_tuning._defaults import DEFAULTS, LOSSES, METHODS

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


def __getattr__(name: str):
    if name in ("TrainSettings", "train"):
        from medibench.prompt_tuning import _train

        return getattr(_train, name)
    if name == "parse_losses":
        from medibench.prompt_tuning._losses import parse_losses

        return parse_losses
    if name == "load_backbone":
        from medibench.prompt_tuning._backbone import load_backbone

        return load_backbone
    if name == "run_grid":
        from medibench.prompt_tuning._grid import run_grid

        return run_grid
    raise AttributeError(name)
