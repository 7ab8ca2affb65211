"""Dice, IoU, MieDB DICE and perception accuracy: hand values, sklearn, empty-mask policy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import f1_score, jaccard_score

from medibench.metrics import dice, iou, miedb_dice, perception_accuracy


def test_hand_computed():
    p = np.array([[1, 1, 0], [0, 1, 0]], bool)  # |P| = 3
    g = np.array([[1, 0, 0], [0, 1, 1]], bool)  # |G| = 3, |P & G| = 2, |P | G| = 4
    assert dice(p, g) == pytest.approx(4 / 6)
    assert iou(p, g) == pytest.approx(2 / 4)
    assert miedb_dice(p, g) == pytest.approx((4 + 1e-6) / (6 + 1e-6))


def test_against_sklearn():
    rng = np.random.default_rng(3)
    for density in (0.05, 0.3, 0.7):
        p = rng.random((37, 23)) < density
        g = rng.random((37, 23)) < density
        assert dice(p, g) == pytest.approx(f1_score(g.ravel(), p.ravel()))
        assert iou(p, g) == pytest.approx(jaccard_score(g.ravel(), p.ravel()))


def test_empty_policy():
    z = np.zeros((5, 5), bool)
    one = z.copy()
    one[2, 2] = True
    assert dice(z, z) == 1.0 and iou(z, z) == 1.0
    assert dice(z, z, empty=0.0) == 0.0
    assert math.isnan(iou(z, z, empty=float("nan")))
    assert dice(one, z) == 0.0 and iou(z, one) == 0.0  # only *both* empty is special
    assert miedb_dice(z, z) == 1.0
    assert miedb_dice(one, z) == pytest.approx(1e-6 / (1 + 1e-6))
    with pytest.raises(ValueError, match="empty must be in"):
        dice(z, z, empty=2.0)


def test_binary_numeric_masks_and_errors():
    g = np.array([0, 255, 255, 0], np.uint8)
    p = np.array([0, 1, 0, 0])
    assert dice(p, g) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="target is not binary"):
        dice(p, np.array([0, 128, 255, 0], np.uint8))
    with pytest.raises(ValueError, match=r"pred.shape=\(4,\) and target.shape=\(5,\)"):
        iou(p, np.zeros(5))
    with pytest.raises(ValueError, match="pred contains 1 NaN"):
        miedb_dice(np.array([0.0, np.nan]), np.zeros(2))


def test_perception_accuracy():
    assert perception_accuracy([0.8, 0.79999, 1.0, 0.0]) == 0.5
    assert perception_accuracy(np.array([0.5, 0.95]), tau=0.5) == 1.0
    with pytest.raises(ValueError, match="at least one"):
        perception_accuracy([])
    with pytest.raises(ValueError, match="2 of 4 DICE values are NaN or None"):
        perception_accuracy([0.9, None, float("nan"), 0.1])
    with pytest.raises(ValueError, match="tau must be in"):
        perception_accuracy([0.9], tau=1.5)


def test_ignore_empty_is_monai_s_and_the_both_empty_policy_keeps_its_name():
    z = np.zeros((4, 4), bool)
    one = z.copy()
    one[1, 1] = True
    for metric in (dice, iou):
        # ignore_empty: an empty target is NaN whatever the prediction
        assert math.isnan(metric(one, z, ignore_empty=True))
        assert math.isnan(metric(z, z, ignore_empty=True))
        assert metric(z, one, ignore_empty=True) == 0.0  # the target is not empty: a value
        assert metric(one, one, ignore_empty=True) == 1.0
        # both-empty (empty=NaN): only both empty is undefined; one on an empty target is 0
        assert metric(one, z, empty=float("nan")) == 0.0
        assert math.isnan(metric(z, z, empty=float("nan")))
        with pytest.raises(ValueError, match="ignore_empty must be True or False"):
            metric(one, one, ignore_empty="yes")
