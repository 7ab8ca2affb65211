"""Images for judges: the labelled side-by-side collage; PNG data URLs within the judge's size
limit come from the call layer (:mod:`medibench.calls._images`).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from medibench.calls._images import ImageTooLargeError, file_data_url, fit, png_data_url

__all__ = ["ImageTooLargeError", "collage", "file_data_url", "fit", "png_data_url"]


def collage(
    images: Sequence[np.ndarray], labels: Sequence[str], *, gap: int = 8, band: int = 28
) -> np.ndarray:
    """Panels side by side at the first panel's height, each under a label band.

    Args:
        images: uint8 ``(H, W, 3)`` RGB (or ``(H, W)``, repeated into RGB) panels.
        labels: one short label per panel, written in white on black above it.
        gap: white columns between panels, in pixels.
        band: height of the label band, in pixels.

    Returns:
        ``(band + H, sum(W_i') + gap * (n - 1), 3)`` uint8, where ``W_i'`` keeps each panel's
        aspect ratio at height ``H``.
    """
    if len(images) != len(labels) or not images:
        raise ValueError("collage needs one label per image and at least one image")
    h = images[0].shape[0]
    panels = []
    for img, label in zip(images, labels, strict=True):
        rgb = np.repeat(img[:, :, None], 3, axis=2) if img.ndim == 2 else img[:, :, :3]
        if rgb.shape[0] != h:
            w = max(1, round(rgb.shape[1] * h / rgb.shape[0]))
            rgb = cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA)
        head = np.zeros((band, rgb.shape[1], 3), np.uint8)
        scale = min(0.6, 0.9 * rgb.shape[1] / max(1, 18 * len(label)))
        cv2.putText(
            head,
            label,
            (4, band - 9),
            cv2.FONT_HERSHEY_SIMPLEX,
            max(scale, 0.25),
            (255, 255, 255),
            1,
            cv2.LINE_AA,
        )
        panels.append(np.vstack([head, np.ascontiguousarray(rgb, dtype=np.uint8)]))
    spacer = np.full((h + band, gap, 3), 255, np.uint8)
    out = [panels[0]]
    for p in panels[1:]:
        out += [spacer, p]
    return np.hstack(out)
