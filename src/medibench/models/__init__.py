"""Editing models: the :class:`EditModel` contract, the model registry and the baselines.

A model is any object with a ``name`` and ``edit(image, instruction, *, seed) -> image``
(:class:`EditModel`). Built-in models register lazily in :data:`MODELS`, so listing them imports
nothing heavy; :func:`load_model` builds one by name. Third parties add models through the
``medibench.models`` entry-point group.

Example:
    >>> import numpy as np
    >>> model = load_model("classical")
    >>> image = np.zeros((32, 32, 3), np.uint8)
    >>> model.edit(image, "Enhance the contrast", seed=0).shape
    (32, 32, 3)
"""

from __future__ import annotations

from typing import Any

from medibench.models._base import EditModel, UnsupportedInstructionError
from medibench.models._errors import ContentRefusedError
from medibench.models._instructions import (
    SUPPORTED_INSTRUCTIONS,
    EditIntent,
    parse_instruction,
)
from medibench.registry import Registry

__all__ = [
    "MODELS",
    "SUPPORTED_INSTRUCTIONS",
    "ContentRefusedError",
    "EditIntent",
    "EditModel",
    "UnsupportedInstructionError",
    "load_model",
    "parse_instruction",
]

#: Registry of editing models: name -> factory taking keyword settings.
MODELS: Registry[EditModel] = Registry("model")

#: The built-in models: name, "module:factory", help (imported on first use).
_BUILTIN: tuple[tuple[str, str, str], ...] = (
    ("identity", "medibench.models.baselines:IdentityModel",
     "Returns the input unchanged: the floor every editing model must beat."),
    ("classical", "medibench.models.baselines:ClassicalModel",
     "Rule-based baseline that reads the instruction: Otsu/morphology segmentation overlays "
     "(perception), blob detection + inpainting (removal), NL-means denoising, unsharp mask, "
     "CLAHE, bilateral smoothing (transformation). Raises on other instructions."),
    ("ip2p", "medibench.models.diffusers:InstructPix2PixModel",
     "InstructPix2Pix (diffusers; extra 'torch'). ip2p:PATH for local weights."),
    ("flux-kontext", "medibench.models.diffusers:FluxKontextModel",
     "FLUX.1 Kontext dev (diffusers; extra 'torch'). flux-kontext:PATH for local weights."),
    ("icedit", "medibench.models.editors:ICEditModel",
     "ICEdit: FLUX.1 Fill + its in-context LoRA on a diptych (extra 'torch'). icedit:PATH "
     "with lora=PATH."),
    ("imagic", "medibench.models.editors:ImagicModel",
     "Imagic on Stable Diffusion: embedding optimisation, UNet fine-tuning, interpolation "
     "(extra 'torch'). imagic:PATH."),
    ("qwen-image-edit", "medibench.models.diffusers:QwenImageEditModel",
     "Qwen-Image-Edit (diffusers >= 0.35; extra 'torch'). qwen-image-edit:PATH."),
    ("diffusers", "medibench.models.diffusers:DiffusionPipelineModel",
     "Any image-conditioned diffusers pipeline (OmniGen2, Step1X-Edit, ...): diffusers:PATH."),
    ("openai-image", "medibench.models.api:OpenAIImageModel",
     "OpenAI image edits (gpt-image-1, ...): openai-image:MODEL; key from OPENAI_API_KEY."),
    ("gemini-image", "medibench.models.api:GeminiImageModel",
     "Gemini image models (generateContent): gemini-image:MODEL; key from GEMINI_API_KEY."),
    ("http", "medibench.models.api:HTTPImageModel",
     "Any JSON image-editing endpoint, through a request template: http:URL."),
    # Answering models (text, or text + image): medibench.models.vlm and .compose.
    ("openai-chat", "medibench.models.vlm:OpenAIChatVLM",
     "OpenAI-compatible chat VLM (answers with text): openai-chat:MODEL."),
    ("transformers-vlm", "medibench.models.vlm:TransformersVLM",
     "A transformers image-text-to-text model saved locally: transformers-vlm:PATH."),
    ("unified", "medibench.models.unified:UnifiedModel",
     "A unified model answering with text and images (Janus, Janus-Pro): unified:PATH."),
    ("compose", "medibench.models.compose:CompositionalSystem",
     "A VLM planning for an editor: 'openai-chat:gpt-4o + openai-image:gpt-image-1'."),
)
for _name, _target, _help in _BUILTIN:
    MODELS.register(_name, _target, help=_help)


def load_model(name: str, /, **kwargs: Any) -> EditModel:
    """Build the model registered as ``name`` with keyword settings ``kwargs``.

    ``kwargs`` may hold a ``name`` of its own: the name the model records in runs.

    Raises:
        medibench.registry.UnknownNameError: no such model (the message suggests close names).
        TypeError: the factory did not return an :class:`EditModel`.
    """
    model = MODELS.create(name, **kwargs)
    if not isinstance(model, EditModel):
        raise TypeError(f"model factory '{name}' returned {type(model).__name__}, not an EditModel")
    return model
