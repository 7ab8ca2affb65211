"""Overlap of binary masks: Dice, IoU, the MieDB-100k DICE and perception accuracy.

``dice = 2 |P & G| / (|P| + |G|)``, ``iou = |P & G| / |P | G|`` (P the prediction, G the
target). Empty masks, two policies, each by its name:

* **both-empty** (``empty``, the default): only when *both* masks are empty is the ratio 0/0;
  the result is then ``empty`` (default 1.0: nothing to find and nothing found is a perfect
  answer; ``empty=float("nan")`` marks those samples undefined). A non-empty prediction on an
  empty target is 0. With ``empty=1.0`` this is MONAI's ``ignore_empty=False``.
* **ignore_empty** (``ignore_empty=True``, MONAI's default of that name): an empty *target* gives
  NaN whatever the prediction (an empty target has nothing to overlap with, so the sample is
  left out when NaNs are dropped); ``empty`` is not used.

``miedb_dice`` is the paper formula of MieDB-100k (docs/protocols.md), smoothed by 1e-6:
``(2 |G & P| + 1e-6) / (|G| + |P| + 1e-6)``, which is 1 when both are empty.

Example:
    >>> import numpy as np
    >>> p = np.array([1, 1, 0, 0], bool); g = np.array([1, 0, 1, 0], bool)
    >>> dice(p, g), iou(p, g)
    (0.5, 0.3333333333333333)
    >>> dice(np.zeros(3, bool), np.zeros(3, bool))
    1.0
    >>> perception_accuracy([0.9, 0.5, 0.8, 0.79])
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from medibench.metrics._checks import as_bool_mask, check_same_shape

__all__ = ["dice", "iou", "miedb_dice", "perception_accuracy"]

# Smoothing term of the MieDB-100k DICE (docs/protocols.md).
_MIEDB_EPS = 1e-6


def dice(
    pred: np.ndarray, target: np.ndarray, *, empty: float = 1.0, ignore_empty: bool = False
) -> float:
    """Dice coefficient (F1) of two binary masks of the same shape (any shape, ``pred`` and
    ``target`` alike); ``empty`` if both are empty, or NaN for any empty target with
    ``ignore_empty=True`` (module docstring: the two policies).

    Masks are boolean or strictly binary (0 and one non-zero value); anything else is a
    ``ValueError``.
    """
    inter, n_pred, n_target = _counts(pred, target)
    empty = _check_empty(empty, ignore_empty)
    if ignore_empty and n_target == 0:
        return math.nan
    total = n_pred + n_target
    return empty if total == 0 else 2.0 * inter / total


def iou(
    pred: np.ndarray, target: np.ndarray, *, empty: float = 1.0, ignore_empty: bool = False
) -> float:
    """Intersection over union (Jaccard) of two binary masks of the same shape; ``empty`` if
    both are empty, or NaN for any empty target with ``ignore_empty=True`` (module docstring)."""
    inter, n_pred, n_target = _counts(pred, target)
    empty = _check_empty(empty, ignore_empty)
    if ignore_empty and n_target == 0:
        return math.nan
    union = n_pred + n_target - inter
    return empty if union == 0 else inter / union


def miedb_dice(pred: np.ndarray, target: np.ndarray) -> float:
    """MieDB-100k DICE, paper formula: ``(2|G & P| + 1e-6) / (|G| + |P| + 1e-6)``.

    Both empty gives 1; one empty gives about 0 (``1e-6 / (n + 1e-6)``, not exactly 0).
    """
    inter, n_pred, n_target = _counts(pred, target)
    return (2.0 * inter + _MIEDB_EPS) / (n_pred + n_target + _MIEDB_EPS)


def perception_accuracy(dices: Iterable[float | None], tau: float = 0.8) -> float:
    """Fraction of samples whose DICE is at least ``tau`` (MieDB-100k perception accuracy).

    Raises ``ValueError`` on an empty input, and on NaN or ``None`` entries (naming how many):
    a missing score must be decided on (dropped or scored 0) by the caller, never silently.
    """
    values = np.array([math.nan if d is None else d for d in dices], dtype=np.float64)
    if values.size == 0:
        raise ValueError("perception_accuracy needs at least one DICE value, got none")
    n_missing = int(np.count_nonzero(np.isnan(values)))
    if n_missing:
        raise ValueError(
            f"{n_missing} of {values.size} DICE values are NaN or None; drop them or score "
            "them explicitly (e.g. 0 for a missing prediction) before aggregating"
        )
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    return float(np.count_nonzero(values >= tau) / values.size)


def _counts(pred: np.ndarray, target: np.ndarray) -> tuple[int, int, int]:
    p = as_bool_mask(pred, "pred")
    t = as_bool_mask(target, "target")
    check_same_shape(p, t, ("pred", "target"))
    return (
        int(np.count_nonzero(np.logical_and(p, t))),
        int(np.count_nonzero(p)),
        int(np.count_nonzero(t)),
    )


def _check_empty(empty: float, ignore_empty: object) -> float:
    if not isinstance(ignore_empty, (bool, np.bool_)):
        raise ValueError(f"ignore_empty must be True or False, got {ignore_empty!r}")
    value = float(empty)
    if not (math.isnan(value) or 0.0 <= value <= 1.0):
        raise ValueError(f"empty must be in [0, 1] or NaN, got {empty}")
    return value
