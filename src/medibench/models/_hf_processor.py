"""Loading a transformers VLM's processor, with or without torchvision.

Under transformers 5 several processors (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, LLaVA-OneVision,
InternVL, SmolVLM) always build a video processor, and video processors need torchvision: on a
CPU-only torch without it, ``AutoProcessor.from_pretrained`` fails for the whole family although
images need no video half. :func:`load_processor` then builds the same processor class without
its video processor (:func:`images_only`) and says so in one line on stderr.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["UnsupportedModelError", "images_only", "load_processor", "torchvision_available"]

VIDEO = "video_processor"
#: Processors whose image path reads the video processor too (no images-only build).
_NEEDS_VIDEO = {"SmolVLMProcessor": "it reads the video processor's frame settings for images"}


class UnsupportedModelError(ValueError):
    """A folder medibench cannot answer with (not an image-text-to-text model, no prompt
    format, a processor that needs what is missing); the message names the folder and what
    to do."""


def torchvision_available() -> bool:
    """Whether torchvision can be imported (transformers' video processors need it)."""
    return importlib.util.find_spec("torchvision") is not None


def load_processor(folder: Path) -> Any:
    """The processor saved in ``folder`` (``AutoProcessor``); without torchvision, a processor
    class that wants a video processor is built without it (one line on stderr)."""
    import transformers

    cls = _processor_class(folder)
    if cls is None or torchvision_available() or VIDEO not in cls.get_attributes():
        return transformers.AutoProcessor.from_pretrained(folder)
    if cls.__name__ in _NEEDS_VIDEO:
        raise UnsupportedModelError(
            f"model {folder}: {cls.__name__} needs torchvision, which is not installed: "
            f"{_NEEDS_VIDEO[cls.__name__]} (install the torchvision build matching your torch)"
        )
    processor = images_only(cls).from_pretrained(folder, **{VIDEO: None})
    print(f"medibench: torchvision is not installed: {cls.__name__} built for images only "
          "(no video processor)", file=sys.stderr)  # fmt: skip
    return processor


@cache
def images_only(cls: Any) -> Any:
    """``cls`` (a ``ProcessorMixin`` subclass) without its video processor: the same class name
    and behaviour for images and text, ``video_processor`` left ``None``."""

    class ImagesOnly(cls):
        video_processor = None  # read (never called) by some processors' image path

        @classmethod
        def get_attributes(klass) -> list[str]:
            return [a for a in cls.get_attributes() if a != VIDEO]

    ImagesOnly.__name__ = ImagesOnly.__qualname__ = cls.__name__
    ImagesOnly.__doc__ = cls.__doc__
    return ImagesOnly


def _processor_class(folder: Path) -> Any:
    """The processor class ``folder``'s configs name (``processor_class``), or ``None``."""
    import transformers

    for name in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            value = json.loads(path.read_text(encoding="utf-8")).get("processor_class")
        except (OSError, ValueError):
            continue
        if isinstance(value, str) and hasattr(transformers, value):
            return getattr(transformers, value)
    return None
