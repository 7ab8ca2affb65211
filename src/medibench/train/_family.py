"""The family contract (:class:`Family`: load the pipeline, name the module that learns, the
loss of one micro-batch, save a checkpoint) and the UNet denoising objective several families
share (:class:`DenoisingFamily`); the families themselves are described in
:mod:`medibench.train._families`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from medibench.train._config import TrainConfig, TrainError

__all__ = ["DenoisingFamily", "Family", "UNET_LORA_TARGETS"]

#: UNet attention projections, the LoRA targets of diffusers' text-to-image LoRA example.
UNET_LORA_TARGETS = ("to_k", "to_q", "to_v", "to_out.0")


class Family:
    """One trainable model family (subclasses set the class attributes and the hooks)."""

    #: the diffusers pipeline class (loaded with ``from_pretrained``)
    pipeline_class: ClassVar[str] = "DiffusionPipeline"
    #: the pipeline attribute that learns
    denoiser_name: ClassVar[str] = "unet"
    #: the ``save_lora_weights`` argument that takes the denoiser's LoRA layers
    lora_argument: ClassVar[str] = "unet_lora_layers"
    lora_targets: ClassVar[tuple[str, ...]] = UNET_LORA_TARGETS
    #: options of the pipeline's ``from_pretrained``
    load_options: ClassVar[dict[str, Any]] = {}
    #: the samples must have masks
    needs_mask: ClassVar[bool] = False

    def __init__(self, weights: Path | str, config: TrainConfig, device: Any, dtype: Any) -> None:
        import diffusers

        self.config = config
        self.device, self.weight_dtype = device, dtype
        cls = getattr(diffusers, self.pipeline_class)
        self.pipeline = cls.from_pretrained(str(weights), **self.pipeline_options(Path(weights)))
        self.pipeline.set_progress_bar_config(disable=True)
        self.denoiser = getattr(self.pipeline, self.denoiser_name)
        #: what the loss calls: the denoiser, or its data-parallel wrapper (accelerate)
        self.net = self.denoiser
        for module in self._components():
            module.requires_grad_(False)
            module.to(device, dtype=dtype)
        self.denoiser.to(device)
        if config.method == "lora":
            self._add_lora()
        else:
            self.denoiser.requires_grad_(True)
            self.denoiser.to(dtype=self._trainable_dtype())
        if config.gradient_checkpointing:
            self.denoiser.enable_gradient_checkpointing()
        self.denoiser.train()

    # -- what subclasses provide --------------------------------------------------------------
    @classmethod
    def check(cls, weights: Path) -> None:
        """Raise :class:`TrainError` unless ``weights`` hold this family's pipeline."""
        index = _read_json(Path(weights) / "model_index.json")
        if index.get("_class_name") != cls.pipeline_class:
            raise TrainError(
                f"{weights} holds a {index.get('_class_name')}, not the "
                f"{cls.pipeline_class} this family trains"
            )

    @classmethod
    def pipeline_options(cls, weights: Path) -> dict[str, Any]:
        """Options of the pipeline's ``from_pretrained`` for ``weights`` (``load_options``)."""
        return dict(cls.load_options)

    @classmethod
    def multiple(cls, weights: Path) -> int:
        """Pixels that a side must be a multiple of for this model (read from its configs)."""
        raise NotImplementedError

    def objective(self) -> dict[str, Any]:
        """The objective, as the model card and ``train_config.json`` record it."""
        raise NotImplementedError

    def loss(self, pixels: list[tuple[np.ndarray, ...]], prompts: list[str], generator: Any):
        """The mean loss of one micro-batch: ``pixels`` holds ``(input, target[, mask])`` uint8
        arrays of one size, ``generator`` a ``torch.Generator`` on the device."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    def trainable_parameters(self) -> list[Any]:
        return [p for p in self.denoiser.parameters() if p.requires_grad]

    def trainable_state(self) -> dict[str, Any]:
        """The learning weights by name (CPU copies): what resuming loads back."""
        return {
            n: p.detach().cpu().clone()
            for n, p in self.denoiser.named_parameters()
            if p.requires_grad
        }

    def load_trainable_state(self, state: dict[str, Any]) -> None:
        params = dict(self.denoiser.named_parameters())
        missing = sorted(set(state) ^ {n for n, p in params.items() if p.requires_grad})
        if missing:
            raise TrainError(f"the checkpoint's weights do not match the model ({missing[:3]})")
        import torch

        with torch.no_grad():
            for name, value in state.items():
                params[name].copy_(value)

    def save(self, folder: Path, denoiser: Any) -> list[str]:
        """Write the checkpoint's weights into ``folder``; returns the files written."""
        folder.mkdir(parents=True, exist_ok=True)
        if self.config.method == "full":
            self.pipeline.save_pretrained(folder)
            return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        from diffusers.utils import convert_state_dict_to_diffusers
        from peft.utils import get_peft_model_state_dict

        layers = convert_state_dict_to_diffusers(get_peft_model_state_dict(denoiser))
        type(self.pipeline).save_lora_weights(folder, **{self.lora_argument: layers})
        return ["pytorch_lora_weights.safetensors"]

    def encode_images(self, images, *, sample: bool, generator: Any):
        """VAE latents of uint8 ``(H, W, 3)`` images (or a ``(B, 3, H, W)`` tensor in
        ``[-1, 1]``) as a ``(B, C, H/f, W/f)`` tensor in the weight dtype: sampled from the
        posterior (``sample=True``) or its mode, unscaled."""
        x = images if hasattr(images, "permute") else self.to_tensor(images)
        dist = self.pipeline.vae.encode(x.to(self.weight_dtype)).latent_dist
        return dist.sample(generator) if sample else dist.mode()

    def to_tensor(self, images: list[np.ndarray]):
        """uint8 ``(H, W, 3)`` images as one ``(B, 3, H, W)`` float tensor in ``[-1, 1]``."""
        import torch

        x = torch.from_numpy(np.stack(images)).to(self.device).permute(0, 3, 1, 2)
        return x.float() / 127.5 - 1.0

    def _components(self) -> list[Any]:
        import torch

        return [
            m
            for name, m in self.pipeline.components.items()
            if isinstance(m, torch.nn.Module) and name != self.denoiser_name
        ]

    def _trainable_dtype(self):
        import torch

        return torch.float32  # mixed precision autocasts; master weights stay float32

    def _add_lora(self) -> None:
        import torch
        from peft import LoraConfig

        self.denoiser.requires_grad_(False)
        self.denoiser.to(dtype=self.weight_dtype)
        config = LoraConfig(
            r=self.config.rank,
            lora_alpha=self.config.rank,
            init_lora_weights="gaussian",
            target_modules=list(self.lora_targets),
        )
        torch.manual_seed(self.config.seed)  # the LoRA's initial weights
        self.denoiser.add_adapter(config)
        for p in self.denoiser.parameters():
            if p.requires_grad:
                p.data = p.data.to(self._trainable_dtype())


class DenoisingFamily(Family):
    """A UNet trained by DDPM denoising (Stable Diffusion's recipe), the base of InstructPix2Pix
    and SD inpainting: the noise scheduler, the text encoder, the target, the loss."""

    def __init__(self, weights, config, device, dtype) -> None:
        from diffusers import DDPMScheduler

        super().__init__(weights, config, device, dtype)
        self.noise_scheduler = DDPMScheduler.from_config(self.pipeline.scheduler.config)
        self.prediction_type = self.noise_scheduler.config.prediction_type
        if self.prediction_type not in ("epsilon", "v_prediction"):
            raise TrainError(
                f"{weights}: scheduler prediction_type {self.prediction_type!r} "
                "is neither epsilon nor v_prediction"
            )
        self._null = None

    @classmethod
    def multiple(cls, weights: Path) -> int:
        vae = _read_config(weights, "vae")
        unet = _read_config(weights, "unet")
        return 2 ** (len(vae["block_out_channels"]) - 1) * 2 ** (
            len(unet["block_out_channels"]) - 1
        )

    def objective(self) -> dict[str, Any]:
        return {
            "objective": "denoising (DDPM)",
            "prediction_type": self.prediction_type,
            "snr_gamma": self.config.snr_gamma,
            "timesteps": f"uniform in [0, {self.noise_scheduler.config.num_train_timesteps})",
        }

    def noised(self, latents, generator):
        """``(noisy latents, noise, timesteps)`` for clean ``latents``."""
        import torch

        noise = torch.randn(
            latents.shape, generator=generator, device=self.device, dtype=latents.dtype
        )
        steps = self.noise_scheduler.config.num_train_timesteps
        t = torch.randint(
            0, steps, (latents.shape[0],), generator=generator, device=self.device
        ).long()
        return self.noise_scheduler.add_noise(latents, noise, t), noise, t

    def denoising_loss(self, pred, latents, noise, t):
        """MSE to the noise (``epsilon``) or the velocity (``v_prediction``), Min-SNR
        weighted when ``snr_gamma`` is set."""
        import torch.nn.functional as F

        if self.prediction_type == "epsilon":
            target = noise
        else:
            target = self.noise_scheduler.get_velocity(latents, noise, t)
        if self.config.snr_gamma is None:
            return F.mse_loss(pred.float(), target.float(), reduction="mean")
        return _min_snr_loss(pred, target, t, self.noise_scheduler, self.config.snr_gamma)

    def scaled_latents(self, images, generator, *, sample: bool = True):
        """VAE latents times the VAE's scaling factor (Stable Diffusion's latent space)."""
        latents = self.encode_images(images, sample=sample, generator=generator)
        return latents * self.pipeline.vae.config.scaling_factor

    def _encode_text(self, prompts: list[str]):
        tok = self.pipeline.tokenizer
        ids = tok(
            prompts,
            max_length=tok.model_max_length,
            padding="max_length",
            truncation=True,
            return_tensors="pt",
        ).input_ids
        return self.pipeline.text_encoder(ids.to(self.device))[0]

    def _null_text(self):
        if self._null is None:
            self._null = self._encode_text([""])
        return self._null


def _read_config(weights: Path, component: str) -> dict[str, Any]:
    return _read_json(Path(weights) / component / "config.json")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainError(f"{path} is missing: not a diffusers pipeline folder") from None


def _min_snr_loss(pred, target, t, scheduler, gamma: float):
    """Min-SNR-gamma weighted MSE (Hang et al. 2023), as diffusers' training examples."""
    import torch
    from diffusers.training_utils import compute_snr

    snr = compute_snr(scheduler, t)
    weight = torch.clamp(snr, max=gamma)
    weight = (
        weight / (snr + 1) if scheduler.config.prediction_type == "v_prediction" else weight / snr
    )
    per = ((pred.float() - target.float()) ** 2).mean(dim=list(range(1, pred.ndim)))
    return (per * weight).mean()
