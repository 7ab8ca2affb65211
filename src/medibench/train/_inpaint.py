"""Inpainting experts (MieDB-100k's modality-specific "healthy-tissue inpainting" LoRAs):
``diffusers-inpaint`` weights trained with LoRA on images and their masks.

``StableDiffusionInpaintPipeline`` (:class:`StableDiffusionInpaintFamily`): the UNet takes 9
channels, as the pipeline calls it: the noisy latents of the target, the mask at latent size,
and the latents of the target with the masked region blanked (``image * (mask < 0.5)``, the
pipeline's own masking). The target is the image to fill in (a healthy image, or the target of a
removal triplet), the mask the region to fill; denoising loss as Stable Diffusion's
(:class:`~medibench.train._families.DenoisingFamily`). FLUX.1 Fill is
:class:`medibench.train._flow.FluxFillFamily`; other inpainting pipelines (SDXL) are refused
before the first step.
"""

from __future__ import annotations

from typing import Any

from medibench.train._families import DenoisingFamily

__all__ = ["StableDiffusionInpaintFamily"]


class StableDiffusionInpaintFamily(DenoisingFamily):
    """SD inpainting (9-channel UNet) with LoRA; see the module docstring."""

    pipeline_class = "StableDiffusionInpaintPipeline"
    load_options = {"safety_checker": None, "requires_safety_checker": False}
    needs_mask = True

    def objective(self) -> dict[str, Any]:
        return {
            **super().objective(),
            "conditioning": "mask and masked-target latents concatenated on channels",
        }

    def loss(self, pixels, prompts, generator):
        import numpy as np
        import torch
        import torch.nn.functional as F

        target = self.to_tensor([p[1] for p in pixels])
        mask = torch.from_numpy(np.stack([p[2] for p in pixels])).to(self.device)[:, None].float()
        with torch.no_grad():
            latents = self.scaled_latents(target, generator)
            masked = self.scaled_latents(target * (mask < 0.5), generator)  # the pipeline's
            text = self._encode_text(prompts)
        m = F.interpolate(mask.to(latents.dtype), size=latents.shape[-2:])
        noisy, noise, t = self.noised(latents, generator)
        pred = self.net(torch.cat([noisy, m, masked], dim=1), t, text, return_dict=False)[0]
        return self.denoising_loss(pred, latents, noise, t)
