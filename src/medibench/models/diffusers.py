"""Editing models from Hugging Face diffusers pipelines (extra ``medibench[torch]``).

- ``ip2p``: InstructPix2Pix (``StableDiffusionInstructPix2PixPipeline``);
- ``flux-kontext``: FLUX.1 Kontext (``FluxKontextPipeline``);
- ``qwen-image-edit``: Qwen-Image-Edit (``QwenImageEditPipeline``, diffusers >= 0.35);
- ``diffusers``: any image-conditioned pipeline through ``DiffusionPipeline`` (OmniGen2,
  Step1X-Edit, ... whatever the installed diffusers or the weights' custom code provides).

Weights come from a local ``save_pretrained`` folder (``ip2p:/weights/ip2p``) or from the
Hugging Face cache by repo id, never downloaded when ``HF_HUB_OFFLINE=1``
(:mod:`medibench.models._weights`). Each item's seed becomes its own ``torch.Generator``, so the
same seed, settings, device and ``batch_size`` give the same bytes
(:mod:`medibench.models._pipeline`).

Resolution, per model (outputs are stored at the size the model made them; resizing to the
reference is the protocol's job):

- ``ip2p``: the input is resized so its longer side is ``resolution`` (512, as the official
  ``edit_cli.py``) and both sides are rounded down to a multiple of 8; ``resolution=None`` keeps
  the input size (rounded down to a multiple of 8). The output has that working size.
- ``flux-kontext``: the preferred Kontext resolution nearest the input's aspect ratio (the
  pipeline's own list, about 1024x1024 pixels), scaled to ``max_area``, sides rounded down to a
  multiple of 16 (:func:`kontext_size`); the output has that size, so a 4:3 input gives a
  (nearly) 4:3 output, not the pipeline's default 1024x1024.
- ``qwen-image-edit``: the pipeline resizes to about 1024x1024 pixels at the input's aspect
  ratio (sides multiples of 32) and returns that size. Without torchvision its processor is
  built without the video half (:mod:`medibench.models._processors`).
- ``diffusers``: whatever the pipeline does; ``resolution`` resizes the input first as for ip2p
  (multiple of 16) and, when the pipeline takes ``height`` and ``width``, asks for that size.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Unpack

import numpy as np
from PIL import Image

from medibench.models._errors import UnsupportedPipelineError
from medibench.models._pipeline import DiffusersEditModel, PipelineOptions
from medibench.models._processors import has_torchvision, image_only_processor
from medibench.models._weights import WeightsNotFoundError, check_weights_folder, resolve_weights

__all__ = [
    "DiffusersEditModel",
    "DiffusionPipelineModel",
    "FluxKontextModel",
    "InstructPix2PixModel",
    "PipelineOptions",
    "QwenImageEditModel",
    "WeightsNotFoundError",
    "check_weights_folder",
    "kontext_size",
    "resolve_weights",
]

#: FLUX.1 Kontext's preferred resolutions (width, height), as diffusers' FluxKontextPipeline
#: lists them: the sizes the model was trained at, about 1024x1024 pixels.
KONTEXT_RESOLUTIONS = (
    (672, 1568), (688, 1504), (720, 1456), (752, 1392), (800, 1328), (832, 1248), (880, 1184),
    (944, 1104), (1024, 1024), (1104, 944), (1184, 880), (1248, 832), (1328, 800), (1392, 752),
    (1456, 720), (1504, 688), (1568, 672),
)  # fmt: skip


def kontext_size(width: int, height: int, max_area: int = 1024 * 1024) -> tuple[int, int]:
    """``(width, height)`` in pixels at which FLUX.1 Kontext edits a ``width x height`` input:
    the preferred resolution nearest its aspect ratio (ties: the first listed, as the
    pipeline), scaled by ``sqrt(max_area / 1024**2)``, sides rounded down to a multiple of 16
    (at least 16). At the default ``max_area`` it is the preferred resolution itself.

    >>> kontext_size(640, 480), kontext_size(64, 48, 64 * 64)
    ((1184, 880), (64, 48))
    """
    aspect = width / height
    _, w, h = min((abs(aspect - pw / ph), pw, ph) for pw, ph in KONTEXT_RESOLUTIONS)
    scale = math.sqrt(max_area) / 1024
    return max(16, int(w * scale) // 16 * 16), max(16, int(h * scale) // 16 * 16)


class InstructPix2PixModel(DiffusersEditModel):
    """InstructPix2Pix (Brooks et al. 2023) through ``StableDiffusionInstructPix2PixPipeline``.

    Args:
        path: a ``save_pretrained`` folder or a Hugging Face repo id
            (default ``timbrooks/instruct-pix2pix``).
        name: the name recorded in runs.
        steps: denoising steps (100, as the official ``edit_cli.py``).
        guidance_scale: text guidance (7.5).
        image_guidance_scale: image guidance (1.5).
        negative_prompt: optional negative prompt.
        resolution: longer side of the working size in pixels (512); ``None`` keeps the input
            size. Sides are rounded down to a multiple of 8.
        safety_checker: run the Stable Diffusion safety checker (off by default: it blanks
            anatomy). When on, a flagged output raises ``ContentRefusedError``.
        device, dtype, batch_size, local_files_only, cpu_offload, load_options: the options of
            every diffusers model (:class:`~medibench.models._pipeline.PipelineOptions`).
            ``dtype="auto"`` on CUDA is bfloat16 where the GPU supports it, else float16 (the
            official scripts' dtype; ``dtype=float16`` asks for it anywhere).
    """

    pipeline_class = "StableDiffusionInstructPix2PixPipeline"
    default_weights = "timbrooks/instruct-pix2pix"
    multiple_of = 8
    cuda_dtype = "float16"
    call_attributes = ("guidance_scale", "image_guidance_scale", "negative_prompt")

    def __init__(
        self, path: str | None = None, *, name: str = "ip2p", steps: int = 100,
        guidance_scale: float = 7.5, image_guidance_scale: float = 1.5,
        negative_prompt: str | None = None, resolution: int | None = 512,
        safety_checker: bool = False, **common: Unpack[PipelineOptions],
    ) -> None:
        self.guidance_scale = float(guidance_scale)
        self.image_guidance_scale = float(image_guidance_scale)
        self.negative_prompt = negative_prompt or None
        self.safety_checker = bool(safety_checker)
        super().__init__(path, name=name, steps=steps, resolution=resolution, **common)

    def _pipeline_options(self) -> dict[str, Any]:
        if self.safety_checker:
            return {}
        return {"safety_checker": None, "requires_safety_checker": False}


class FluxKontextModel(DiffusersEditModel):
    """FLUX.1 Kontext [dev] through ``FluxKontextPipeline``.

    Args:
        path: a ``save_pretrained`` folder or a repo id
            (default ``black-forest-labs/FLUX.1-Kontext-dev``).
        steps: denoising steps (28). guidance_scale: distilled guidance (2.5, the model card's).
        max_area: the working area in pixels (1024 * 1024); the pipeline keeps the aspect ratio
            and snaps to its preferred Kontext resolutions.
        dtype: ``"auto"`` is bfloat16 on CUDA. Other options as :class:`InstructPix2PixModel`.
    """

    pipeline_class = "FluxKontextPipeline"
    default_weights = "black-forest-labs/FLUX.1-Kontext-dev"
    multiple_of = 16
    pipeline_resizes = True
    call_attributes = ("guidance_scale",)

    def __init__(
        self, path: str | None = None, *, name: str = "flux-kontext", steps: int = 28,
        guidance_scale: float = 2.5, max_area: int = 1024 * 1024, **common: Unpack[PipelineOptions],
    ) -> None:
        if max_area < 16 * 16:
            raise ValueError(f"max_area must be >= 256 pixels (16x16), got {max_area}")
        self.guidance_scale = float(guidance_scale)
        self.max_area = int(max_area)
        super().__init__(path, name=name, steps=steps, **common)

    def _prepare(self, image: np.ndarray) -> Image.Image:
        """The input resized to :func:`kontext_size` (the pipeline's own choice is made for the
        conditioning image only; its output would be square)."""
        size = kontext_size(image.shape[1], image.shape[0], self.max_area)
        pil = Image.fromarray(image)
        return pil if pil.size == size else pil.resize(size, Image.Resampling.LANCZOS)

    def _size_options(self, width: int, height: int) -> dict[str, Any]:
        # The pipeline rescales height x width to max_area: their product keeps the size as is.
        return {"height": height, "width": width, "max_area": width * height,
                "_auto_resize": False}  # fmt: skip


class QwenImageEditModel(DiffusersEditModel):
    """Qwen-Image-Edit through ``QwenImageEditPipeline`` (diffusers >= 0.35).

    Args:
        path: a ``save_pretrained`` folder or a repo id (default ``Qwen/Qwen-Image-Edit``).
        steps: denoising steps (50). true_cfg_scale: classifier-free guidance (4.0).
        negative_prompt: the model card's ``" "`` (true CFG needs one).
        Other options as :class:`InstructPix2PixModel`.
    """

    pipeline_class = "QwenImageEditPipeline"
    default_weights = "Qwen/Qwen-Image-Edit"
    multiple_of = 32
    pipeline_resizes = True
    call_attributes = ("true_cfg_scale",)

    def __init__(
        self, path: str | None = None, *, name: str = "qwen-image-edit", steps: int = 50,
        true_cfg_scale: float = 4.0, negative_prompt: str = " ", **common: Unpack[PipelineOptions],
    ) -> None:
        self.true_cfg_scale = float(true_cfg_scale)
        self.negative_prompt = negative_prompt
        super().__init__(path, name=name, steps=steps, **common)

    def _call_options(self, batch: int = 1) -> dict[str, Any]:
        # One negative prompt per item: the pipeline encodes each with its item's image.
        return {**super()._call_options(batch), "negative_prompt": [self.negative_prompt] * batch}

    def _pipeline_options(self) -> dict[str, Any]:
        folder = self.weights / "processor" if isinstance(self.weights, Path) else None
        if has_torchvision() or folder is None or not folder.is_dir():
            return {}
        from transformers import Qwen2VLProcessor

        return {"processor": image_only_processor(Qwen2VLProcessor, folder)}


class DiffusionPipelineModel(DiffusersEditModel):
    """Any image-conditioned editing pipeline, loaded with ``DiffusionPipeline.from_pretrained``.

    The pipeline is called as ``pipe(prompt=[...], image=[...], generator=[...],
    num_inference_steps=steps, output_type="np", **call_options)``.

    Args:
        path: a ``save_pretrained`` folder or a repo id (required).
        steps: denoising steps (28).
        guidance_scale: passed when set (else the pipeline's default).
        negative_prompt: passed when set.
        resolution: resize the input so its longer side is this (multiple of 16) before the call;
            ``None`` leaves sizing to the pipeline.
        call_options: extra keyword arguments of the pipeline call.
        trust_remote_code: allow the weights' own pipeline code (``custom_pipeline``).
        Other options as :class:`InstructPix2PixModel`.
    """

    multiple_of = 16
    pipeline_resizes = True
    call_attributes = ("guidance_scale", "negative_prompt")

    def __init__(
        self, path: str, *, name: str = "diffusers", steps: int = 28,
        guidance_scale: float | None = None, negative_prompt: str | None = None,
        resolution: int | None = None, call_options: dict[str, Any] | None = None,
        trust_remote_code: bool = False, **common: Unpack[PipelineOptions],
    ) -> None:
        self.guidance_scale = guidance_scale
        self.negative_prompt = negative_prompt
        self.extra_call_options = dict(call_options or {})
        load = {"trust_remote_code": True} if trust_remote_code else {}
        common["load_options"] = {**load, **(common.get("load_options") or {})}
        super().__init__(path, name=name, steps=steps, resolution=resolution, **common)
        import inspect

        params = inspect.signature(self.pipeline.__call__).parameters
        self._call_parameters = set(params)
        if "image" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            raise UnsupportedPipelineError(
                f"{type(self.pipeline).__name__} from {self.weights} takes no 'image': not an "
                "image-editing pipeline that the 'diffusers' model can call"
            )

    def _call_options(self, batch: int = 1) -> dict[str, Any]:
        return {**super()._call_options(batch), **self.extra_call_options}

    def _size_options(self, width: int, height: int) -> dict[str, Any]:
        # A set resolution is the working size: a pipeline that takes height and width (SDXL
        # InstructPix2Pix, whose default is its square sample size) is asked for it.
        if self.resolution is None or not {"height", "width"} <= self._call_parameters:
            return {}
        return {"height": height, "width": width}
