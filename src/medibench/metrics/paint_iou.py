"""PaintBench's score of one problem: IoU of correctly painted pixels, averaged over thresholds.

With ``dE = delta_e76(output, answer)``, ``edit = any(input != answer)`` over the channels and
``preservation = not edit``, for each threshold ``t`` (default 0..10)::

    correct = dE <= t
    iou_t   = |correct & edit| / (|edit| + |preservation & not correct|)

and the score is the mean of ``iou_t`` (docs/protocols.md). When ``|edit| = 0`` and every preserved
pixel is correct, ``iou_t`` is 0/0 and is defined as 1.0 (nothing to paint, nothing spoiled), as
in PaintBench's scorer. :func:`paint_scores` gives the per-threshold values (PaintBench's
``cie76_<t>`` rows) and the edit and preservation accuracies from one dE map; ``dtype=np.float32``
computes dE as PaintBench does (:mod:`medibench.metrics.color`).

Example:
    >>> import numpy as np
    >>> inp = np.zeros((2, 2, 3), np.uint8)
    >>> ans = inp.copy(); ans[0, 0] = 255              # one pixel to paint white
    >>> paint_iou(ans, ans, inp), paint_iou(inp, ans, inp)
    (1.0, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal, NamedTuple

import cv2
import numpy as np

from medibench.metrics._checks import check_same_shape
from medibench.metrics.color import LabPrecision, _as_srgb_uint8, delta_e76

__all__ = ["PaintScores", "edit_region", "paint_iou", "paint_scores", "resize_cover"]


class PaintScores(NamedTuple):
    """Per-threshold PaintBench values of one problem, each a float64 array over the thresholds.

    ``iou``: the IoU of the module docstring; ``edit_accuracy``: ``|correct & edit| / |edit|``
    (1 when there is no edit pixel); ``preservation_accuracy``: ``|correct & preservation| /
    |preservation|`` (1 when there is no preserved pixel).
    """

    thresholds: np.ndarray
    iou: np.ndarray
    edit_accuracy: np.ndarray
    preservation_accuracy: np.ndarray


def paint_iou(
    output: np.ndarray, answer: np.ndarray, input: np.ndarray,  # `input`: PaintBench's name
    thresholds: Iterable[float] = range(11), *,
    resize: Literal["cover"] | None = None, dtype: LabPrecision = np.float64,
) -> float:  # fmt: skip
    """Mean over ``thresholds`` of the PaintBench IoU (module docstring), in [0, 1].

    Args:
        output: the model's image, sRGB uint8 ``(h, w, 3)``.
        answer, input: the problem's answer and input, sRGB uint8 ``(H, W, 3)``, same shape.
        thresholds: DeltaE76 tolerances (non-empty).
        resize: ``None`` (default): an output of another size is a ``ValueError``.
            ``"cover"``: resize it with nearest neighbour to cover ``(H, W)``, then centre-crop
            (PaintBench's convention, see :func:`resize_cover`).
        dtype: the precision of the Lab conversion (``np.float32``: PaintBench's).
    """
    scores = paint_scores(output, answer, input, thresholds, resize=resize, dtype=dtype)
    return float(scores.iou.mean())


def paint_scores(
    output: np.ndarray, answer: np.ndarray, input: np.ndarray,  # `input`: PaintBench's name
    thresholds: Iterable[float] = range(11), *,
    resize: Literal["cover"] | None = None, dtype: LabPrecision = np.float64,
) -> PaintScores:  # fmt: skip
    """IoU, edit and preservation accuracy at each threshold (:class:`PaintScores`); the
    arguments as :func:`paint_iou`."""
    output = _as_srgb_uint8(output, "output")
    answer = _as_srgb_uint8(answer, "answer")
    input = _as_srgb_uint8(input, "input")  # noqa: A001
    check_same_shape(answer, input, ("answer", "input"))
    if answer.ndim != 3:
        raise ValueError(f"images must be (H, W, 3), got answer.shape={answer.shape}")
    if output.shape != answer.shape:
        if resize != "cover":
            raise ValueError(
                f"output.shape={output.shape} differs from answer.shape={answer.shape}; pass "
                "resize='cover' to resize it (nearest, cover, centre-crop) as PaintBench does"
            )
        output = resize_cover(output, answer.shape[:2])
    elif resize not in (None, "cover"):
        raise ValueError(f"resize must be None or 'cover', got {resize!r}")
    ts = np.array(list(thresholds), dtype=np.float64)
    if ts.size == 0 or not np.isfinite(ts).all():
        raise ValueError("thresholds must be a non-empty list of finite numbers")
    de = delta_e76(output, answer, dtype=dtype)
    edit = edit_region(input, answer)
    correct_edit, correct_kept, n_edit, n_kept = _correct_counts(de, edit, ts)
    denom = n_edit + n_kept - correct_kept
    ious = np.where(denom == 0, 1.0, correct_edit / np.maximum(denom, 1))
    edit_acc = correct_edit / n_edit if n_edit else np.ones_like(ts)
    kept_acc = correct_kept / n_kept if n_kept else np.ones_like(ts)
    return PaintScores(ts, ious, edit_acc.astype(np.float64), kept_acc.astype(np.float64))


def edit_region(input: np.ndarray, answer: np.ndarray) -> np.ndarray:  # noqa: A002
    """PaintBench's edit region: ``any(input != answer)`` over the channels, as a boolean
    ``(H, W)`` map (uint8 ``(H, W, 3)`` images of one shape)."""
    diff = cv2.absdiff(input, answer)
    # The channel sum saturates at 255 in uint8 and is 0 only when every channel is equal
    # (a numpy reduce over a length-3 axis is 10x slower).
    total = cv2.transform(diff, np.ones((1, 3), np.float32))
    return total.reshape(input.shape[:2]) != 0


def _correct_counts(
    de: np.ndarray, edit: np.ndarray, ts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """``|dE <= t|`` among the edit and among the preserved pixels for each threshold, and the
    two pixel counts."""
    top = float(ts.max()) if ts.size else 0.0
    if np.all(ts == np.round(ts)) and 0 <= ts.min() and top <= 255:
        # Integer thresholds: dE <= t exactly when ceil(dE) <= t, so one histogram of
        # ceil(dE) (clipped above the largest t) per region gives every count.
        bins = int(top) + 2
        level = np.minimum(np.ceil(de), bins - 1).astype(np.int32)
        level += edit.astype(np.int32) * bins
        hist = np.bincount(level.ravel(), minlength=2 * bins)
        kept_hist, edit_hist = np.cumsum(hist[:bins]), np.cumsum(hist[bins:])
        at = ts.astype(np.int64)
        return edit_hist[at], kept_hist[at], int(edit_hist[-1]), int(kept_hist[-1])
    # Other thresholds: sorted errors, one binary search each (float32 dE values are exact in
    # float64, so the comparison is the one float32 makes).
    de_edit = np.sort(de[edit]).astype(np.float64)
    de_kept = np.sort(de[~edit]).astype(np.float64)
    return (
        np.searchsorted(de_edit, ts, side="right"),
        np.searchsorted(de_kept, ts, side="right"),
        de_edit.size,
        de_kept.size,
    )


def resize_cover(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize ``image`` (nearest) to cover ``size = (H, W)``, then centre-crop to it.

    Scale ``s = max(H / h, W / w)``; the resized image is ``ceil(h s) x ceil(w s)``; the crop
    starts at ``floor((new - target) / 2)`` on each axis.
    """
    h, w = image.shape[:2]
    th, tw = size
    scale = max(th / h, tw / w)
    nh, nw = max(th, math.ceil(h * scale)), max(tw, math.ceil(w * scale))
    # INTER_NEAREST_EXACT picks the same source pixels as PIL NEAREST (PaintBench); plain
    # INTER_NEAREST rounds differently at non-integer scales.
    resized = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_NEAREST_EXACT)
    top, left = (nh - th) // 2, (nw - tw) // 2
    return resized[top : top + th, left : left + tw]
