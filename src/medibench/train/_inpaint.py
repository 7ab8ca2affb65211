"""Inpainting experts (MieDB-100k's modality-specific "healthy-tissue inpainting" LoRAs):
``diffusers-inpaint`` weights trained with LoRA on images and their masks.

``StableDiffusionInpaintPipeline`` (:class:`StableDiffusionInpaintFamily`): the UNet takes 9
channels, as the pipeline calls it: the noisy latents of the target, the mask at latent size,
and the latents of the target with the masked region blanked (``image * (mask < 0.5)``, the
pipeline's own masking). The target is the image to fill in (a healthy image, or the target of a
removal triplet), the mask the region to fill; denoising loss as Stable Diffusion's
(:class:`~medibench.train._families.DenoisingFamily`). ``StableDiffusionXLInpaintPipeline``
(:class:`StableDiffusionXLInpaintFamily`) adds SDXL's pooled text embeddings and time ids.
FLUX.1 Fill is :class:`medibench.train._flow.FluxFillFamily`; other inpainting pipelines are
refused before the first step.
"""

from __future__ import annotations

from typing import Any

from medibench.train._family import DenoisingFamily

__all__ = ["StableDiffusionInpaintFamily", "StableDiffusionXLInpaintFamily"]


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
            text, added = self.text_conditioning(prompts, tuple(target.shape[-2:]))
        m = F.interpolate(mask.to(latents.dtype), size=latents.shape[-2:])
        noisy, noise, t = self.noised(latents, generator)
        x = torch.cat([noisy, m, masked], dim=1)
        pred = self.net(x, t, text, added_cond_kwargs=added, return_dict=False)[0]
        return self.denoising_loss(pred, latents, noise, t)

    def text_conditioning(self, prompts: list[str], size: tuple[int, int]):
        """``(encoder hidden states, added_cond_kwargs)`` of the UNet for ``prompts`` on
        images of ``size`` ``(H, W)`` px: CLIP's last hidden states, nothing added."""
        return self._encode_text(prompts), None


class StableDiffusionXLInpaintFamily(StableDiffusionInpaintFamily):
    """SDXL inpainting (``StableDiffusionXLInpaintPipeline``, 9-channel UNet) with LoRA: as SD
    inpainting, the text through the pipeline's own ``encode_prompt`` (both CLIP encoders'
    penultimate hidden states side by side, the second's pooled projection) and the added
    conditions the pipeline gives the UNet: ``text_embeds`` (pooled) and ``time_ids`` from its
    ``_get_add_time_ids`` (original size = target size = the training image's, crop (0, 0);
    aesthetic score 6.0 when the pipeline's ``requires_aesthetics_score`` is set, its default)."""

    pipeline_class = "StableDiffusionXLInpaintPipeline"
    load_options = {}
    #: the pipeline call's defaults
    aesthetic_score, negative_aesthetic_score = 6.0, 2.5

    def objective(self) -> dict[str, Any]:
        return {
            **super().objective(),
            "added_conditions": "pooled text embeddings and time ids (size, crop (0, 0), size)",
        }

    def text_conditioning(self, prompts, size):
        pipe = self.pipeline
        embeds, _, pooled, _ = pipe.encode_prompt(
            prompts, device=self.device, num_images_per_prompt=1, do_classifier_free_guidance=False
        )
        ids, _ = pipe._get_add_time_ids(
            size, (0, 0), size, self.aesthetic_score, self.negative_aesthetic_score, size, (0, 0),
            size, dtype=embeds.dtype, text_encoder_projection_dim=int(pooled.shape[-1]),
        )  # fmt: skip
        ids = ids.to(self.device).repeat(len(prompts), 1)
        return embeds, {"text_embeds": pooled, "time_ids": ids}
