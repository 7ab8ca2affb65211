"""Processors of image-text models without their video half, where torchvision is missing.

transformers 5 builds a Qwen2-VL processor's video processor whenever it builds the processor,
and that class needs torchvision; medibench's CPU torch pin has none. An image-only pipeline
(Qwen-Image-Edit's text encoder, an answering VLM) never reads video, so the processor is built
from its image processor and tokenizer alone (:func:`image_only_processor`), with a one-line note.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

__all__ = ["has_torchvision", "image_only_processor"]

_log = logging.getLogger("medibench.models")


def has_torchvision() -> bool:
    """Whether torchvision is importable here (found, not imported)."""
    return importlib.util.find_spec("torchvision") is not None


def image_only_processor(processor_class: Any, folder: str | Path) -> Any:
    """``processor_class.from_pretrained(folder)`` without the ``video_processor`` attribute.

    ``processor_class`` is a transformers ``ProcessorMixin`` subclass (``Qwen2VLProcessor``);
    the returned object is an instance of a subclass of it that keeps every other attribute
    (image processor, tokenizer, chat template).
    """
    attributes = [a for a in processor_class.get_attributes() if a != "video_processor"]
    image_only: Any = type(
        processor_class.__name__, (processor_class,),
        {"get_attributes": classmethod(lambda cls: list(attributes))},
    )  # fmt: skip
    _log.info("torchvision is not installed: %s is built without its video processor "
              "(images only)", processor_class.__name__)  # fmt: skip
    return image_only.from_pretrained(str(folder))
