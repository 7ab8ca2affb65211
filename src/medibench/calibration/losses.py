"""Train-time calibration losses, each a plain ``torch.nn.Module`` on logits (B x C) and integer
labels (B); they return the batch mean. Needs the ``torch`` extra.

* :class:`MultiClassMarginLoss` (MVC-Bench's MCM): ``CE - alpha * mu + beta * var`` with margins
  ``m_ik = z_iy - z_ik`` for ``k != y``, ``mu`` their mean over all ``B (C - 1)`` pairs and
  ``var`` their variance over all pairs (the paper's definition, the default) or, as the
  official code defaults (``variance_mode="per_sample"``), the variance over samples of each
  sample's mean margin. ``alpha = 0.1``, ``beta = 0.01``.
* :class:`LabelSmoothingLoss`: cross-entropy against smoothed targets, in PyTorch's convention
  (``1 - alpha + alpha / K`` on the label, ``alpha / K`` elsewhere: ``F.cross_entropy(...,
  label_smoothing=alpha)``) or MVC-Bench's (``1 - alpha`` on the label, ``alpha / (K - 1)``
  elsewhere).
* :class:`FocalLoss`: ``-(1 - p_y)^gamma log p_y`` (Lin et al.; MVC-Bench's default gamma 3).
* :class:`MarginLogitSuppressionLoss` (MbLS, Liu et al. 2022): ``CE + alpha * mean_ik
  relu(max_k z_ik - z_ik - margin)`` over all B x C entries (margin 10, alpha 0.1).

The rest of MVC-Bench's registry (DCA, MDCA, SMAC, MMCE, LogitNorm, the zero-shot range losses
ECCV_PENALTY and ECCV_ZS, angular separation, O-TPT, text moment matching) lives in
:mod:`medibench.calibration._losses_mvcbench` and is exported here.
"""

from __future__ import annotations

from typing import Literal

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as exc:  # pragma: no cover - the torch extra is missing
    raise ImportError(
        "medibench.calibration.losses needs torch: pip install 'medibench[torch]'"
    ) from exc

from medibench.calibration import _losses_mvcbench
from medibench.calibration._losses_mvcbench import *  # noqa: F403 - MVC-Bench's losses, re-exported
from medibench.calibration._losses_mvcbench import checked_setting

__all__ = [
    *_losses_mvcbench.__all__,
    "FocalLoss",
    "LabelSmoothingLoss",
    "MarginLogitSuppressionLoss",
    "MultiClassMarginLoss",
    "margin_statistics",
]


def margin_statistics(
    logits: torch.Tensor,
    labels: torch.Tensor,
    variance_mode: Literal["all_pairs", "per_sample"] = "all_pairs",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mu, var)`` of the margins ``z_iy - z_ik`` (``k != y``); see the module doc."""
    b, c = logits.shape
    if c < 2:
        raise ValueError(
            f"margins need at least 2 classes, got logits of shape {tuple(logits.shape)}"
        )
    rows = torch.arange(b, device=logits.device)
    true = logits[rows, labels].unsqueeze(1)
    others = logits.masked_select(~F.one_hot(labels, c).bool()).view(b, c - 1)
    margins = true - others
    mu = margins.mean()
    if variance_mode == "all_pairs":
        return mu, (margins - mu).pow(2).mean()
    if variance_mode == "per_sample":
        return mu, margins.mean(dim=1).var(unbiased=False)
    raise ValueError(f"variance_mode must be 'all_pairs' or 'per_sample', got {variance_mode!r}")


class MultiClassMarginLoss(nn.Module):
    """MCM: ``CE - alpha * mu + beta * var`` (``include_ce=False``: the regulariser alone)."""

    def __init__(
        self,
        alpha: float = 0.1,
        beta: float = 0.01,
        variance_mode: Literal["all_pairs", "per_sample"] = "all_pairs",
        include_ce: bool = True,
    ) -> None:
        super().__init__()
        if variance_mode not in ("all_pairs", "per_sample"):
            raise ValueError(
                f"variance_mode must be 'all_pairs' or 'per_sample', got {variance_mode!r}"
            )
        self.alpha, self.beta = alpha, beta
        self.variance_mode: Literal["all_pairs", "per_sample"] = variance_mode
        self.include_ce = include_ce

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        mu, var = margin_statistics(logits, labels, self.variance_mode)
        reg = -self.alpha * mu + self.beta * var
        return F.cross_entropy(logits, labels) + reg if self.include_ce else reg


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against label-smoothed targets (``convention``: see the module doc)."""

    def __init__(
        self, alpha: float = 0.1, convention: Literal["pytorch", "mvcbench"] = "pytorch"
    ) -> None:
        super().__init__()
        checked_setting("label smoothing", "alpha", alpha, "in [0, 1)")
        if convention not in ("pytorch", "mvcbench"):
            raise ValueError(f"convention must be 'pytorch' or 'mvcbench', got {convention!r}")
        self.alpha, self.convention = alpha, convention

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        k = logits.shape[1]
        logp = F.log_softmax(logits, dim=1)
        onehot = F.one_hot(labels, k).to(logp.dtype)
        if self.convention == "pytorch":
            target = (1.0 - self.alpha) * onehot + self.alpha / k
        else:
            target = (1.0 - self.alpha) * onehot + self.alpha / (k - 1) * (1.0 - onehot)
        return -(target * logp).sum(dim=1).mean()


class FocalLoss(nn.Module):
    """``mean_i -(1 - p_iy)^gamma log p_iy``."""

    def __init__(self, gamma: float = 3.0) -> None:
        super().__init__()
        self.gamma = checked_setting("focal", "gamma", gamma, ">= 0")

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logpt = F.log_softmax(logits, dim=1).gather(1, labels.view(-1, 1)).squeeze(1)
        return (-((1.0 - logpt.exp()) ** self.gamma) * logpt).mean()


class MarginLogitSuppressionLoss(nn.Module):
    """MbLS: ``CE + alpha * mean relu(max_k z_k - z - margin)``."""

    def __init__(self, margin: float = 10.0, alpha: float = 0.1) -> None:
        super().__init__()
        self.margin, self.alpha = margin, alpha

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        gap = logits.max(dim=1, keepdim=True).values - logits
        return F.cross_entropy(logits, labels) + self.alpha * F.relu(gap - self.margin).mean()
