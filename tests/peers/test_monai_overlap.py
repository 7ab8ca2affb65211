"""MONAI's Dice and IoU tests (``tests/metrics/test_compute_meandice.py`` and
``test_compute_meaniou.py``), their cases and expected values, through
:func:`medibench.metrics.dice` and :func:`~medibench.metrics.iou` applied per (batch item,
channel) as MONAI does, with ``ignore_empty=True`` (MONAI's default) unless the case says
otherwise. MONAI's reductions are NaN-aware means / sums over the not-NaN values
(``do_metric_reduction``); restated here."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.metrics import dice, iou

# MONAI's shared inputs: (batch 2, channels 3, 2 x 2)
PRED = np.array(
    [
        [[[1, 1], [1, 0]], [[0, 1], [0, 0]], [[0, 1], [1, 1]]],
        [[[1, 0], [1, 1]], [[0, 1], [1, 1]], [[0, 1], [1, 0]]],
    ]
)
TARGET = np.array(
    [
        [[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]],
        [[[0, 0], [0, 1]], [[1, 1], [0, 0]], [[0, 0], [1, 0]]],
    ]
)
TARGET_BG = np.array(  # the sum_batch / mean cases: only the background channel is set
    [
        [[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]],
        [[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]],
    ]
)
CASE2_PRED = np.array(
    [
        [[[0, 1], [0, 0]], [[0, 0], [1, 1]], [[1, 0], [0, 0]]],
        [[[0, 0], [0, 1]], [[1, 0], [0, 0]], [[0, 1], [1, 0]]],
    ]
)
CASE2_TARGET = np.array(
    [
        [[[0, 0], [0, 1]], [[1, 0], [1, 0]], [[0, 1], [0, 0]]],
        [[[0, 0], [0, 1]], [[1, 1], [0, 0]], [[0, 0], [1, 0]]],
    ]
)
NAN_PRED = np.array(
    [
        [[[0, 0], [0, 0]], [[0, 0], [0, 0]], [[1, 1], [1, 1]]],
        [[[0, 0], [0, 0]], [[0, 0], [0, 0]], [[1, 1], [1, 1]]],
    ]
)
NAN_TARGET = np.array(
    [
        [[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]],
        [[[0, 1], [1, 0]], [[1, 0], [0, 1]], [[0, 0], [0, 0]]],
    ]
)


def per_channel(metric, pred, target, *, include_background=True, ignore_empty=True):
    """MONAI's ``compute_dice`` / ``compute_iou``: one value per batch item and channel."""
    channels = range(0 if include_background else 1, pred.shape[1])
    return np.array(
        [
            [metric(pred[b, c], target[b, c], ignore_empty=ignore_empty) for c in channels]
            for b in range(pred.shape[0])
        ]
    )


def reduce(values, how):
    """MONAI's ``do_metric_reduction`` on the not-NaN values."""
    if how == "mean":  # the channel mean of each item, then the mean over items
        return np.nanmean(np.nanmean(values, axis=1))
    if how == "mean_batch":
        return np.nanmean(values, axis=0)
    if how == "sum_batch":
        return np.nansum(values, axis=0)
    raise ValueError(how)


VALUES = {  # case: (pred, target, keywords, dice expected, iou expected)
    "1": (
        np.array([[[[1, 0], [0, 1]]]]),
        np.array([[[[1, 0], [1, 1]]]]),
        {},
        [[0.8]],
        [[0.6667]],
    ),
    "2": (
        CASE2_PRED,
        CASE2_TARGET,
        {"include_background": False},
        [[0.5, 0.0], [0.6667, 0.6667]],
        [[0.3333, 0.0], [0.5, 0.5]],
    ),
    "9": (np.ones((2, 2, 3, 3)), np.ones((2, 2, 3, 3)), {}, [[1, 1], [1, 1]], [[1, 1], [1, 1]]),
    "11": (
        np.zeros((2, 2, 3, 3)),
        np.zeros((2, 2, 3, 3)),
        {"ignore_empty": False},
        [[1, 1], [1, 1]],
        [[1, 1], [1, 1]],
    ),
    "12": (
        np.ones((2, 2, 3, 3)),
        np.zeros((2, 2, 3, 3)),
        {"ignore_empty": False},
        [[0, 0], [0, 0]],
        [[0, 0], [0, 0]],
    ),
}


@pytest.mark.parametrize("case", sorted(VALUES))
@pytest.mark.parametrize("which", ["dice", "iou"])
def test_value(case, which):
    pred, target, kw, want_dice, want_iou = VALUES[case]
    metric, want = (dice, want_dice) if which == "dice" else (iou, want_iou)
    np.testing.assert_allclose(per_channel(metric, pred, target, **kw), want, atol=1e-4)


@pytest.mark.parametrize("metric", [dice, iou])
def test_nans(metric):
    # TEST_CASE_3: an empty target is NaN whatever the prediction (channel 2 predicts everything)
    got = per_channel(metric, NAN_PRED, NAN_TARGET)
    assert (np.isnan(got) == [[False, True, True], [False, False, True]]).all()


NANS_CLASS = {  # case: (target, include_background, reduction, dice expected, iou expected)
    "4": (TARGET, True, "mean_batch", [0.6786, 0.4, 0.6667], [0.5416, 0.25, 0.5]),
    "5": (TARGET, True, "mean", 0.689683, 0.5555),
    "6": (TARGET_BG, True, "sum_batch", [1.7143, 0.0, 0.0], [1.5, 0.0, 0.0]),
    "7": (TARGET_BG, True, "mean", 0.857143, 0.75),
    "8": (TARGET_BG, False, "sum_batch", [0.0, 0.0], [0.0, 0.0]),
}


@pytest.mark.parametrize("case", sorted(NANS_CLASS))
@pytest.mark.parametrize("which", ["dice", "iou"])
def test_nans_class(case, which):
    target, background, how, want_dice, want_iou = NANS_CLASS[case]
    metric, want = (dice, want_dice) if which == "dice" else (iou, want_iou)
    values = per_channel(metric, PRED, target, include_background=background)
    np.testing.assert_allclose(reduce(values, how), want, atol=1e-4)


@pytest.mark.parametrize("metric", [dice, iou])
def test_the_both_empty_policy_is_not_monai_s_ignore_empty(metric):
    # medibench's other policy, by its own name: a prediction on an empty target scores 0 there,
    # where MONAI's ignore_empty gives NaN (TEST_CASE_3's channel 2)
    got = np.array(
        [
            [metric(NAN_PRED[b, c], NAN_TARGET[b, c], empty=float("nan")) for c in range(3)]
            for b in range(2)
        ]
    )
    assert got[0, 2] == 0.0 and np.isnan(got[0, 1])
