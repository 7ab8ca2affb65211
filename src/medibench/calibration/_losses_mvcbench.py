"""The rest of MVC-Bench's loss registry (its ``losses.py``), each a ``torch.nn.Module``.

Every loss takes ``(logits, labels, **context)``; ``needs`` names the context it reads:
``zs_logits`` (the frozen model's zero-shot logits of the same batch, ``(B, C)``), ``text`` (the
prompted model's L2-normalised class text features, ``(C, E)``) and ``zs_text`` (the frozen
model's, ``(C, E)``). ``default_weight`` is the ``WEIGHT`` MVC-Bench's ``train.py``
(``extend_cfg``) gives the loss.

* :class:`DifferenceConfidenceAccuracyLoss` (``DCA``, weight 15): ``|mean_i conf_i - acc|``.
* :class:`MultiClassDifferenceConfidenceAccuracyLoss` (``MDCA``): ``mean_c |mean_i p_ic -
  mean_i [y_i = c]|``.
* :class:`SmoothedAccuracyConfidenceLoss` (``SMAC``, ``alpha`` 0.05): MDCA against the class
  frequencies smoothed as label smoothing, ``f_c (1 - alpha) + (1 - f_c) alpha / (C - 1)``.
* :class:`MaximumMeanCalibrationErrorLoss` (``MMCE``, the weighted MMCE of Kumar et al. 2018 as
  the code computes it): with confidences ``r``, correct set ``A`` (``m`` samples) and wrong set
  ``W`` (``n``), kernel ``k(a, b) = exp(-|a - b| / 0.4)``, ``S_AA = mean_{i,j in A} k(r_i, r_j)
  (1 - r_i)(1 - r_j)``, ``S_WW = mean_{W x W} k r_i r_j``, ``S_AW = mean_{A x W} k (1 - r_i)
  r_j``: ``sqrt(S_AA / (m^2 + 1e-5) + S_WW / (n^2 + 1e-5) - 2 S_AW / (m n + 1e-5) + 1e-10)``,
  and 0 when the batch is all right or all wrong. The means are divided by the squared counts a
  second time: the code's quirk, kept.
* :class:`LogitNormLoss` (``LOGITNORM``, ``temperature`` 1): ``CE(z / ((||z|| + 1e-7) t))``.
* :class:`ZeroShotRangePenaltyLoss` (``ECCV_PENALTY``, weight 10): ``mean relu(z_ik - max_k
  zs_ik) + mean relu(min_k zs_ik - z_ik)``, the logits kept inside each row's zero-shot range.
* :class:`ZeroShotRangeLoss` (``ECCV_ZS``): cross-entropy of the logits min-max rescaled into
  each row's zero-shot range (ranges clamped below at 1e-6).
* :class:`AngularSeparationLoss` (``AS``): ``mean_i sum_{j != i} t_i . t_j / (C - 1)`` over the
  class text features.
* :class:`OrthogonalTextLoss` (``O-TPT``): with ``W = T T^T`` (``C x C``), ``u_i = W_i - ||W_:,i||
  e_i`` and ``v_i = u_i / ||u_i||``, the Householder image ``h_i = W_i - 2 v_i (v_i . W_i)``;
  the loss is ``mean_i ||h_i - e_i||``.
* :class:`TextMomentMatchingLoss` (``TEXT_MOMENT_MATCHING``, weight 5): ``||mean(T) -
  mean(T_zs)||^2 + ||cov(T) - cov(T_zs)||_F^2`` with ``cov(X) = (X - mean)^T (X - mean) / C``.

Deviation: where the code returns 0 (or plain CE) when the zero-shot logits or text features
are missing, these raise: training always supplies them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "AngularSeparationLoss",
    "DifferenceConfidenceAccuracyLoss",
    "LogitNormLoss",
    "MaximumMeanCalibrationErrorLoss",
    "MultiClassDifferenceConfidenceAccuracyLoss",
    "OrthogonalTextLoss",
    "SmoothedAccuracyConfidenceLoss",
    "TextMomentMatchingLoss",
    "ZeroShotRangeLoss",
    "ZeroShotRangePenaltyLoss",
]


#: The rules a loss's hyper-parameter is checked against; NaN keeps none of them.
_RULES: dict[str, Callable[[float], bool]] = {
    "> 0": lambda value: value > 0,
    ">= 0": lambda value: value >= 0,
    "in [0, 1)": lambda value: 0 <= value < 1,
}


def checked_setting(
    loss: str, name: str, value: float, rule: Literal["> 0", ">= 0", "in [0, 1)"]
) -> float:
    """``value`` when it keeps ``rule``, else a ``ValueError`` naming the loss and the setting
    (``"focal gamma must be >= 0, got -1.0"``): the losses of :mod:`medibench.calibration.losses`
    that check a hyper-parameter all do it here, so their errors read alike."""
    if not _RULES[rule](value):
        raise ValueError(f"{loss} {name} must be {rule}, got {value!r}")
    return value


class _ContextLoss(nn.Module):
    """A loss reading ``needs`` from the keyword context (module doc)."""

    needs: ClassVar[tuple[str, ...]] = ()
    default_weight: ClassVar[float] = 1.0

    def _get(self, context: dict[str, torch.Tensor | None], key: str) -> torch.Tensor:
        value = context.get(key)
        if value is None:
            raise ValueError(f"{type(self).__name__} needs {key!r}, which was not given")
        return value


class DifferenceConfidenceAccuracyLoss(_ContextLoss):
    """DCA: ``|mean confidence - accuracy|`` of the batch."""

    default_weight = 15.0

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, **_: torch.Tensor
    ) -> torch.Tensor:
        conf, pred = F.softmax(logits, dim=1).max(dim=1)
        return (conf.mean() - pred.eq(labels).to(conf.dtype).mean()).abs()


class MultiClassDifferenceConfidenceAccuracyLoss(_ContextLoss):
    """MDCA: ``mean_c |mean p_c - frequency_c|``."""

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, **_: torch.Tensor
    ) -> torch.Tensor:
        return _class_gap(logits, labels, 0.0)


class SmoothedAccuracyConfidenceLoss(_ContextLoss):
    """SMAC: MDCA against label-smoothed class frequencies."""

    def __init__(self, alpha: float = 0.05) -> None:
        super().__init__()
        self.alpha = checked_setting("smac", "alpha", alpha, "in [0, 1)")

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, **_: torch.Tensor
    ) -> torch.Tensor:
        return _class_gap(logits, labels, self.alpha)


class MaximumMeanCalibrationErrorLoss(_ContextLoss):
    """Weighted MMCE as the code computes it (module doc)."""

    def __init__(self, bandwidth: float = 0.4) -> None:
        super().__init__()
        self.bandwidth = checked_setting("mmce", "bandwidth", bandwidth, "> 0")

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, **_: torch.Tensor
    ) -> torch.Tensor:
        conf, pred = F.softmax(logits, dim=1).max(dim=1)
        right = pred.eq(labels)
        m, n = int(right.sum()), int((~right).sum())
        if m == 0 or n == 0:
            return conf.sum() * 0.0
        a, w = conf[right], conf[~right]

        def kernel_mean(x: torch.Tensor, y: torch.Tensor, wx, wy) -> torch.Tensor:
            k = torch.exp(-(x[:, None] - y[None, :]).abs() / self.bandwidth)
            return (k * wx[:, None] * wy[None, :]).mean()

        s_aa = kernel_mean(a, a, 1 - a, 1 - a)
        s_ww = kernel_mean(w, w, w, w)
        s_aw = kernel_mean(a, w, 1 - a, w)
        mmd = s_aa / (m * m + 1e-5) + s_ww / (n * n + 1e-5) - 2 * s_aw / (m * n + 1e-5)
        return torch.clamp(torch.sqrt(mmd + 1e-10), min=0.0)


class LogitNormLoss(_ContextLoss):
    """LogitNorm: cross-entropy of the unit-normalised logits over ``temperature``."""

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        self.temperature = checked_setting("logitnorm", "temperature", temperature, "> 0")

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, **_: torch.Tensor
    ) -> torch.Tensor:
        norms = torch.linalg.vector_norm(logits, dim=-1, keepdim=True) + 1e-7
        return F.cross_entropy(logits / norms / self.temperature, labels)


class ZeroShotRangePenaltyLoss(_ContextLoss):
    """ECCV_PENALTY: logits kept inside each row's zero-shot range."""

    needs = ("zs_logits",)
    default_weight = 10.0

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, **context) -> torch.Tensor:
        zs = self._get(context, "zs_logits")
        low, high = zs.min(dim=1, keepdim=True).values, zs.max(dim=1, keepdim=True).values
        return F.relu(logits - high).mean() + F.relu(low - logits).mean()


class ZeroShotRangeLoss(_ContextLoss):
    """ECCV_ZS: cross-entropy of the logits rescaled into the zero-shot range."""

    needs = ("zs_logits",)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, **context) -> torch.Tensor:
        zs = self._get(context, "zs_logits")
        low = logits.min(dim=1, keepdim=True).values
        span = torch.clamp(logits.max(dim=1, keepdim=True).values - low, min=1e-6)
        unit = torch.clamp((logits - low) / span, min=0.0, max=1.0)
        zs_low = zs.min(dim=1, keepdim=True).values
        zs_span = torch.clamp(zs.max(dim=1, keepdim=True).values - zs_low, min=1e-6)
        return F.cross_entropy(unit * zs_span + zs_low, labels)


class AngularSeparationLoss(_ContextLoss):
    """AS: the mean cosine between different classes' text features."""

    needs = ("text",)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, **context) -> torch.Tensor:
        text = self._get(context, "text")
        c = text.shape[0]
        if c < 2:
            raise ValueError("angular separation needs at least 2 classes")
        sims = text @ text.T
        return (sims.sum(dim=1) - sims.diagonal()).mean() / (c - 1)


class OrthogonalTextLoss(_ContextLoss):
    """O-TPT: the Householder orthogonality penalty on the text Gram matrix (module doc)."""

    needs = ("text",)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, **context) -> torch.Tensor:
        text = self._get(context, "text")
        gram = text @ text.T
        eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
        u = gram - eye * torch.linalg.vector_norm(gram, dim=0, keepdim=True)
        v = u / torch.linalg.vector_norm(u, dim=1, keepdim=True)
        reflected = gram - 2 * v * (v * gram).sum(dim=1, keepdim=True)
        return torch.linalg.vector_norm(reflected - eye, dim=1).mean()


class TextMomentMatchingLoss(_ContextLoss):
    """Text moment matching: the prompted text features' mean and covariance against the
    frozen model's."""

    needs = ("text", "zs_text")
    default_weight = 5.0

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, **context) -> torch.Tensor:
        tuned, frozen = self._get(context, "text"), self._get(context, "zs_text").to(logits.dtype)
        mu_t, mu_f = tuned.mean(dim=0, keepdim=True), frozen.mean(dim=0, keepdim=True)
        ct, cf = tuned - mu_t, frozen - mu_f
        n = tuned.shape[0]
        cov_gap = ct.T @ ct / n - cf.T @ cf / n
        return (mu_t - mu_f).pow(2).sum() + cov_gap.pow(2).sum()


def _class_gap(logits: torch.Tensor, labels: torch.Tensor, alpha: float) -> torch.Tensor:
    """``mean_c |mean_i p_ic - target_c|``, the class frequencies smoothed by ``alpha``."""
    probs = F.softmax(logits, dim=1)
    c = probs.shape[1]
    freq = F.one_hot(labels, c).to(probs.dtype).mean(dim=0)
    if alpha:
        freq = freq * (1 - alpha) + (1 - freq) * (alpha / (c - 1))
    return (probs.mean(dim=0) - freq).abs().mean()
