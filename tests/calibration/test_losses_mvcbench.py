"""MVC-Bench's losses (its ``losses.py``), each against the formula restated here in plain
Python loops, gradients by finite differences (float64), and through ``--loss`` with the
weights of MVC-Bench's ``train.py``."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from medibench.calibration import losses as cal  # noqa: E402
from medibench.prompt_tuning import parse_losses  # noqa: E402

G = torch.Generator().manual_seed(3)
LOGITS = (torch.randn(8, 4, generator=G, dtype=torch.float64) * 2).tolist()
LABELS = [0, 3, 1, 1, 2, 0, 3, 2]
ZS = (torch.randn(8, 4, generator=G, dtype=torch.float64) * 1.5).tolist()
TEXT = torch.nn.functional.normalize(torch.randn(4, 6, generator=G, dtype=torch.float64), dim=-1)
ZS_TEXT = torch.nn.functional.normalize(torch.randn(4, 6, generator=G, dtype=torch.float64), dim=-1)


def softmax(row):
    top = max(row)
    e = [math.exp(v - top) for v in row]
    return [v / sum(e) for v in e]


def ce(row, y):
    top = max(row)
    return -(row[y] - top - math.log(sum(math.exp(v - top) for v in row)))


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs)


def class_gap(alpha):
    probs = [softmax(r) for r in LOGITS]
    c = len(LOGITS[0])
    total = 0.0
    for k in range(c):
        freq = mean(1.0 if y == k else 0.0 for y in LABELS)
        target = freq * (1 - alpha) + (1 - freq) * alpha / (c - 1) if alpha else freq
        total += abs(mean(p[k] for p in probs) - target)
    return total / c


def dca():
    probs = [softmax(r) for r in LOGITS]
    conf = mean(max(p) for p in probs)
    acc = mean(1.0 if p.index(max(p)) == y else 0.0 for p, y in zip(probs, LABELS, strict=True))
    return abs(conf - acc)


def mmce(logits=LOGITS, labels=LABELS):
    probs = [softmax(r) for r in logits]
    conf = [max(p) for p in probs]
    right = [p.index(max(p)) == y for p, y in zip(probs, labels, strict=True)]
    a = [r for r, ok in zip(conf, right, strict=True) if ok]
    w = [r for r, ok in zip(conf, right, strict=True) if not ok]
    if not a or not w:
        return 0.0

    def k(x, y):
        return math.exp(-abs(x - y) / 0.4)

    s_aa = mean(k(x, y) * (1 - x) * (1 - y) for x in a for y in a)
    s_ww = mean(k(x, y) * x * y for x in w for y in w)
    s_aw = mean(k(x, y) * (1 - x) * y for x in a for y in w)
    m, n = len(a), len(w)
    mmd = s_aa / (m * m + 1e-5) + s_ww / (n * n + 1e-5) - 2 * s_aw / (m * n + 1e-5)
    return math.sqrt(mmd + 1e-10)


def logitnorm(t=1.0):
    out = []
    for row, y in zip(LOGITS, LABELS, strict=True):
        norm = math.sqrt(sum(v * v for v in row)) + 1e-7
        out.append(ce([v / norm / t for v in row], y))
    return mean(out)


def eccv_penalty():
    total_hi = total_lo = 0.0
    for row, zs in zip(LOGITS, ZS, strict=True):
        for v in row:
            total_hi += max(0.0, v - max(zs))
            total_lo += max(0.0, min(zs) - v)
    n = len(LOGITS) * len(LOGITS[0])
    return total_hi / n + total_lo / n


def eccv_zs():
    out = []
    for row, zs, y in zip(LOGITS, ZS, LABELS, strict=True):
        lo, span = min(row), max(row) - min(row)
        zlo, zspan = min(zs), max(zs) - min(zs)
        out.append(ce([(v - lo) / span * zspan + zlo for v in row], y))
    return mean(out)


def dot(u, v):
    return sum(a * b for a, b in zip(u, v, strict=True))


def angular(text):
    t = text.tolist()
    c = len(t)
    return mean(sum(dot(t[i], t[j]) for j in range(c) if j != i) / (c - 1) for i in range(c))


def otpt(text):
    t = text.tolist()
    c = len(t)
    gram = [[dot(t[i], t[j]) for j in range(c)] for i in range(c)]
    col = [math.sqrt(sum(gram[i][j] ** 2 for i in range(c))) for j in range(c)]
    total = 0.0
    for i in range(c):
        u = [gram[i][j] - (col[i] if j == i else 0.0) for j in range(c)]
        nu = math.sqrt(dot(u, u))
        v = [x / nu for x in u]
        # the Householder reflection I - 2 v v^T applied to row i of the Gram matrix
        h = [
            sum(((1.0 if a == b else 0.0) - 2 * v[a] * v[b]) * gram[i][b] for b in range(c))
            for a in range(c)
        ]
        total += math.sqrt(sum((h[a] - (1.0 if a == i else 0.0)) ** 2 for a in range(c)))
    return total / c


def tmm(text, zs_text):
    t, f = text.tolist(), zs_text.tolist()
    n, d = len(t), len(t[0])
    mt = [mean(r[k] for r in t) for k in range(d)]
    mf = [mean(r[k] for r in f) for k in range(d)]
    cost = sum((a - b) ** 2 for a, b in zip(mt, mf, strict=True))
    for a in range(d):
        for b in range(d):
            ct = sum((r[a] - mt[a]) * (r[b] - mt[b]) for r in t) / n
            cf = sum((r[a] - mf[a]) * (r[b] - mf[b]) for r in f) / n
            cost += (ct - cf) ** 2
    return cost


CASES = {
    "dca": (cal.DifferenceConfidenceAccuracyLoss(), dca),
    "mdca": (cal.MultiClassDifferenceConfidenceAccuracyLoss(), lambda: class_gap(0.0)),
    "smac": (cal.SmoothedAccuracyConfidenceLoss(), lambda: class_gap(0.05)),
    "smac-0.2": (cal.SmoothedAccuracyConfidenceLoss(alpha=0.2), lambda: class_gap(0.2)),
    "mmce": (cal.MaximumMeanCalibrationErrorLoss(), mmce),
    "logitnorm": (cal.LogitNormLoss(), logitnorm),
    "logitnorm-t": (cal.LogitNormLoss(temperature=0.5), lambda: logitnorm(0.5)),
    "eccv-penalty": (cal.ZeroShotRangePenaltyLoss(), eccv_penalty),
    "eccv-zs": (cal.ZeroShotRangeLoss(), eccv_zs),
}


def context():
    return {"zs_logits": torch.tensor(ZS, dtype=torch.float64)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_logit_losses_equal_their_formula(name):
    loss, formula = CASES[name]
    z, y = torch.tensor(LOGITS, dtype=torch.float64), torch.tensor(LABELS)
    assert float(loss(z, y, **context())) == pytest.approx(formula(), rel=1e-12, abs=1e-14)


def test_the_case_is_not_degenerate():
    """Some right and some wrong, logits outside the zero-shot range on both sides."""
    assert 0 < mmce() and 0 < eccv_penalty() and 0 < dca()
    probs = [softmax(r) for r in LOGITS]
    right = sum(p.index(max(p)) == y for p, y in zip(probs, LABELS, strict=True))
    assert 0 < right < len(LABELS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_logit_losses_gradients_by_finite_differences(name):
    loss, _ = CASES[name]
    z = torch.tensor(LOGITS, dtype=torch.float64).requires_grad_()
    y = torch.tensor(LABELS)
    assert torch.autograd.gradcheck(lambda v: loss(v, y, **context()), (z,), eps=1e-6, atol=1e-7)


FEATURE_CASES = {
    "angular": (cal.AngularSeparationLoss(), lambda t: angular(t)),
    "otpt": (cal.OrthogonalTextLoss(), lambda t: otpt(t)),
    "tmm": (cal.TextMomentMatchingLoss(), lambda t: tmm(t, ZS_TEXT)),
}


@pytest.mark.parametrize("name", sorted(FEATURE_CASES))
def test_text_losses_equal_their_formula_and_gradients(name):
    loss, formula = FEATURE_CASES[name]
    z, y = torch.tensor(LOGITS, dtype=torch.float64), torch.tensor(LABELS)
    value = loss(z, y, text=TEXT, zs_text=ZS_TEXT)
    assert float(value) == pytest.approx(formula(TEXT), rel=1e-12, abs=1e-14)
    t = TEXT.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda v: loss(z, y, text=v, zs_text=ZS_TEXT), (t,), eps=1e-6, atol=1e-7
    )


def test_mmce_is_zero_when_every_sample_is_right_or_every_one_wrong():
    z = torch.tensor([[3.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    loss = cal.MaximumMeanCalibrationErrorLoss()
    assert float(loss(z, torch.tensor([0, 1]))) == 0.0 == mmce(z.tolist(), [0, 1])
    assert float(loss(z, torch.tensor([1, 0]))) == 0.0


def test_identical_text_features_give_zero_moment_gap_and_orthonormal_ones_zero_angle():
    eye = torch.eye(4, 6, dtype=torch.float64)
    z, y = torch.tensor(LOGITS, dtype=torch.float64), torch.tensor(LABELS)
    assert float(cal.TextMomentMatchingLoss()(z, y, text=ZS_TEXT, zs_text=ZS_TEXT)) == 0.0
    assert float(cal.AngularSeparationLoss()(z, y, text=eye)) == 0.0


def test_a_missing_context_is_named():
    z, y = torch.tensor(LOGITS), torch.tensor(LABELS)
    with pytest.raises(ValueError, match="ZeroShotRangeLoss needs 'zs_logits'"):
        cal.ZeroShotRangeLoss()(z, y)
    with pytest.raises(ValueError, match="AngularSeparationLoss needs 'text'"):
        cal.AngularSeparationLoss()(z, y)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("smac:alpha=1.5", "smac alpha must be in \\[0, 1\\)"),
        ("logitnorm:temperature=0", "logitnorm temperature must be > 0"),
        ("mmce:bandwidth=-1", "mmce bandwidth must be > 0"),
        ("dca:gamma=2", "unexpected keyword argument 'gamma'"),
    ],
)
def test_bad_options_are_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_losses([spec])


def test_specs_carry_mvcbench_weights_and_the_context():
    terms = parse_losses(["dca", "eccv-penalty", "tmm", "smac", "dca:weight=2"])
    assert [t.weight for t in terms] == [15.0, 10.0, 5.0, 1.0, 2.0]
    assert [t.needs for t in terms] == [(), ("zs_logits",), ("text", "zs_text"), (), ()]
    z, y = torch.tensor(LOGITS, dtype=torch.float64), torch.tensor(LABELS)
    value = terms[1](z, y, **context(), text=TEXT)
    assert float(value) == pytest.approx(10 * eccv_penalty(), rel=1e-12)
