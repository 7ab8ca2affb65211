"""``--loss`` specs: ``NAME[:key=value,...]``, repeatable; the training loss is the sum of the
terms, each ``weight * loss(logits, labels)`` (``weight=`` among the keys, default 1).

Names: ``ce`` (cross-entropy), ``mcm`` (MVC-Bench's Multi-Class Margin loss, CE included:
``alpha``, ``beta``, ``variance_mode``, ``include_ce``), ``focal`` (``gamma``), ``ls`` (label
smoothing: ``alpha``, ``convention``), ``mbls`` (``margin``, ``alpha``), and the rest of
MVC-Bench's registry: ``dca``, ``mdca``, ``smac`` (``alpha``), ``mmce`` (``bandwidth``),
``logitnorm`` (``temperature``), ``eccv-penalty``, ``eccv-zs``, ``angular``, ``otpt``, ``tmm``:
the classes of :mod:`medibench.calibration.losses`. A loss without ``weight=`` gets the weight
MVC-Bench's ``train.py`` gives it (``dca`` 15, ``eccv-penalty`` 10, ``tmm`` 5, else 1).

Some losses read more than the logits (their ``needs``): the zero-shot logits of the batch
(``eccv-penalty``, ``eccv-zs``), the prompted class text features (``angular``, ``otpt``,
``tmm``) and the frozen ones (``tmm``); :meth:`LossTerm.__call__` takes them as keywords.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from medibench.prompt_tuning._defaults import LOSSES, option_value

__all__ = ["LOSSES", "LossTerm", "loss_classes", "parse_losses"]


@dataclass
class LossTerm:
    """One term: its ``label`` in ``train.jsonl`` (the spec's name, numbered when repeated),
    ``weight``, the loss module and the spec's options."""

    label: str
    weight: float
    loss: nn.Module
    options: dict[str, Any]

    @property
    def needs(self) -> tuple[str, ...]:
        """The context the loss reads besides the logits and labels (module doc)."""
        return tuple(getattr(self.loss, "needs", ()))

    def __call__(
        self, logits: torch.Tensor, labels: torch.Tensor, **context: torch.Tensor | None
    ) -> torch.Tensor:
        return self.weight * self.loss(logits, labels, **{k: context.get(k) for k in self.needs})


class _CrossEntropy(nn.Module):
    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, labels)


def loss_classes() -> dict[str, type[nn.Module]]:
    """``--loss`` name -> loss class (the order of :data:`LOSSES`)."""
    from medibench.calibration import losses as cal

    classes: dict[str, type[nn.Module]] = {
        "ce": _CrossEntropy,
        "mcm": cal.MultiClassMarginLoss,
        "focal": cal.FocalLoss,
        "ls": cal.LabelSmoothingLoss,
        "mbls": cal.MarginLogitSuppressionLoss,
        "dca": cal.DifferenceConfidenceAccuracyLoss,
        "mdca": cal.MultiClassDifferenceConfidenceAccuracyLoss,
        "smac": cal.SmoothedAccuracyConfidenceLoss,
        "mmce": cal.MaximumMeanCalibrationErrorLoss,
        "logitnorm": cal.LogitNormLoss,
        "eccv-penalty": cal.ZeroShotRangePenaltyLoss,
        "eccv-zs": cal.ZeroShotRangeLoss,
        "angular": cal.AngularSeparationLoss,
        "otpt": cal.OrthogonalTextLoss,
        "tmm": cal.TextMomentMatchingLoss,
    }
    assert tuple(classes) == LOSSES
    return classes


def parse_losses(specs: list[str] | tuple[str, ...]) -> list[LossTerm]:
    """The terms of ``specs`` (``["ce"]`` when empty).

    Raises:
        ValueError: an unknown name, a malformed ``key=value``, an option the loss does not take.
    """
    classes = loss_classes()
    terms: list[LossTerm] = []
    for spec in specs or ["ce"]:
        name, _, rest = spec.partition(":")
        name = name.strip()
        if name not in classes:
            raise ValueError(f"--loss {spec!r}: unknown loss {name!r} (one of {', '.join(LOSSES)})")
        options: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise ValueError(f"--loss {spec!r}: {part!r} is not key=value")
            options[key.strip()] = option_value(value.strip())
        weight = options.pop("weight", getattr(classes[name], "default_weight", 1.0))
        _check_numbers(spec, classes[name], {"weight": weight, **options})
        weight = float(weight)
        try:
            module = classes[name](**options)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"--loss {spec!r}: {exc}") from None
        label = name
        count = sum(1 for t in terms if t.label.split("#")[0] == name)
        if count:
            label = f"{name}#{count + 1}"
        terms.append(LossTerm(label, weight, module, {"weight": weight, **options}))
    return terms


def _check_numbers(spec: str, cls: type, options: dict[str, Any]) -> None:
    """Refuse, before any training, text where the loss takes a number, and NaN or infinity
    (``weight`` and every option whose default is a number)."""
    defaults = {
        k: p.default
        for k, p in inspect.signature(cls).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    defaults["weight"] = 1.0
    for key, value in options.items():
        default = defaults.get(key)
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"--loss {spec!r}: {key}={value!r} is not a number")
        if not math.isfinite(value):
            raise ValueError(f"--loss {spec!r}: {key}={value} must be a finite number")
