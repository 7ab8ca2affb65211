"""bench/_portable.py, the arithmetic of the README's model-editing table: its matrix
products, attention, convolution and distances equal torch's (values and gradients); MKL's
vector math functions keep their values; an operator that would still reach MKL is refused by
name; and a small network's training comes out bit for bit the same under every MKL code path."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._portable import LIBM, Portable  # noqa: E402

F = torch.nn.functional


def _both(fn, *shapes, seed=0):
    """``fn``'s value and gradients with torch's kernels and inside :class:`Portable`."""
    g = torch.Generator().manual_seed(seed)
    base = [torch.randn(*s, dtype=torch.float64, generator=g) for s in shapes]
    out = []
    for portable in (False, True):
        xs = [b.clone().requires_grad_() for b in base]
        if portable:
            with Portable():
                y = fn(*xs)
                y.square().sum().backward()
        else:
            y = fn(*xs)
            y.square().sum().backward()
        out.append((y.detach(), [x.grad for x in xs]))
    return out


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (torch.matmul, [(3, 5, 7), (7, 4)]),
        (torch.matmul, [(7,), (2, 7, 4)]),
        (torch.bmm, [(2, 3, 5), (2, 5, 4)]),
        (lambda x, w, b: F.linear(x, w, b), [(2, 6, 5), (3, 5), (3,)]),
        (lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0), [(4,), (3, 5), (5, 4)]),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         [(1, 2, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8)]),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(
            [[True, False, True, True, False]])), [(1, 2, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8)]),
        (lambda x, w, b: F.conv2d(x, w, b, stride=8), [(2, 3, 16, 16), (4, 3, 8, 8), (4,)]),
        (lambda x, w: F.conv2d(x, w, padding=1, stride=2), [(1, 2, 7, 9), (3, 2, 3, 3)]),
        (lambda a, b: torch.cdist(a, b), [(6, 4), (5, 4)]),
        (lambda x: x.exp() + x.sin() * x.cos() + x.tanh() + x.atan() + x.tan(), [(50,)]),
        (lambda x: x.abs().log() + x.abs().sqrt() + x.abs().log10(), [(50,)]),
    ],
)  # fmt: skip
def test_it_computes_what_torch_computes(fn, shapes):
    (want, want_grads), (got, got_grads) = _both(fn, *shapes)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_the_real_domain_is_kept_and_in_place_forms_are_routed():
    x = torch.tensor([-1.0, 0.0, 4.0], dtype=torch.float64)
    with Portable():
        log, root = x.log(), x.sqrt()
        y = x.clone().exp_()
        (m,) = torch._foreach_sqrt([x.abs()])
    assert torch.isnan(log[0]) and log[1] == float("-inf") and log[2].item() == math.log(4.0)
    assert torch.isnan(root[0]) and root[1] == 0 and root[2] == 2
    torch.testing.assert_close(y, x.exp(), rtol=1e-15, atol=0)
    assert m.tolist() == [1.0, 0.0, 2.0]


def test_an_operator_that_would_reach_mkl_is_refused_by_name():
    m, v = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    with Portable(), pytest.raises(RuntimeError, match=r"aten\.addmv\.default would compute"):
        torch.addmv(torch.zeros(3, dtype=torch.float64), m, v)
    with Portable(), pytest.raises(RuntimeError, match=r"aten\.mm\.out would compute"):
        torch.mm(m.T, m, out=torch.empty(4, 4, dtype=torch.float64))
    torch.addmv(torch.zeros(3, dtype=torch.float64), m, v)  # outside: torch's own again
    assert F.scaled_dot_product_attention.__module__ != "bench._portable"


TRAIN = """
import hashlib, sys
import torch
sys.path.insert(0, sys.argv[1])
from bench._portable import Portable
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                          torch.nn.SiLU(), torch.nn.Linear(64, 8)).double()
opt = torch.optim.Adam(net.parameters(), lr=0.05)
x = torch.randn(64, 16, dtype=torch.float64)
y = torch.randint(0, 8, (64,))
with Portable():
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x).exp().log(), y)
        loss.backward()
        opt.step()
print(hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest())
"""


def test_training_is_the_same_under_every_mkl_code_path():
    digests = set()
    for mode in ("COMPATIBLE", "AVX2", "AVX512"):
        env = {**os.environ, **LIBM, "MKL_CBWR": mode, "ATEN_CPU_CAPABILITY": "default",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # fmt: skip
        done = subprocess.run([sys.executable, "-c", TRAIN, str(ROOT)], env=env,
                              capture_output=True, text=True, check=True)  # fmt: skip
        digests.add(done.stdout.strip())
    assert len(digests) == 1
    (digest,) = digests
    assert len(digest) == 64 and digest != hashlib.sha256(b"").hexdigest()


def test_no_routed_operator_reaches_the_kernels_below():
    """A dispatch-mode spy sits below Portable's kernels: it sees the elementwise products and
    the complex kernels, never a real matrix product or vector-math function, inference mode
    included."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            first = args[0] if args else None
            if isinstance(first, (list, tuple)):  # a _foreach_ list, or a factory's sizes
                first = first[0] if first else None
            if isinstance(first, torch.Tensor):
                seen.append((func.overloadpacket.__name__, first.dtype))
            return func(*args, **(kwargs or {}))

    w = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 4, dtype=torch.float64)
    with Portable(), Spy():
        y = (x @ w).exp().sum()
        y.backward()
        with torch.inference_mode():
            z = torch.mm(x, w.detach()).sqrt_()
        (s,) = torch._foreach_exp([x])
    names = {name for name, _ in seen}
    assert {"mul", "sum", "exp", "complex"} <= names
    routed = {"mm", "exp", "sqrt", "sqrt_", "_foreach_exp"}
    assert [(n, d) for n, d in seen if n in routed and not d.is_complex] == []
    assert not z.is_inference()  # computed under no_grad inside Portable
    torch.testing.assert_close(s, x.exp(), rtol=1e-15, atol=0)
    with torch.inference_mode():  # outside, torch's own again
        assert torch.ones(1).is_inference()


def test_a_complex_input_runs_atens_own_kernel_and_versions_count():
    z = torch.randn(5, dtype=torch.complex128)
    x = torch.randn(5, dtype=torch.float64)
    v = x._version
    with Portable():
        got = z.exp()
        x.exp_()
        y = torch.empty(2, 2, dtype=torch.complex128)
        torch.mm(z[:4].reshape(2, 2), z[:4].reshape(2, 2), out=y)
    assert torch.equal(got, z.exp())
    assert x._version == v + 1
    torch.testing.assert_close(y, z[:4].reshape(2, 2) @ z[:4].reshape(2, 2))


def test_inference_mode_keeps_its_forms_inside():
    @torch.inference_mode
    def bare():
        return torch.is_grad_enabled()

    with Portable():

        @torch.inference_mode()
        def called():
            return torch.is_grad_enabled()

        with torch.inference_mode(False):
            off = torch.is_grad_enabled()
        with torch.autograd.inference_mode(mode=True):
            on = torch.is_grad_enabled()
        assert (off, on, called(), torch.is_grad_enabled()) == (True, False, False, True)
        t = torch.ones(2)
        with torch.inference_mode():
            assert not (t * 2).is_inference()
    assert bare() is False  # decorated outside: torch's own
    with torch.inference_mode():
        assert torch.ones(1).is_inference()
