"""Qwen-Image-Edit with LoRA: flow matching with the input image as reference tokens.

As ``QwenImageEditPipeline`` conditions its transformer: the target's VAE latents
(``AutoencoderKLQwenImage``, one frame, sampled, normalised ``(z - latents_mean) /
latents_std``) and the input's (the posterior's mode, the pipeline's ``_encode_vae_image``)
are packed into 2x2 patch tokens; the noisy tokens are followed by the input's, with
``img_shapes`` ``[(1, h/2, w/2), (1, h/2, w/2)]`` per sample; the prompt is encoded by the
pipeline's own ``encode_prompt`` with the input image (Qwen2.5-VL over the edit template, its
hidden states and their mask). ``t`` is drawn uniformly from the scheduler's training
timesteps and, when the scheduler shifts dynamically (Qwen-Image's does), its sigma is shifted
by ``mu = calculate_shift(image tokens)`` exactly as the pipeline's sampling schedule is;
``x_t = (1 - sigma) x0 + sigma noise``, the transformer gets ``t / 1000`` (``1000 sigma``) and
its prediction for the noisy tokens is regressed on ``noise - x0`` (MSE, uniform weighting).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench.train._family import _read_config
from medibench.train._flow import FluxFamily

__all__ = ["QwenImageEditFamily"]


class QwenImageEditFamily(FluxFamily):
    """Qwen-Image-Edit (``QwenImageEditPipeline``); see the module docstring."""

    pipeline_class = "QwenImageEditPipeline"

    @classmethod
    def pipeline_options(cls, weights: Path) -> dict[str, Any]:
        from medibench.models._processors import has_torchvision, image_only_processor

        folder = Path(weights) / "processor"
        if has_torchvision() or not folder.is_dir():
            return {}
        from transformers import Qwen2VLProcessor

        return {"processor": image_only_processor(Qwen2VLProcessor, folder)}

    @classmethod
    def multiple(cls, weights: Path) -> int:
        vae = _read_config(weights, "vae")
        return 2 ** len(vae["temperal_downsample"]) * 2  # 2x2 patches of latents

    def objective(self) -> dict[str, Any]:
        objective = {k: v for k, v in super().objective().items() if k != "guidance_scale"}
        shift = "dynamic (the pipeline's calculate_shift)" if self._dynamic() else "none"
        return {
            **objective,
            "timestep_shift": shift,
            "conditioning": "input image latents as reference tokens after the noisy ones; "
            "the prompt encoded with the input image",
        }

    def latents(self, images, generator, *, sample: bool):
        """Normalised Qwen-Image VAE latents ``(B, C, 1, H/8, W/8)`` of uint8 images."""
        import torch

        vae = self.pipeline.vae
        x = self.to_tensor(images).unsqueeze(2).to(self.weight_dtype)
        dist = vae.encode(x).latent_dist
        z = dist.sample(generator) if sample else dist.mode()
        shape = (1, vae.config.z_dim, 1, 1, 1)
        mean = torch.tensor(vae.config.latents_mean).view(shape).to(z.device, z.dtype)
        std = torch.tensor(vae.config.latents_std).view(shape).to(z.device, z.dtype)
        return (z - mean) / std

    def loss(self, pixels, prompts, generator):
        import torch
        from diffusers.pipelines.qwenimage.pipeline_qwenimage_edit import calculate_shift
        from PIL import Image

        pipe = self.pipeline
        with torch.no_grad():
            x0 = self.latents([p[1] for p in pixels], generator, sample=True)
            cond = self.latents([p[0] for p in pixels], generator, sample=False)
            images = [Image.fromarray(p[0]) for p in pixels]
            embeds, mask = pipe.encode_prompt(prompt=prompts, image=images, device=self.device)
        bsz, ch, _, h, w = x0.shape
        mu = None
        if self._dynamic():
            sc = self.scheduler.config
            mu = calculate_shift((h // 2) * (w // 2), sc.get("base_image_seq_len", 256),
                                 sc.get("max_image_seq_len", 4096), sc.get("base_shift", 0.5),
                                 sc.get("max_shift", 1.15))  # fmt: skip
        noisy, noise, timesteps = self.noised(x0, generator, mu)
        tokens = pipe._pack_latents(noisy, bsz, ch, h, w)
        hidden = torch.cat([tokens, pipe._pack_latents(cond, bsz, ch, h, w)], dim=1)
        pred = self.net(
            hidden_states=hidden,
            timestep=(timesteps / 1000).to(x0.dtype),
            encoder_hidden_states=embeds,
            encoder_hidden_states_mask=mask,
            img_shapes=[[(1, h // 2, w // 2), (1, h // 2, w // 2)]] * bsz,
            return_dict=False,
        )[0]
        return self.velocity_loss(pred[:, : tokens.shape[1]], noise, x0)

    def _dynamic(self) -> bool:
        return bool(self.scheduler.config.get("use_dynamic_shifting", False))
