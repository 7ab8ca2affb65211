"""Arithmetic that comes out the same on every x86-64 CPU, for the README's model-editing table.

On one thread and ATen's portable kernels (``ATEN_CPU_CAPABILITY=default``) PyTorch still hands
three kinds of work to code that picks its instructions by the CPU it finds (each measured on an
Intel Xeon Sapphire Rapids by the op's digest under ``MKL_CBWR`` COMPATIBLE, AVX2, AVX512 and
with ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-FMA``):

- matrix products (``mm``, ``addmm``, ``bmm``, convolutions, the CPU flash attention, ``cdist``)
  go to MKL, which takes another kernel on an AMD EPYC than on an Intel Xeon whatever
  ``MKL_CBWR`` says (``MKL_CBWR=COMPATIBLE`` gave one table on an AMD EPYC and another here);
- ``exp``, ``log``, ``sin``, ``cos``, ``sqrt``, ``tanh``, ``tan``, ``atan``, ``log10`` (and
  ``erfinv``) of a tensor go to MKL's vector math (VML), whose results move with its code path;
- ``pow``, ``sigmoid``, ``silu``, ``softmax`` and ``randn`` go to glibc's libm, which picks an
  FMA variant when the CPU has FMA and AVX2 (the tiny LLaVA's initial weights change with it).

:class:`Portable` computes the first two kinds itself: matrix products as elementwise products
and sums (ATen's portable kernels; autograd differentiates them with the same kernels), the VML
functions through the complex kernels, which call libm; and it refuses, by name, an operator
that would still reach MKL. :data:`LIBM` hides FMA from glibc so that libm takes its SSE2
variant everywhere (read when a process starts: a child's environment). The README's table is
then byte-identical under ``MKL_CBWR`` COMPATIBLE, AVX2 and AVX512 (measured;
``tests/bench/test_portable.py`` holds a small network's training to it).
"""

from __future__ import annotations

import warnings
from typing import Any

#: glibc's tunable that hides FMA (and FMA4, AVX2) from libm's variant choice.
LIBM = {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4"}

#: aten operators that compute with MKL or oneDNN (or call it inside) on the CPU and that
#: :class:`Portable` does not compute itself: refused by name.
REFUSED = frozenset(
    {
        "addbmm", "addmv", "vdot", "tensordot", "convolution", "convolution_backward",
        "_convolution", "mkldnn_convolution", "_cdist_forward", "_cdist_backward",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward", "erfinv", "asin", "acos",
    }
)  # fmt: skip


def matmul(a: Any, b: Any) -> Any:
    """``torch.matmul``'s result (broadcast batch dimensions, 1-D operands) as a sum of
    elementwise products over the shared dimension."""
    squeeze = []
    if a.dim() == 1:
        a, squeeze = a.unsqueeze(0), [*squeeze, -2]
    if b.dim() == 1:
        b, squeeze = b.unsqueeze(-1), [*squeeze, -1]
    out = (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)
    for dim in sorted(squeeze):
        out = out.squeeze(dim)
    return out


def _addmm(bias: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> Any:
    out = matmul(a, b)
    out = out if alpha == 1 else out * alpha
    return out + (bias if beta == 1 else bias * beta) if beta != 0 else out


def _complex(x: Any, imag: bool = False) -> Any:
    import torch

    zero = torch.zeros_like(x)
    return torch.complex(zero, x) if imag else torch.complex(x, zero)


def _nan_below(x: Any, out: Any, low: float = 0.0) -> Any:
    return out.masked_fill(x < low, float("nan"))


#: MKL's vector math (VML) computes these on real tensors (``exp``, ``log``, ``sin``, ``cos``,
#: ``sqrt``, ``tanh``, ``tan``, ``atan``, ``log10``): the same values through the complex
#: kernels, which call libm (pinned by :data:`LIBM`). ``sqrt`` of a real through ``csqrt`` is
#: IEEE's correctly rounded root; ``log`` and ``sqrt`` of a negative number are NaN as for reals.
def _arith() -> dict[str, Any]:
    import torch

    return {
        "mm": matmul, "bmm": matmul, "mv": matmul, "dot": matmul, "matmul": matmul,
        "addmm": _addmm, "baddbmm": _addmm,
        "exp": lambda x: torch.exp(_complex(x)).real,
        "sin": lambda x: torch.exp(_complex(x, imag=True)).imag,
        "cos": lambda x: torch.exp(_complex(x, imag=True)).real,
        "tanh": lambda x: torch.tanh(_complex(x)).real,
        "tan": lambda x: torch.tan(_complex(x)).real,
        "atan": lambda x: torch.atan(_complex(x)).real,
        "log": lambda x: _nan_below(x, torch.log(_complex(x)).real),
        "log10": lambda x: _nan_below(x, torch.log10(_complex(x)).real),
        "sqrt": lambda x: _nan_below(x, torch.sqrt(_complex(x)).real),
    }  # fmt: skip


def attention(
    q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
    is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
) -> Any:  # fmt: skip
    """``scaled_dot_product_attention`` as PyTorch's math backend states it (a fully masked row
    attends to nothing: zeros)."""
    import torch

    if dropout_p:
        raise RuntimeError("portable attention: dropout_p must be 0 (the table runs in eval)")
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        n, m = scores.shape[-2:]
        attn_mask = torch.ones(n, m, dtype=torch.bool, device=q.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    empty = torch.isneginf(scores).all(-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    return matmul(weights, v)


def conv2d(
    x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
    dilation: Any = 1, groups: int = 1,
) -> Any:  # fmt: skip
    """``conv2d`` as im2col (a copy) and :func:`matmul`."""
    import torch

    if groups != 1 or isinstance(padding, str):
        raise RuntimeError("portable conv2d: groups=1 and numeric padding only")
    pair = torch.nn.modules.utils._pair
    batch = x.dim() == 4
    x = x if batch else x.unsqueeze(0)
    cols = torch.nn.functional.unfold(x, weight.shape[-2:], dilation, padding, stride)
    out = matmul(weight.reshape(weight.shape[0], -1), cols)  # (N, out, L)
    if bias is not None:
        out = out + bias[:, None]
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    kh, kw = weight.shape[-2:]
    h = (x.shape[-2] + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    w = (x.shape[-1] + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = out.reshape(x.shape[0], weight.shape[0], h, w)
    return out if batch else out.squeeze(0)


def cdist(x1: Any, x2: Any, p: float = 2.0, compute_mode: Any = None) -> Any:
    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 2.0:
        return diff.square().sum(-1).sqrt()
    return diff.pow(p).sum(-1).pow(1.0 / p)


def _structural() -> list[tuple[Any, str, Any]]:
    """Functions whose aten kernels call MKL from inside (flash attention, im2col convolution,
    ``cdist``), replaced where transformers, torch's modules and the editors look them up (at
    call time) so that autograd records the elementwise operators they are written in."""
    import torch
    import torch.nn.functional as F

    return [(F, "scaled_dot_product_attention", attention), (F, "conv2d", conv2d),
            (torch, "cdist", cdist)]  # fmt: skip


def _tensor_overloads(packet: Any) -> list[Any]:
    """The overloads of an aten operator that take a tensor (``exp.int`` and the like compute
    on Python numbers)."""
    ops = [getattr(packet, name) for name in packet.overloads()]
    return [op for op in ops if any("Tensor" in str(a.type) for a in op._schema.arguments)]


def _is_complex(args: Any) -> bool:
    """Whether the first tensor among ``args`` (or in a first list argument) is complex."""
    for a in args:
        if isinstance(a, (list, tuple)) and a:
            a = a[0]
        if hasattr(a, "is_complex"):
            return a.is_complex()
    return False


class _Kernels:
    """The kernels :class:`Portable` registers at ATen's ``ADInplaceOrView`` key: below autograd
    (which records the operator with its own derivative, as for ATen's kernel), above the CPU
    kernels. Inside a kernel that key is excluded, so the operators it calls (the complex
    kernels, the elementwise products, ATen's own kernel for a complex input) reach the CPU's
    kernels directly."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.below = torch._C.DispatchKeySet(torch._C.DispatchKey.ADInplaceOrView)

    def routed(self, op: Any, impl: Any) -> Any:
        def kernel(*args: Any, **kwargs: Any) -> Any:
            with self.torch._C._ExcludeDispatchKeyGuard(self.below):
                return op(*args, **kwargs) if _is_complex(args) else impl(*args, **kwargs)

        return kernel

    def in_place(self, op: Any, impl: Any) -> Any:
        def kernel(*args: Any, **kwargs: Any) -> Any:
            with self.torch._C._ExcludeDispatchKeyGuard(self.below):
                out = (op(*args, **kwargs) if _is_complex(args)
                       else args[0].copy_(impl(*args, **kwargs)))  # fmt: skip
            self.torch.autograd.graph.increment_version(out)
            return out

        return kernel

    def foreach(self, op: Any, impl: Any, *, inplace: bool) -> Any:
        def kernel(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            with self.torch._C._ExcludeDispatchKeyGuard(self.below):
                if _is_complex([tensors]):
                    outs = op(tensors, *args, **kwargs)
                else:
                    outs = [impl(t) for t in tensors]
                    if inplace:
                        for t, v in zip(tensors, outs, strict=True):
                            t.copy_(v)
            if not inplace:
                return outs
            self.torch.autograd.graph.increment_version(list(tensors))
            return None

        return kernel

    def refused(self, op: Any, *, always: bool) -> Any:
        name = f"aten.{op._schema.name.split('::')[1]}.{op._overloadname}"

        def kernel(*args: Any, **kwargs: Any) -> Any:
            if always or not _is_complex(args):
                raise RuntimeError(
                    f"portable arithmetic: {name} would compute with MKL; route it in "
                    "bench/_portable.py"
                )
            with self.torch._C._ExcludeDispatchKeyGuard(self.below):
                out = op(*args, **kwargs)
            written = [kwargs.get(a.name) for a in op._schema.arguments
                       if a.alias_info is not None and a.alias_info.is_write]  # fmt: skip
            if any(w is not None for w in written):
                self.torch.autograd.graph.increment_version([w for w in written if w is not None])
            return out

        return kernel


def _inference_as_no_grad(torch: Any) -> Any:
    """``torch.inference_mode`` as ``no_grad``: an inference tensor skips the ``ADInplaceOrView``
    key (and the kernels there), so inside :class:`Portable` generation runs under ``no_grad``
    (the same kernels, the same values). As torch's: a context manager or a decorator, with or
    without ``(mode)``."""
    import functools

    class inference_mode:  # noqa: N801 (torch's name)
        def __new__(cls, mode: Any = True) -> Any:
            if callable(mode):  # ``@torch.inference_mode`` without parentheses
                return cls()(mode)
            return super().__new__(cls)

        def __init__(self, mode: bool = True) -> None:
            self.mode, self._inner = mode, None

        def __enter__(self) -> None:
            if self.mode:
                self._inner = torch.no_grad()
                self._inner.__enter__()

        def __exit__(self, *exc: object) -> None:
            if self._inner is not None:
                self._inner.__exit__(*exc)
                self._inner = None

        def __call__(self, func: Any) -> Any:
            @functools.wraps(func)
            def run(*args: Any, **kwargs: Any) -> Any:
                with inference_mode(self.mode):
                    return func(*args, **kwargs)

            return run

        def clone(self) -> Any:
            return inference_mode(self.mode)

    return inference_mode


def _kernels(torch: Any) -> list[tuple[Any, Any]]:
    """(operator overload, kernel) for every routed and refused operator."""
    k, arith, out = _Kernels(torch), _arith(), []
    aten = torch.ops.aten
    for name, impl in arith.items():
        for prefix, suffix in (("", ""), ("", "_"), ("_foreach_", ""), ("_foreach_", "_")):
            try:
                packet = getattr(aten, prefix + name + suffix)
            except AttributeError:
                continue
            for op in _tensor_overloads(packet):
                if prefix:
                    kernel = k.foreach(op, impl, inplace=bool(suffix))
                elif op._overloadname not in ("default", "Tensor"):
                    kernel = k.refused(op, always=False)
                elif suffix:
                    kernel = k.in_place(op, impl)
                else:
                    kernel = k.routed(op, impl)
                out.append((op, kernel))
    for name in sorted(REFUSED):
        out += [(op, k.refused(op, always=True)) for op in _tensor_overloads(getattr(aten, name))]
    return out


class Portable:
    """Inside ``with Portable():`` matrix products are sums of elementwise products, MKL's vector
    math goes through libm, and an operator that would still reach MKL raises ``RuntimeError``
    naming it.

    The routed and refused operators get kernels of their own at ATen's ``ADInplaceOrView`` key
    (a ``torch.library`` registration, undone on exit): every other operator runs ATen's kernel
    at no extra cost. (A Python dispatch mode, which sees every operator, computed the same
    table in 1.22x the CPU time: 141 s against 116 s, one process each, side by side.) An
    inference tensor skips that key, so ``torch.inference_mode`` is ``no_grad`` inside (the same
    kernels, the same values)."""

    def __enter__(self) -> Portable:
        import torch

        no_grad = _inference_as_no_grad(torch)
        routed = [*_structural(), (torch, "inference_mode", no_grad),
                  (torch.autograd, "inference_mode", no_grad)]  # fmt: skip
        self._saved = [(owner, name, getattr(owner, name)) for owner, name, _ in routed]
        for owner, name, impl in routed:
            setattr(owner, name, impl)
        self._lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            # the in-place and out= forms have ATen kernels at that key (version counters):
            # the kernels here replace them and count versions themselves
            warnings.filterwarnings("ignore", "Warning only once for all operators")
            for op, kernel in _kernels(torch):
                self._lib.impl(op, kernel, "ADInplaceOrView")
        return self

    def __exit__(self, *exc: object) -> None:
        self._lib._destroy()
        for owner, name, old in self._saved:
            setattr(owner, name, old)
