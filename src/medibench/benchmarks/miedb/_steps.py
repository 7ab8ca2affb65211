"""Steps the MieDB-100k protocols share: the official scripts' image reading and their row
indexing quirk (:func:`official_rows_bug`), the perception label, and the size checks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from medibench.datasets import SampleImages, size_mismatch
from medibench.metrics import overlay_to_mask
from medibench.protocols import ProtocolResult, resize_noted
from medibench.samples import Sample

__all__ = [
    "at_input_size",
    "imread_color",
    "official_rows_bug",
    "overlay_colours",
    "perception_label",
    "usable_target",
]


def imread_color(path: str | Path, problem: str, *, keep_alpha: bool = False) -> np.ndarray:
    """``cv2.imread(path)`` (IMREAD_COLOR) in RGB order; ``ImageReadError(path, problem)``
    when OpenCV cannot decode the file.

    ``keep_alpha``: when the file has transparent pixels, return ``(H, W, 4)``: the same colours
    plus the alpha, so that ``as_rgb(..., alpha="drop")`` drops it with a note.
    """
    from medibench.io import ImageReadError, may_have_alpha

    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise ImageReadError(path, f"could not be read ({exc.strerror or exc})") from exc
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise ImageReadError(path, problem)
    rgb = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    if keep_alpha and may_have_alpha(data.tobytes()):
        full = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
        if (
            full is not None
            and full.ndim == 3
            and full.shape[2] == 4
            and full.dtype == np.uint8
            and full.shape[:2] == rgb.shape[:2]
            and (full[:, :, 3] < 255).any()
        ):
            return np.dstack([rgb, full[:, :, 3]])
    return rgb


def official_rows_bug(label: np.ndarray) -> list[int]:
    """The rows the shipped "background" metric sets to 255: the paper protocol's named quirk.

    ``PSNR-SSIM-perception.py`` means to blank the label out of both images before a full-image
    PSNR/SSIM, but writes ``img[inverse_mask] = 255`` with ``inverse_mask = 1 - label`` as a 0/1
    uint8 array of shape (H, W): NumPy reads that as integer indexing by its values, so it sets
    whole *rows* 0 (where some pixel is labelled) and 1 (where some pixel is not) to 255, and the
    rest of both images stays as it is. ``miedb@paper`` reproduces exactly this; ``miedb@1``
    compares the pixels outside the label instead.

    Example:
        >>> official_rows_bug(np.array([[0, 1], [0, 0]], dtype=bool))
        [0, 1]
        >>> official_rows_bug(np.zeros((2, 2), dtype=bool))
        [1]
    """
    return [r for r, present in ((0, bool(label.any())), (1, not bool(label.all()))) if present]


def overlay_colours(res: ProtocolResult, sample: Sample, names: Sequence[str]) -> list[str]:
    """A perception sample's overlay colours; without any, ``names`` are missing with that
    reason and the list is empty."""
    colours: list[str] = list(sample.overlay_color)
    if not colours:
        res.missing(names, "perception sample without an overlay colour")
    return colours


def perception_label(
    sample: Sample, images: SampleImages, colours: Sequence[str]
) -> tuple[np.ndarray | None, str]:
    """The perception label at the input's size and where it came from (or None and why)."""
    inp = images.input
    if images.mask is not None:
        off = size_mismatch(sample, "mask", images.mask, "input", inp)
        if off:
            return None, f"{off}: the stored mask cannot be the label"
        return images.mask, "stored mask"
    if images.target is None:
        return None, "the sample has neither a stored mask nor a target image"
    off = size_mismatch(sample, "target", images.target, "input", inp)
    if off:
        return None, f"{off}: its overlay cannot be read"
    return overlay_to_mask(images.target, inp, colours), "target overlay"


def usable_target(
    res: ProtocolResult,
    names: Sequence[str],
    sample: Sample,
    inp: np.ndarray,
    target: np.ndarray | None,
    *,
    official: bool = False,
) -> np.ndarray | None:
    """The target when it is there at the input's size; else ``None``, and ``names`` are
    missing with the reason."""
    if target is None:
        why = "the sample has no target image"
    elif off := size_mismatch(sample, "target", target, "input", inp):
        why = f"{off}{'; the official scripts assume equal sizes' if official else ''}"
    else:
        return target
    res.missing(names, why)
    return None


def at_input_size(res: ProtocolResult, pred: np.ndarray, inp: np.ndarray) -> np.ndarray:
    h, w = inp.shape[:2]
    how = "(bilinear, cv2.INTER_LINEAR)"
    return resize_noted(
        pred, (w, h), method="cv2-bilinear", notes=res.notes, how=how, to="the input's "
    )
