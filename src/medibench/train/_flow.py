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

from medibench.train._families import Family, _read_config

__all__ = ["FluxKontextFamily"]

#: the transformer's attention projections (diffusers' Flux LoRA examples' default targets)
FLUX_LORA_TARGETS = ("to_k", "to_q", "to_v", "to_out.0")


class FluxKontextFamily(Family):
    """FLUX.1 Kontext (``FluxKontextPipeline``) with LoRA on the transformer."""

    pipeline_class = "FluxKontextPipeline"
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
            "conditioning": "input image latents as reference tokens after the noisy ones",
            "timesteps": "uniform over the scheduler's training timesteps",
            "guidance_scale": self.guidance_scale,
        }

    def loss(self, pixels, prompts, generator):
        import torch

        pipe = self.pipeline
        vae = pipe.vae.config
        with torch.no_grad():
            x0 = self.encode_images([p[1] for p in pixels], sample=True, generator=generator)
            x0 = (x0 - vae.shift_factor) * vae.scaling_factor
            cond = self.encode_images([p[0] for p in pixels], sample=False, generator=generator)
            cond = (cond - vae.shift_factor) * vae.scaling_factor
            embeds, pooled, text_ids = self._encode_prompts(prompts)
        bsz, ch, h, w = x0.shape
        noise = torch.randn(x0.shape, generator=generator, device=self.device, dtype=x0.dtype)
        n = self.scheduler.config.num_train_timesteps
        idx = torch.randint(0, n, (bsz,), generator=generator, device=self.device).cpu()
        timesteps = self.scheduler.timesteps[idx].to(self.device)
        sigma = self.scheduler.sigmas[idx].to(self.device, x0.dtype).reshape(bsz, 1, 1, 1)
        noisy = (1.0 - sigma) * x0 + sigma * noise
        tokens = pipe._pack_latents(noisy, bsz, ch, h, w)
        cond_tokens = pipe._pack_latents(cond, bsz, ch, h, w)
        ids = pipe._prepare_latent_image_ids(bsz, h // 2, w // 2, self.device, x0.dtype)
        cond_ids = ids.clone()
        cond_ids[..., 0] = 1
        guidance = None
        if self.denoiser.config.guidance_embeds:
            guidance = torch.full((bsz,), self.guidance_scale, device=self.device)
        pred = self.net(
            hidden_states=torch.cat([tokens, cond_tokens], dim=1),
            timestep=timesteps / 1000,
            guidance=guidance,
            pooled_projections=pooled,
            encoder_hidden_states=embeds,
            txt_ids=text_ids,
            img_ids=torch.cat([ids, cond_ids], dim=0),
            return_dict=False,
        )[0]
        pred = pipe._unpack_latents(
            pred[:, : tokens.shape[1]],
            h * pipe.vae_scale_factor,
            w * pipe.vae_scale_factor,
            pipe.vae_scale_factor,
        )
        target = noise - x0
        return ((pred.float() - target.float()) ** 2).reshape(bsz, -1).mean(1).mean()

    def _encode_prompts(self, prompts: list[str]):
        """``(T5 embeddings, CLIP pooled embeddings, text position ids)`` of ``prompts``."""
        length = min(512, self.pipeline.tokenizer_2.model_max_length)
        return self.pipeline.encode_prompt(
            prompt=prompts, prompt_2=None, device=self.device, max_sequence_length=length
        )
