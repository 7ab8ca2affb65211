"""MedEBench's diffusion editors beyond InstructPix2Pix: ICEdit and Imagic (extra ``torch``).

MedEBench (arXiv 2506.01921) compares seven editors. Besides Gemini (``gemini-image``) and
InstructPix2Pix (``ip2p``), two more run locally here:

- ``icedit`` (:class:`ICEditModel`): In-Context Edit (Zhang et al. 2025, River-Zhang/ICEdit,
  ``scripts/gradio_demo.py``): FLUX.1 Fill with the ICEdit LoRA
  edits a diptych. The input, resized to ``width`` (512) pixels wide, sits in the left half,
  the right half is masked, the prompt is ``A diptych with two side-by-side images of the same
  scene. On the right, the scene is exactly the same as on the left but {instruction}``, and
  the output is the right half. Defaults as the official scripts: 28 steps, guidance 50.
  Deviation: the height is rounded down to a multiple of 16 (the official code rounds to 8,
  and FluxFillPipeline then rounds the size it generates down to 16 itself); the official
  demo pastes the input only into the left half (the masked right half is black), as here.
- ``imagic`` (:class:`ImagicModel`): Imagic (Kawar et al. 2023), as diffusers' community
  pipeline ``examples/community/imagic_stable_diffusion.py`` implements it on Stable
  Diffusion: (1) the target text's embedding is optimised, the UNet frozen, to reconstruct the
  input (Adam, ``embedding_lr``); (2) the UNet is fine-tuned on the optimised embedding (Adam,
  ``unet_lr``); (3) the image is generated from ``alpha * target + (1 - alpha) * optimised``
  with classifier-free guidance against the empty prompt. Every image is edited from the
  folder's own UNet: the fine-tuned weights are put back after each edit. Deviations, named:
  every random draw (VAE sample, training noise and timesteps, initial latents) comes from the
  item's seeded generator (the community pipeline draws training noise unseeded); training
  noise follows the DDPM forward process of the pipeline's scheduler config (the community
  pipeline calls the pipeline's own scheduler, which is that for DDPM/DDIM/PNDM and undefined
  for Euler schedulers); training runs in float32 (``dtype=auto``; the community pipeline
  uses fp16 mixed precision); the working size keeps the input's aspect, longer side
  ``resolution`` (512), multiples of 8 (the community pipeline generates 512x512).

PaintByInpaint (``paint-by-inpaint/*`` on the Hub) publishes diffusers
``StableDiffusionInstructPix2PixPipeline`` folders: they run through ``ip2p:PATH``.
InstructDiffusion publishes one original-Stable-Diffusion ``.ckpt`` (an LDM state dict with an
8-channel UNet): ``ip2p:`` refuses it naming what differs and how to convert it
(:func:`medibench.models._weights.check_weights_folder`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np
from PIL import Image

from medibench.models._base import as_rgb_uint8
from medibench.models._pipeline import DiffusersEditModel, PipelineOptions, _to_uint8

__all__ = ["ICEDIT_PROMPT", "ICEditModel", "ImagicModel", "icedit_prompt"]

#: ICEdit's in-context prompt (its paper and scripts); ``{instruction}`` is the edit.
ICEDIT_PROMPT = (
    "A diptych with two side-by-side images of the same scene. On the right, the scene is "
    "exactly the same as on the left but {instruction}"
)


def icedit_prompt(instruction: str) -> str:
    """ICEdit's diptych prompt for ``instruction``.

    >>> icedit_prompt("remove the lesion")[-41:]
    'same as on the left but remove the lesion'
    """
    return ICEDIT_PROMPT.format(instruction=instruction)


class ICEditModel(DiffusersEditModel):
    """ICEdit: FLUX.1 Fill + the ICEdit LoRA on a diptych (see the module docstring).

    Args:
        path: a FLUX.1 Fill ``save_pretrained`` folder or repo id
            (default ``black-forest-labs/FLUX.1-Fill-dev``).
        lora: the ICEdit LoRA (required: a ``.safetensors`` file or a folder that
            ``load_lora_weights`` reads, e.g. a local copy of ``sanaka87/ICEdit-MoE-LoRA``).
        steps: denoising steps (28). guidance_scale: FLUX guidance (50, the official scripts').
        width: the width of each half in pixels (512, the official scripts'); the height keeps
            the input's aspect, rounded down to a multiple of 16. The output has that size.
        Other options as :class:`~medibench.models.diffusers.InstructPix2PixModel`.
    """

    pipeline_class = "FluxFillPipeline"
    default_weights = "black-forest-labs/FLUX.1-Fill-dev"
    multiple_of = 16
    call_attributes = ("guidance_scale",)

    def __init__(
        self, path: str | None = None, *, name: str = "icedit", steps: int = 28,
        guidance_scale: float = 50.0, width: int = 512, **common: Unpack[PipelineOptions],
    ) -> None:  # fmt: skip
        if not common.get("lora"):
            raise ValueError(
                "icedit needs the ICEdit LoRA: --model-option lora=PATH (a local copy of "
                "sanaka87/ICEdit-MoE-LoRA or RiverZ/normal-lora)"
            )
        if width < self.multiple_of or width % self.multiple_of:
            raise ValueError(f"width must be a multiple of 16 (>= 16), got {width}")
        self.guidance_scale = float(guidance_scale)
        self.width = int(width)
        super().__init__(path, name=name, steps=steps, **common)

    def _prepare(self, image: np.ndarray) -> Image.Image:
        """The diptych: the input resized to ``width`` wide on the left, black on the right."""
        h, w = image.shape[:2]
        height = max(16, int(h * self.width / w) // 16 * 16)
        half = Image.fromarray(image).resize((self.width, height), Image.Resampling.LANCZOS)
        diptych = Image.new("RGB", (2 * self.width, height))
        diptych.paste(half, (0, 0))
        return diptych

    def _prompts(self, instructions: list[str]) -> list[str]:
        return [icedit_prompt(i) for i in instructions]

    def _size_options(self, width: int, height: int) -> dict[str, Any]:
        mask = np.zeros((height, width), np.uint8)
        mask[:, width // 2 :] = 255  # the right half is generated
        return {"height": height, "width": width, "mask_image": Image.fromarray(mask)}

    def _finish(self, image: np.ndarray) -> np.ndarray:
        return image[:, image.shape[1] // 2 :]


class ImagicModel(DiffusersEditModel):
    """Imagic on Stable Diffusion: embedding optimisation, UNet fine-tuning, interpolation.

    Args:
        path: a Stable Diffusion (1.x/2.x) ``save_pretrained`` folder or repo id
            (default ``CompVis/stable-diffusion-v1-4``).
        embedding_steps: Adam steps optimising the text embedding (500).
        finetune_steps: Adam steps fine-tuning the UNet (1000).
        embedding_lr: the embedding's learning rate (1e-3). unet_lr: the UNet's (2e-6).
        alpha: interpolation weight of the target embedding (1.2; 0 reconstructs the input).
        steps: denoising steps (50). guidance_scale: classifier-free guidance (7.5).
        resolution: longer side of the working size (512), sides multiples of 8.
        dtype: ``auto`` is float32 everywhere (training). Other options as
            :class:`~medibench.models.diffusers.InstructPix2PixModel`; ``batch_size`` edits
            one image at a time (each image trains its own embedding and UNet).
    """

    pipeline_class = "StableDiffusionPipeline"
    default_weights = "CompVis/stable-diffusion-v1-4"
    multiple_of = 8

    def __init__(
        self, path: str | None = None, *, name: str = "imagic", embedding_steps: int = 500,
        finetune_steps: int = 1000, embedding_lr: float = 1e-3, unet_lr: float = 2e-6,
        alpha: float = 1.2, steps: int = 50, guidance_scale: float = 7.5,
        resolution: int | None = 512, **common: Unpack[PipelineOptions],
    ) -> None:  # fmt: skip
        for option, value in (("embedding_steps", embedding_steps),
                              ("finetune_steps", finetune_steps)):  # fmt: skip
            if value < 0:
                raise ValueError(f"{option} must be >= 0, got {value}")
        for option, rate in (("embedding_lr", embedding_lr), ("unet_lr", unet_lr)):
            if not rate > 0:
                raise ValueError(f"{option} must be > 0, got {rate}")
        self.embedding_steps, self.finetune_steps = int(embedding_steps), int(finetune_steps)
        self.embedding_lr, self.unet_lr = float(embedding_lr), float(unet_lr)
        self.alpha, self.guidance_scale = float(alpha), float(guidance_scale)
        if common.get("dtype", "auto") == "auto":
            common["dtype"] = "float32"  # Adam steps of 2e-6 vanish in half precision
        super().__init__(path, name=name, steps=steps, resolution=resolution, **common)
        self._unet_weights = {k: v.detach().clone() for k, v in self._unet.state_dict().items()}

    @property
    def _unet(self):
        return self.pipeline.unet

    def edit_batch(
        self, images: Sequence[np.ndarray], instructions: Sequence[str], *, seeds: Sequence[int]
    ) -> list[np.ndarray]:
        """Edit each image on its own (Imagic trains per image)."""
        if not (len(images) == len(instructions) == len(seeds)) or not images:
            raise ValueError("edit_batch needs as many images, instructions and seeds (>= 1)")
        return [self._edit_one(im, text, int(seed))
                for im, text, seed in zip(images, instructions, seeds, strict=True)]  # fmt: skip

    def _edit_one(self, image: np.ndarray, instruction: str, seed: int) -> np.ndarray:
        import torch

        prepared = self._prepare(as_rgb_uint8(image))
        generator = torch.Generator(self._generator_device()).manual_seed(seed)
        try:
            latents = self._encode(prepared, generator)
            target = self._embed(instruction)
            optimised = self._optimise_embedding(latents, target, generator)
            self._finetune_unet(latents, optimised, generator)
            mixed = self.alpha * target + (1 - self.alpha) * optimised
            with torch.inference_mode():
                result = self.pipeline(
                    prompt_embeds=mixed, negative_prompt="", height=prepared.size[1],
                    width=prepared.size[0], num_inference_steps=self.steps,
                    guidance_scale=self.guidance_scale, generator=generator, output_type="np",
                )  # fmt: skip
        finally:
            self._unet.load_state_dict(self._unet_weights)
            self._unet.requires_grad_(False)
            self._unet.eval()
        return _to_uint8(np.asarray(result.images)[0])

    def _encode(self, image: Image.Image, generator):
        """The input's latents, ``(1, 4, H / 8, W / 8)``, sampled and scaled as SD trains."""
        import torch

        vae = self.pipeline.vae
        pixels = self.pipeline.image_processor.preprocess(image).to(self.device, self.dtype)
        with torch.no_grad():
            sample = vae.encode(pixels).latent_dist.sample(generator=generator)
        return sample * vae.config.scaling_factor

    def _embed(self, text: str):
        import torch

        tokenizer = self.pipeline.tokenizer
        ids = tokenizer(text, padding="max_length", max_length=tokenizer.model_max_length,
                        truncation=True, return_tensors="pt").input_ids  # fmt: skip
        with torch.no_grad():
            return self.pipeline.text_encoder(ids.to(self.device))[0]

    def _optimise_embedding(self, latents, target, generator):
        """Step 1: Adam on a copy of ``target``, the UNet frozen."""
        embedding = target.detach().clone().requires_grad_(True)
        self._unet.requires_grad_(False)
        self._train([embedding], self.embedding_lr, self.embedding_steps, latents, embedding,
                    generator)  # fmt: skip
        return embedding.detach()

    def _finetune_unet(self, latents, embedding, generator) -> None:
        """Step 2: Adam on every UNet weight, the optimised embedding fixed."""
        self._unet.requires_grad_(True)
        self._unet.train()
        self._train(list(self._unet.parameters()), self.unet_lr, self.finetune_steps, latents,
                    embedding, generator)  # fmt: skip
        self._unet.requires_grad_(False)
        self._unet.eval()

    def _train(self, parameters, lr, steps, latents, embedding, generator) -> None:
        """``steps`` Adam steps on the denoising loss ``|eps - unet(x_t, t, embedding)|^2``,
        ``t`` uniform over the training timesteps, ``x_t`` the DDPM forward process."""
        import torch
        from diffusers import DDPMScheduler

        if steps == 0:
            return
        noising = DDPMScheduler.from_config(self.pipeline.scheduler.config)
        horizon = noising.config.num_train_timesteps
        optimiser = torch.optim.Adam(parameters, lr=lr)
        device = self._generator_device()
        for _ in range(steps):
            noise = torch.randn(latents.shape, generator=generator, device=device,
                                dtype=latents.dtype)  # fmt: skip
            t = torch.randint(0, horizon, (1,), generator=generator, device=device)
            noisy = noising.add_noise(latents, noise.to(latents.device), t.to(latents.device))
            predicted = self._unet(noisy, t.to(latents.device), embedding).sample
            loss = torch.nn.functional.mse_loss(predicted.float(), noise.float())
            loss.backward()
            optimiser.step()
            optimiser.zero_grad()

    def _pipeline_options(self) -> dict[str, Any]:
        # The Stable Diffusion safety checker blanks anatomy: dropped, as for ip2p by default.
        return {"safety_checker": None, "requires_safety_checker": False}
