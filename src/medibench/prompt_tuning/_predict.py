"""Images through a trained method, and the prediction files ``calibration score`` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from medibench.prompt_tuning._data import LabelledImages

__all__ = ["predict_logits", "preprocess_all", "write_predictions"]

_CHUNK = 64


def preprocess_all(backbone: Any, data: LabelledImages) -> torch.Tensor:
    """Every image of ``data`` through the backbone's processor: ``(N, 3, H, W)`` float32."""
    chunks = []
    for start in range(0, len(data), _CHUNK):
        images = [data.image(i) for i in range(start, min(start + _CHUNK, len(data)))]
        chunks.append(backbone.image.preprocess(images))
    return torch.cat(chunks)


def predict_logits(
    method: Any, backbone: Any, data: LabelledImages, *, device: str = "cpu"
) -> np.ndarray:
    """The method's logits ``(N, C)`` float64 for ``data``, in eval mode, without gradients."""
    method.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(data), _CHUNK):
            images = [data.image(i) for i in range(start, min(start + _CHUNK, len(data)))]
            pixels = backbone.image.preprocess(images).to(device)
            out.append(method(pixels).logits.double().cpu().numpy())
    return np.concatenate(out)


def write_predictions(
    out: Path, parts: list[tuple[str, LabelledImages, np.ndarray]], columns: dict[str, str]
) -> list[Path]:
    """``out/predictions/NAME.npz`` per set and ``out/predictions.npz`` with all of them, each
    with ``logits``, ``probs``, ``labels``, ``ids``, ``domain`` (the set's name) and, in the
    stacked file, one column per entry of ``columns``."""
    from medibench.calibration import as_predictions, save_predictions

    written = []
    for name, data, logits in parts:
        pred = as_predictions(
            data.labels,
            logits=logits,
            source=name,
            groups={
                "ids": np.asarray(data.ids, dtype=str),
                "domain": np.full(len(data), name, dtype=f"<U{max(1, len(name))}"),
            },
        )
        written.append(save_predictions(pred, out / "predictions" / f"{name}.npz"))
    n = sum(len(d) for _, d, _ in parts)
    groups: dict[str, Any] = {
        "ids": np.concatenate([np.asarray(d.ids, dtype=str) for _, d, _ in parts]),
        "domain": np.asarray([name for name, d, _ in parts for _ in range(len(d))], dtype=str),
    }
    for key, value in columns.items():
        groups[key] = np.full(n, value, dtype=f"<U{max(1, len(value))}")
    stacked = as_predictions(
        np.concatenate([d.labels for _, d, _ in parts]),
        logits=np.concatenate([lg for _, _, lg in parts]),
        groups=groups,
        source=str(out),
    )
    written.append(save_predictions(stacked, out / "predictions.npz"))
    return written
