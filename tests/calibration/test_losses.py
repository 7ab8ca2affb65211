"""Train-time losses on hand-computed logits."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from medibench.calibration.losses import (  # noqa: E402
    FocalLoss,
    LabelSmoothingLoss,
    LogitNormLoss,
    MarginLogitSuppressionLoss,
    MaximumMeanCalibrationErrorLoss,
    MultiClassMarginLoss,
    SmoothedAccuracyConfidenceLoss,
    margin_statistics,
)

Z = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0]]
Y = [0, 2]


def logits():
    return torch.tensor(Z, dtype=torch.float64), torch.tensor(Y)


def log_p(i: int, k: int) -> float:
    return Z[i][k] - math.log(sum(math.exp(v) for v in Z[i]))


CE = -(log_p(0, 0) + log_p(1, 2)) / 2


def test_margin_statistics_by_hand():
    # margins: sample 0 (y=0): 2, 3; sample 1 (y=2): -0.5, -1.5 -> mu = 0.75
    z, y = logits()
    mu, var = margin_statistics(z, y)
    assert float(mu) == pytest.approx(0.75)
    assert float(var) == pytest.approx((1.25**2 + 2.25**2 + 1.25**2 + 2.25**2) / 4)  # 3.3125
    _, var_ps = margin_statistics(z, y, "per_sample")  # sample means 2.5, -1.0
    assert float(var_ps) == pytest.approx(1.75**2)


def test_mcm_value_both_variance_modes():
    z, y = logits()
    assert float(MultiClassMarginLoss()(z, y)) == pytest.approx(CE - 0.1 * 0.75 + 0.01 * 3.3125)
    official = MultiClassMarginLoss(variance_mode="per_sample")
    assert float(official(z, y)) == pytest.approx(CE - 0.075 + 0.01 * 3.0625)
    reg = MultiClassMarginLoss(include_ce=False)
    assert float(reg(z, y)) == pytest.approx(-0.075 + 0.033125)
    with pytest.raises(ValueError, match="variance_mode"):
        MultiClassMarginLoss(variance_mode="pairs")  # type: ignore[arg-type]


def test_label_smoothing_conventions():
    z, y = logits()
    a = 0.1
    pt = (
        -sum(
            (1 - a + a / 3 if k == Y[i] else a / 3) * log_p(i, k)
            for i in range(2)
            for k in range(3)
        )
        / 2
    )
    mv = -sum((1 - a if k == Y[i] else a / 2) * log_p(i, k) for i in range(2) for k in range(3)) / 2
    assert float(LabelSmoothingLoss(a)(z, y)) == pytest.approx(pt)
    assert float(LabelSmoothingLoss(a)(z, y)) == pytest.approx(
        float(torch.nn.functional.cross_entropy(z, y, label_smoothing=a))
    )
    assert float(LabelSmoothingLoss(a, "mvcbench")(z, y)) == pytest.approx(mv)
    assert pt != pytest.approx(mv)


def test_focal_loss_by_hand():
    z, y = logits()
    want = -sum((1 - math.exp(lp)) ** 2 * lp for lp in (log_p(0, 0), log_p(1, 2))) / 2
    assert float(FocalLoss(gamma=2.0)(z, y)) == pytest.approx(want)
    assert float(FocalLoss(gamma=0.0)(z, y)) == pytest.approx(CE)


def test_mbls_by_hand():
    z, y = logits()
    # margin 1: sample 0 gaps 0, 2, 3 -> 0, 1, 2; sample 1 gaps 1, 0, 1.5 -> 0, 0, 0.5
    loss = MarginLogitSuppressionLoss(margin=1.0, alpha=0.1)(z, y)
    assert float(loss) == pytest.approx(CE + 0.1 * 3.5 / 6)
    assert float(MarginLogitSuppressionLoss()(z, y)) == pytest.approx(CE)  # margin 10: no penalty


def test_losses_have_gradients():
    z, y = logits()
    z.requires_grad_(True)
    MultiClassMarginLoss()(z, y).backward()
    assert z.grad is not None and torch.isfinite(z.grad).all()


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: FocalLoss(gamma=-1.0), "focal gamma must be >= 0, got -1.0"),
        (lambda: FocalLoss(gamma=math.nan), "focal gamma must be >= 0, got nan"),
        (lambda: LabelSmoothingLoss(1.0), "label smoothing alpha must be in [0, 1), got 1.0"),
        (lambda: LabelSmoothingLoss(-0.1), "label smoothing alpha must be in [0, 1), got -0.1"),
        (lambda: SmoothedAccuracyConfidenceLoss(math.nan), "smac alpha must be in [0, 1), got nan"),
        (lambda: MaximumMeanCalibrationErrorLoss(0.0), "mmce bandwidth must be > 0, got 0.0"),
        (lambda: LogitNormLoss(-2), "logitnorm temperature must be > 0, got -2"),
    ],
)
def test_bad_hyper_parameters_name_the_loss_and_the_setting(build, message):
    with pytest.raises(ValueError) as caught:
        build()
    assert str(caught.value) == message
