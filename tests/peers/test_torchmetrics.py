"""torchmetrics' documented examples (its doctests, run in its CI) for calibration error and
PSNR, their inputs and expected values (4 decimals, as printed), through medibench's
:mod:`medibench.calibration.metrics` and :func:`medibench.metrics.psnr`.

torchmetrics bins with ``torch.bucketize(..., right=True) - 1``: bins ``[lo, hi)``, medibench's
``edges="left"``. Its binary calibration error takes the positive class's probability against
the label: medibench's one-vs-rest ECE of class 1. Its ``norm="l2"`` has no medibench
counterpart and is not restated."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.calibration import metrics as M
from medibench.metrics import psnr

MULTI = np.array([[0.25, 0.20, 0.55], [0.55, 0.05, 0.40], [0.10, 0.30, 0.60], [0.90, 0.05, 0.05]])
MULTI_TARGET = np.array([0, 1, 2, 0])


def test_multiclass_calibration_error_l1_and_max():
    ece = M.expected_calibration_error(MULTI, MULTI_TARGET, n_bins=3, edges="left")
    mce = M.maximum_calibration_error(MULTI, MULTI_TARGET, n_bins=3, edges="left")
    assert round(ece, 4) == 0.2000 and round(mce, 4) == 0.2333


def test_binary_calibration_error_l1():
    p = np.array([0.25, 0.25, 0.55, 0.75, 0.75])
    target = np.array([0, 0, 1, 1, 1])
    per_class = M.classwise_ece_per_class(np.stack([1 - p, p], 1), target, n_bins=2, edges="left")
    assert round(float(per_class[1]), 4) == 0.2900


def test_psnr_example():
    preds = np.array([[0.0, 1.0], [2.0, 3.0]])
    target = np.array([[3.0, 2.0], [1.0, 0.0]])
    # torchmetrics infers data_range = target.max() - target.min(); medibench takes it explicitly
    assert round(psnr(preds, target, data_range=3.0), 4) == pytest.approx(2.5527)


# -- FID on features (tests/unittests/image/test_fid.py) ---------------------------------------
@pytest.mark.parametrize("matrix_size", [2, 10, 100])
def test_matrix_sqrt_trace(matrix_size):
    # test_matrix_sqrt: tr sqrt(C1 C2) against scipy's sqrtm, covariances of 2n x n normal data;
    # medibench's trace sits inside its Frechet distance: with equal means
    # FID = tr C1 + tr C2 - 2 tr sqrt(C1 C2)
    from scipy.linalg import sqrtm

    from medibench.metrics.features import gaussian_frechet_distance

    rng = np.random.default_rng(42)

    def cov(n):
        data = rng.normal(size=(2 * n, n))
        centred = data - data.mean(axis=0)
        return centred.T @ centred

    c1, c2 = cov(matrix_size), cov(matrix_size)
    mu = np.zeros(matrix_size)
    tr_sqrt = (np.trace(c1) + np.trace(c2) - gaussian_frechet_distance(mu, c1, mu, c2)) / 2
    assert tr_sqrt == pytest.approx(np.trace(sqrtm(c1 @ c2).real), rel=1e-5)


@pytest.mark.parametrize("feature", [64, 192])
def test_fid_same_input(feature):
    # the real and the fake sets are the same features: the distance is 0 (atol 1e-3)
    from medibench.metrics.features import frechet_distance

    feats = np.random.default_rng(feature).normal(size=(4 * feature, feature))
    assert frechet_distance(feats, feats) == pytest.approx(0.0, abs=1e-3)
