"""What each model family trains: its pipeline, its denoiser, its objective, its LoRA files.

A family object loads the base pipeline, names the module that learns (``unet`` or
``transformer``), computes the loss of one micro-batch, and saves a checkpoint: the whole
pipeline in the diffusers layout (``method="full"``) or ``pytorch_lora_weights.safetensors``
that ``pipeline.load_lora_weights`` reads (``method="lora"``).

- ``ip2p`` (:class:`InstructPix2PixFamily`): diffusers' InstructPix2Pix recipe. The target's
  VAE latents (sampled, times the scaling factor) are noised by a ``DDPMScheduler`` made from
  the pipeline's scheduler config at a uniform timestep; the input's latents (the distribution's
  mode) are concatenated on the channels; the UNet predicts the noise (``epsilon``) or the
  velocity (``v_prediction``), as the scheduler config says; MSE loss. Conditioning dropout for
  classifier-free guidance: with ``u ~ U(0, 1)`` per sample, the text is dropped (the empty
  prompt's embedding) when ``u < 2p`` and the image latents are zeroed when ``p <= u < 3p``, so
  each of text only, image only and both is dropped with probability ``p``.
- FLUX.1 Kontext and FLUX.1 Fill (flow matching) live in :mod:`medibench.train._flow`,
  Qwen-Image-Edit in :mod:`medibench.train._qwen`, SD
  inpainting in :mod:`medibench.train._inpaint` (both kinds of ``diffusers-inpaint`` experts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench.train._config import TrainError
from medibench.train._family import DenoisingFamily, Family, _read_json
from medibench.train._flow import FluxFillFamily, FluxKontextFamily
from medibench.train._inpaint import StableDiffusionInpaintFamily, StableDiffusionXLInpaintFamily
from medibench.train._qwen import QwenImageEditFamily

__all__ = ["DenoisingFamily", "Family", "InstructPix2PixFamily", "family_class"]


class InstructPix2PixFamily(DenoisingFamily):
    """InstructPix2Pix (``StableDiffusionInstructPix2PixPipeline``); see the module docstring."""

    pipeline_class = "StableDiffusionInstructPix2PixPipeline"
    load_options = {"safety_checker": None, "requires_safety_checker": False}

    def objective(self) -> dict[str, Any]:
        return {
            **super().objective(),
            "conditioning": "input image latents concatenated on channels",
            "conditioning_dropout": self.config.conditioning_dropout,
        }

    def loss(self, pixels, prompts, generator):
        import torch

        inputs, targets = [p[0] for p in pixels], [p[1] for p in pixels]
        with torch.no_grad():
            latents = self.scaled_latents(targets, generator)
            image_latents = self.encode_images(inputs, sample=False, generator=generator)
            text = self._encode_text(prompts)
        bsz = latents.shape[0]
        noisy, noise, t = self.noised(latents, generator)
        p = self.config.conditioning_dropout
        if p > 0:
            u = torch.rand(bsz, generator=generator, device=self.device)
            drop_text = (u < 2 * p).reshape(bsz, 1, 1)
            text = torch.where(drop_text, self._null_text().to(text.dtype), text)
            keep = 1 - ((u >= p) & (u < 3 * p)).to(image_latents.dtype)
            image_latents = image_latents * keep.reshape(bsz, 1, 1, 1)
        pred = self.net(torch.cat([noisy, image_latents], dim=1), t, text, return_dict=False)[0]
        return self.denoising_loss(pred, latents, noise, t)


def family_class(name: str, weights: Path | str | None = None) -> type[Family]:
    """The :class:`Family` subclass of a trainable family name; ``diffusers-inpaint`` picks
    its pipeline's (SD or SDXL inpainting, FLUX.1 Fill) from ``weights``' ``model_index.json``."""
    if name == "ip2p":
        return InstructPix2PixFamily
    if name == "flux-kontext":
        return FluxKontextFamily
    if name == "qwen-image-edit":
        return QwenImageEditFamily
    if name == "diffusers-inpaint":
        trained = (StableDiffusionInpaintFamily, StableDiffusionXLInpaintFamily, FluxFillFamily)
        known = {c.pipeline_class: c for c in trained}
        if weights is None:
            return StableDiffusionInpaintFamily
        found = _read_json(Path(weights) / "model_index.json").get("_class_name")
        if found not in known:
            raise TrainError(f"{weights} holds a {found}; diffusers-inpaint trains "
                         f"{', '.join(list(known)[:-1])} or {list(known)[-1]}")  # fmt: skip
        return known[found]
    raise TrainError(f"no trainable family {name!r}")
