"""--loss specs: parsing, weights, gradients by finite differences, MCM at alpha = beta = 0."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from medibench.prompt_tuning import parse_losses

SPECS = [
    "ce",
    "mcm:alpha=0.1,beta=0.01",
    "mcm:variance_mode=per_sample",
    "focal:gamma=3",
    "ls:alpha=0.2,convention=mvcbench",
    "ls:alpha=0.1",
    "mbls:margin=1,alpha=0.5",
]


@pytest.mark.parametrize("spec", SPECS)
def test_gradients_match_finite_differences(spec):
    (term,) = parse_losses([spec])
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(5, 4, generator=g, dtype=torch.float64) * 2).requires_grad_()
    labels = torch.tensor([0, 3, 1, 1, 2])
    assert torch.autograd.gradcheck(lambda z: term(z, labels), (logits,), eps=1e-6, atol=1e-6)


def test_mcm_with_zero_alpha_and_beta_is_cross_entropy():
    (term,) = parse_losses(["mcm:alpha=0,beta=0"])
    logits = torch.randn(7, 3, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0])
    assert float(term(logits, labels)) == pytest.approx(
        float(F.cross_entropy(logits, labels)), abs=1e-7
    )


def test_weights_labels_and_options():
    terms = parse_losses(["ce", "mcm:alpha=0.2,beta=0.05,weight=0.5", "ce:weight=2"])
    assert [t.label for t in terms] == ["ce", "mcm", "ce#2"]
    assert terms[1].weight == 0.5 and terms[1].loss.alpha == 0.2 and terms[1].loss.beta == 0.05
    assert terms[1].options == {"weight": 0.5, "alpha": 0.2, "beta": 0.05}
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    labels = torch.tensor([0, 0])
    assert float(terms[2](logits, labels)) == pytest.approx(
        2 * float(F.cross_entropy(logits, labels))
    )
    assert [t.label for t in parse_losses([])] == ["ce"]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("hinge", "unknown loss 'hinge' \\(one of ce, mcm, focal, ls, mbls, dca, mdca, smac,"),
        ("mcm:alpha", "'alpha' is not key=value"),
        ("focal:alpha=1", "--loss 'focal:alpha=1': .*unexpected keyword argument 'alpha'"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_losses([spec])
