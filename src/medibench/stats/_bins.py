"""Bins of a numeric property and the trend of a value across them.

* :func:`check_edges`: bin edges as floats, refused unless strictly increasing (two at least).
* :func:`assign_bins`: the bin of each value: ``[e0, e1), [e1, e2), ..., [e_{k-1}, e_k]`` (each
  half-open but the last, which is closed, so the top edge is in a bin); ``-1`` for a value
  outside every bin (below ``e0``, above ``e_k``); a caller counts those, never drops them
  silently.
* :func:`bin_labels`: ``"[0, 0.01)"``, ..., ``"[0.2, 1]"``.
* :func:`trend_test`: Spearman's rho of the per-sample values with the property and its
  two-sided p-value (``scipy.stats.spearmanr``: the t distribution with ``n - 2`` degrees of
  freedom), through :func:`medibench.stats.correlation`.

Example:
    >>> assign_bins([0.0, 0.01, 0.5, 1.0, 1.5], check_edges([0, 0.01, 1])).tolist()
    [0, 1, 1, 1, -1]
    >>> bin_labels([0, 0.01, 1])
    ['[0, 0.01)', '[0.01, 1]']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from medibench.stats._correlation import Correlation, correlation

__all__ = ["assign_bins", "bin_labels", "check_edges", "trend_test"]


def check_edges(edges: Sequence[float], *, name: str = "bins") -> tuple[float, ...]:
    """``edges`` as floats; ``ValueError`` (naming ``name``) unless there are two or more,
    none NaN, each larger than the one before (``-inf`` and ``inf`` are allowed ends)."""
    out = tuple(float(e) for e in edges)
    if len(out) < 2:
        raise ValueError(f"{name}: give at least two edges (one bin), got {len(out)}")
    if any(math.isnan(e) for e in out):
        raise ValueError(f"{name}: an edge is NaN")
    for a, b in zip(out, out[1:], strict=False):
        if not b > a:
            raise ValueError(
                f"{name}: edges must increase strictly, but {_text(b)} follows {_text(a)}"
            )
    return out


def assign_bins(values: Sequence[float] | np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """The bin index of each value (int array), ``-1`` outside the edges (module docstring).
    ``edges`` must be :func:`check_edges`' (strictly increasing)."""
    x = np.asarray(values, dtype=np.float64)
    e = np.asarray(edges, dtype=np.float64)
    idx = np.searchsorted(e, x, side="right") - 1  # [e_i, e_{i+1}) -> i
    idx[x == e[-1]] = e.size - 2  # the last bin is closed
    idx[(x < e[0]) | (x > e[-1]) | np.isnan(x)] = -1
    return idx


def bin_labels(edges: Sequence[float]) -> list[str]:
    """``"[a, b)"`` for each bin, ``"[a, b]"`` for the last; edges printed as ``%g``."""
    n = len(edges) - 1
    return [
        f"[{_text(a)}, {_text(b)}{']' if i == n - 1 else ')'}"
        for i, (a, b) in enumerate(zip(edges, edges[1:], strict=False))
    ]


def trend_test(
    prop: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray
) -> Correlation:
    """Spearman's rho of ``values`` with ``prop`` (paired, one per sample) and its two-sided
    p-value, as ``scipy.stats.spearmanr`` computes them.

    Raises:
        ValueError: lengths differ, fewer than 3 pairs, a missing or infinite value, or a
            constant side (rho is undefined), as :func:`medibench.stats.correlation`.
    """
    return correlation(prop, values, method="spearman", pvalue="auto")


def _text(edge: float) -> str:
    return f"{edge:g}"
