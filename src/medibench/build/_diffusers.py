"""``diffusers-inpaint:PATH``: a diffusers inpainting pipeline as a modification inpainter.

Any pipeline whose call takes ``mask_image`` (``StableDiffusionInpaintPipeline``,
``FluxFillPipeline``, ``FluxInpaintPipeline``), loaded with ``DiffusionPipeline.from_pretrained``
from a ``save_pretrained`` folder or a cached repo id, through the machinery every medibench
diffusers model shares (:class:`medibench.models._pipeline.DiffusersEditModel`: weights
checked before loading, device, dtype, one ``torch.Generator`` per seed). ``lora=PATH`` loads
LoRA weights (``load_lora_weights``, the modality-specific adapters MieDB-100k trains) at
``lora_scale``. The image is resized to the working size (sides multiples of ``multiple_of``,
longer side ``resolution`` when set) and the result resized back to the input's size (Lanczos),
so the build's size check holds; the mask is given as white-inside.

The folder's safety checker (Stable Diffusion inpainting ships one) is dropped by default, as
``ip2p`` does: it blanks anatomy, and a blanked fill would read as the verifier's rejections.
With ``safety_checker=true`` it runs, and a flagged fill raises
:class:`~medibench.models.ContentRefusedError` naming the checker; the build records that
attempt as ``refused`` (:mod:`medibench.build._modification`).
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from medibench.build._errors import BuildError
from medibench.models._errors import ContentRefusedError
from medibench.models._pipeline import DiffusersEditModel, _import_torch, _to_uint8

__all__ = ["DiffusersInpainter"]


class DiffusersInpainter(DiffusersEditModel):
    """An inpainting pipeline; ``inpaint(image, mask, *, prompt, seed)``.

    Args:
        path: weights folder or repo id.
        lora: optional LoRA weights (a folder or ``.safetensors`` file).
        lora_scale: the LoRA's weight (1).
        steps: denoising steps (30).
        guidance_scale: text guidance (pipeline default when ``None``).
        strength: how much of the masked area is re-noised (1: all).
        resolution: longer side of the working size (``None``: the input's size).
        safety_checker: run the folder's safety checker (off by default); a flagged fill
            raises ``ContentRefusedError`` naming it.
        device, dtype, local_files_only, load_options: as every diffusers model.
    """

    pipeline_class = "DiffusionPipeline"
    edits = False
    multiple_of = 8
    cuda_dtype = "bfloat16"

    def __init__(
        self,
        path: str,
        *,
        lora: str | None = None,
        lora_scale: float = 1.0,
        steps: int = 30,
        guidance_scale: float | None = None,
        strength: float = 1.0,
        resolution: int | None = None,
        safety_checker: bool = False,
        device: str = "auto",
        dtype: str = "auto",
        local_files_only: bool | None = None,
        load_options: dict[str, Any] | None = None,
    ) -> None:
        self.safety_checker = bool(safety_checker)
        super().__init__(
            path, name="diffusers-inpaint", steps=steps, resolution=resolution, device=device,
            dtype=dtype, local_files_only=local_files_only, load_options=load_options,
            lora=lora, lora_scale=lora_scale,
        )  # fmt: skip
        params = inspect.signature(self.pipeline.__call__).parameters
        if "mask_image" not in params:
            raise BuildError(
                f"{type(self.pipeline).__name__} from {self.weights} takes no mask_image: not an "
                "inpainting pipeline (use SD-inpainting or FLUX.1-Fill weights)"
            )
        self.guidance_scale, self.strength = guidance_scale, float(strength)
        self.name = f"diffusers-inpaint:{path}"

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "pipeline": type(self.pipeline).__name__,
                "weights": str(self.weights), "lora": self.lora, "lora_scale": self.lora_scale,
                "steps": self.steps, "guidance_scale": self.guidance_scale,
                "strength": self.strength, "resolution": self.resolution,
                "safety_checker": self.safety_checker}  # fmt: skip

    def _pipeline_options(self) -> dict[str, Any]:
        if self.safety_checker or not _has_component(self.weights, "safety_checker"):
            return {}
        return {"safety_checker": None, "requires_safety_checker": False}

    def inpaint(self, image: np.ndarray, mask: np.ndarray, *, prompt: str, seed: int) -> np.ndarray:
        torch = _import_torch()
        h, w = image.shape[:2]
        working = self._prepare(image)
        mask_image = Image.fromarray(mask.astype(np.uint8) * 255).resize(
            working.size, Image.Resampling.NEAREST
        )
        generator = torch.Generator(self._generator_device()).manual_seed(int(seed))
        kwargs: dict[str, Any] = {"num_inference_steps": self.steps, "strength": self.strength}
        if self.guidance_scale is not None:
            kwargs["guidance_scale"] = self.guidance_scale
        accepted = inspect.signature(self.pipeline.__call__).parameters
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        with torch.inference_mode():
            result = self.pipeline(
                prompt=[prompt], image=[working], mask_image=[mask_image], generator=[generator],
                height=working.size[1], width=working.size[0], output_type="np", **kwargs,
            )  # fmt: skip
        flags = getattr(result, "nsfw_content_detected", None)
        if flags and any(flags):
            checker = type(getattr(self.pipeline, "safety_checker", None)).__name__
            raise ContentRefusedError(f"the pipeline's safety checker ({checker}) flagged the fill")
        out = _to_uint8(np.asarray(result.images)[0])
        if out.shape[:2] != (h, w):
            out = np.asarray(Image.fromarray(out).resize((w, h), Image.Resampling.LANCZOS))
        return out


def _has_component(weights: Any, name: str) -> bool:
    """Whether the pipeline folder's ``model_index.json`` names a ``name`` component."""
    index = Path(weights) / "model_index.json"
    if not index.is_file():
        return False
    entry = json.loads(index.read_text(encoding="utf-8")).get(name)
    return isinstance(entry, list) and len(entry) == 2 and entry[0] is not None
