"""FLUX.1 Kontext with LoRA: flow matching with the input image as reference tokens.

The recipe of diffusers' Kontext LoRA example (``train_dreambooth_lora_flux_kontext.py``), in
its image-to-image form: the target's VAE latents ``x0`` (sampled, ``(z - shift) * scale``) and
the input's (the posterior's mode, as the pipeline encodes its image) are packed into 2x2
patch tokens; ``t`` is drawn uniformly from the scheduler's training timesteps and
``x_t = (1 - sigma) x0 + sigma * noise``; the transformer sees the noisy tokens followed by the
input's tokens (position ids with first coordinate 1, the pipeline's), the prompt through CLIP
(pooled) and T5, ``t / 1000`` and the distilled guidance (``guidance_scale``, 1.0 here: the
model card's Kontext training value is not published; diffusers' example defaults to 3.5 for
text-to-image); its prediction for the noisy tokens is unpacked and regressed on the velocity
``noise - x0`` (MSE, uniform weighting).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench.train._family import Family, _read_config

__all__ = ["FluxFamily", "FluxFillFamily", "FluxKontextFamily"]

#: the transformer's attention projections (diffusers' Flux LoRA examples' default targets)
FLUX_LORA_TARGETS = ("to_k", "to_q", "to_v", "to_out.0")


class FluxFamily(Family):
    """What FLUX.1 pipelines share in training: the flow-matching noising, the prompt encoders,
    the transformer call on packed tokens and the velocity loss; subclasses add the condition
    (:meth:`condition`)."""

    denoiser_name = "transformer"
    lora_argument = "transformer_lora_layers"
    lora_targets = FLUX_LORA_TARGETS
    guidance_scale = 1.0

    def __init__(self, weights, config, device, dtype) -> None:
        from diffusers import FlowMatchEulerDiscreteScheduler

        super().__init__(weights, config, device, dtype)
        self.scheduler = FlowMatchEulerDiscreteScheduler.from_config(self.pipeline.scheduler.config)

    @classmethod
    def multiple(cls, weights: Path) -> int:
        vae = _read_config(weights, "vae")
        return 2 ** (len(vae["block_out_channels"]) - 1) * 2  # 2x2 patches of latents

    def objective(self) -> dict[str, Any]:
        return {
            "objective": "flow matching (rectified flow)",
            "prediction_type": "noise - x0",
            "timesteps": "uniform over the scheduler's training timesteps",
            "guidance_scale": self.guidance_scale,
        }

    def condition(self, pixels, tokens, ids, generator):
        """``(hidden states, image ids)`` the transformer sees, given the noisy ``tokens``
        ``(B, N, C)`` and their position ``ids`` ``(N, 3)``."""
        raise NotImplementedError

    def latents(self, images, generator, *, sample: bool):
        """FLUX latent space: ``(z - shift_factor) * scaling_factor``."""
        vae = self.pipeline.vae.config
        z = self.encode_images(images, sample=sample, generator=generator)
        return (z - vae.shift_factor) * vae.scaling_factor

    def loss(self, pixels, prompts, generator):
        import torch

        pipe = self.pipeline
        with torch.no_grad():
            x0 = self.latents([p[1] for p in pixels], generator, sample=True)
            embeds, pooled, text_ids = self._encode_prompts(prompts)
        bsz, ch, h, w = x0.shape
        noisy, noise, timesteps = self.noised(x0, generator)
        tokens = pipe._pack_latents(noisy, bsz, ch, h, w)
        ids = pipe._prepare_latent_image_ids(bsz, h // 2, w // 2, self.device, x0.dtype)
        with torch.no_grad():
            hidden, img_ids = self.condition(pixels, tokens, ids, generator)
        guidance = None
        if self.denoiser.config.guidance_embeds:
            guidance = torch.full((bsz,), self.guidance_scale, device=self.device)
        pred = self.net(
            hidden_states=hidden,
            timestep=timesteps / 1000,
            guidance=guidance,
            pooled_projections=pooled,
            encoder_hidden_states=embeds,
            txt_ids=text_ids,
            img_ids=img_ids,
            return_dict=False,
        )[0]
        return self.velocity_loss(pred[:, : tokens.shape[1]], noise, x0)

    def velocity_loss(self, pred, noise, x0):
        """Mean squared error of the packed prediction ``pred`` (the noisy tokens' part),
        unpacked to ``x0``'s shape, to the velocity ``noise - x0`` (mean per sample, then over
        the batch)."""
        f = self.pipeline.vae_scale_factor
        h, w = x0.shape[-2:]
        pred = self.pipeline._unpack_latents(pred, h * f, w * f, f)
        target = noise - x0
        bsz = x0.shape[0]
        return ((pred.float() - target.float()) ** 2).reshape(bsz, -1).mean(1).mean()

    def noised(self, x0, generator, mu: float | None = None):
        """``(x_t, noise, timesteps)`` for clean latents ``x0`` (batch first): ``t`` drawn
        uniformly from the scheduler's training timesteps, its sigma shifted by
        ``time_shift(mu, 1, sigma)`` when ``mu`` is given (dynamic shifting, timesteps then
        ``1000 sigma``), ``x_t = (1 - sigma) x0 + sigma noise``."""
        import torch

        bsz = x0.shape[0]
        noise = torch.randn(x0.shape, generator=generator, device=self.device, dtype=x0.dtype)
        n = self.scheduler.config.num_train_timesteps
        idx = torch.randint(0, n, (bsz,), generator=generator, device=self.device).cpu()
        timesteps = self.scheduler.timesteps[idx].to(self.device)
        sigma = self.scheduler.sigmas[idx].to(self.device)
        if mu is not None:
            sigma = self.scheduler.time_shift(mu, 1.0, sigma)
            timesteps = sigma * n
        sigma = sigma.to(x0.dtype).reshape(bsz, *[1] * (x0.ndim - 1))
        return (1.0 - sigma) * x0 + sigma * noise, noise, timesteps

    def _encode_prompts(self, prompts: list[str]):
        """``(T5 embeddings, CLIP pooled embeddings, text position ids)`` of ``prompts``."""
        length = min(512, self.pipeline.tokenizer_2.model_max_length)
        return self.pipeline.encode_prompt(
            prompt=prompts, prompt_2=None, device=self.device, max_sequence_length=length
        )


class FluxKontextFamily(FluxFamily):
    """FLUX.1 Kontext (``FluxKontextPipeline``): the input's latents (the posterior's mode) as
    reference tokens after the noisy ones, their position ids with first coordinate 1."""

    pipeline_class = "FluxKontextPipeline"

    def objective(self) -> dict[str, Any]:
        conditioning = "input image latents as reference tokens after the noisy ones"
        return {**super().objective(), "conditioning": conditioning}

    def condition(self, pixels, tokens, ids, generator):
        import torch

        cond = self.latents([p[0] for p in pixels], generator, sample=False)
        bsz, ch, h, w = cond.shape
        cond_ids = ids.clone()
        cond_ids[..., 0] = 1
        cond_tokens = self.pipeline._pack_latents(cond, bsz, ch, h, w)
        return torch.cat([tokens, cond_tokens], dim=1), torch.cat([ids, cond_ids], dim=0)


class FluxFillFamily(FluxFamily):
    """FLUX.1 Fill (``FluxFillPipeline``), an inpainting expert: the target with its mask
    blanked (``image * (1 - mask)``) encoded, and the mask folded into latent patches, both
    packed and concatenated on the channels of the noisy tokens, by the pipeline's own
    ``prepare_mask_latents``."""

    pipeline_class = "FluxFillPipeline"
    needs_mask = True

    def objective(self) -> dict[str, Any]:
        conditioning = "masked-target latents and the mask concatenated on token channels"
        return {**super().objective(), "conditioning": conditioning}

    def condition(self, pixels, tokens, ids, generator):
        import numpy as np
        import torch

        image = self.to_tensor([p[1] for p in pixels])
        mask = torch.from_numpy(np.stack([p[2] for p in pixels])).to(self.device)[:, None].float()
        bsz, _, height, width = image.shape
        mask, masked = self.pipeline.prepare_mask_latents(
            mask, (image * (1 - mask)).to(self.weight_dtype), bsz,
            self.pipeline.vae.config.latent_channels, 1, height, width, self.weight_dtype,
            self.device, generator,
        )  # fmt: skip
        return torch.cat([tokens, torch.cat([masked, mask], dim=-1)], dim=2), ids
