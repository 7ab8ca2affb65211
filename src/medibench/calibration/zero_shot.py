"""Zero-shot CLIP-style classification from class-name prompt templates, with a model from a
local folder, producing the predictions the calibration metrics score.

The model is a Hugging Face ``transformers`` ``CLIPModel`` saved with its tokenizer and image
processor (``save_pretrained``) in a folder: BiomedCLIP, PubMedCLIP or PLIP exported to the CLIP
format, or any CLIP. ``open_clip`` is not used: it needs torchvision, which medibench's torch
pin does not allow; nothing is downloaded (``local_files_only``).

For class ``c`` and template ``t`` (a string with one ``{}``), the text embedding is the
L2-normalised projection of ``t.format(name_c)``; a class's embedding is the normalised mean of
its templates' embeddings (CLIP's prompt ensembling), or, with :func:`zero_shot_by_template`,
each template alone. The logits are ``exp(logit_scale) * <image embedding, class embedding>``
with both normalised, as ``CLIPModel``'s ``logits_per_image``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medibench.calibration._inputs import Predictions, as_predictions
from medibench.models._weights import import_transformers, transformers_folder

__all__ = ["ZeroShotCLIP", "zero_shot_by_template", "zero_shot_predictions"]


class ZeroShotCLIP:
    """A local ``CLIPModel`` with its tokenizer and image processor (CPU unless ``device``)."""

    def __init__(self, model_path: str | Path, *, device: str = "cpu") -> None:
        path = transformers_folder(model_path, "CLIP model")
        self._torch, transformers = import_transformers("zero-shot classification")
        self.path, self.device = path, device
        try:
            model: Any = transformers.CLIPModel.from_pretrained(path, local_files_only=True)
            self.model = model.to(device).eval()
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            self.processor = transformers.AutoImageProcessor.from_pretrained(
                path, local_files_only=True
            )
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"{path}: cannot load a CLIP model, tokenizer and processor: {exc}"
            ) from exc

    def text_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised text projections (len(texts) x D)."""
        torch = self._torch
        enc = self.tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt")
        with torch.no_grad():
            pooled = self.model.text_model(**enc.to(self.device)).pooler_output
            emb = self.model.text_projection(pooled)
        return _normalise(emb.double().cpu().numpy())

    def image_embeddings(self, images: Sequence[Any], *, batch_size: int = 16) -> np.ndarray:
        """L2-normalised image projections (len(images) x D); images are arrays or PIL images."""
        torch = self._torch
        out = []
        for start in range(0, len(images), batch_size):
            batch = [_rgb(im) for im in images[start : start + batch_size]]
            pixels = self.processor(images=batch, return_tensors="pt").pixel_values
            with torch.no_grad():
                pooled = self.model.vision_model(pixel_values=pixels.to(self.device)).pooler_output
                out.append(self.model.visual_projection(pooled).double().cpu().numpy())
        return _normalise(np.concatenate(out, axis=0))

    @property
    def logit_scale(self) -> float:
        return float(self.model.logit_scale.detach().exp())


def zero_shot_predictions(
    model: ZeroShotCLIP | str | Path,
    images: Sequence[Any],
    labels: Sequence[int] | np.ndarray,
    class_names: Sequence[str],
    *,
    templates: Sequence[str] = ("a photo of {}.",),
    groups: Mapping[str, Any] | None = None,
    batch_size: int = 16,
) -> Predictions:
    """Zero-shot predictions with the templates ensembled (module doc)."""
    clip = model if isinstance(model, ZeroShotCLIP) else ZeroShotCLIP(model)
    _check(class_names, templates, images, labels)
    classes = np.stack(
        [
            clip.text_embeddings([t.format(name) for t in templates]).mean(axis=0)
            for name in class_names
        ]
    )
    logits = (
        clip.logit_scale
        * clip.image_embeddings(images, batch_size=batch_size)
        @ _normalise(classes).T
    )
    return as_predictions(labels, logits=logits, groups=groups, source=f"zero-shot {clip.path}")


def zero_shot_by_template(
    model: ZeroShotCLIP | str | Path,
    images: Sequence[Any],
    labels: Sequence[int] | np.ndarray,
    class_names: Sequence[str],
    templates: Sequence[str],
    *,
    batch_size: int = 16,
) -> Predictions:
    """One set of predictions per template, stacked, with a ``template`` group column (for
    :func:`medibench.calibration.analysis.sensitivity`)."""
    clip = model if isinstance(model, ZeroShotCLIP) else ZeroShotCLIP(model)
    _check(class_names, templates, images, labels)
    image = clip.image_embeddings(images, batch_size=batch_size)
    logits, column = [], []
    for t in templates:
        text = clip.text_embeddings([t.format(name) for name in class_names])
        logits.append(clip.logit_scale * image @ text.T)
        column += [t] * len(images)
    return as_predictions(
        np.tile(np.asarray(labels), len(templates)),
        logits=np.concatenate(logits),
        groups={"template": np.asarray(column)},
        source=f"zero-shot {clip.path}",
    )


def _check(class_names, templates, images, labels) -> None:
    if len(class_names) < 2:
        raise ValueError(
            f"zero-shot classification needs at least 2 class names, got {class_names!r}"
        )
    if not templates:
        raise ValueError("no prompt templates")
    for t in templates:
        if t.count("{}") != 1:
            raise ValueError(f"prompt template {t!r} must contain exactly one '{{}}' for the class")
    if len(images) != len(labels):
        raise ValueError(f"{len(images)} images but {len(labels)} labels")
    if not len(images):
        raise ValueError("no images to classify")


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _rgb(image: Any) -> Any:
    from PIL import Image

    if isinstance(image, Image.Image):
        return image.convert("RGB")
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    if arr.dtype != np.uint8:
        raise ValueError(f"images must be uint8 arrays or PIL images, got dtype {arr.dtype}")
    return Image.fromarray(arr[..., :3])
